"""A Ray stand-in that runs the real registry in this process, on its own event loop.

``chunktune.ray`` asks the registry through ``handle.method.remote(...)`` and
``ray.get(ref, timeout=...)``; here a call is the real :class:`Registry` coroutine
scheduled on a loop thread (in the order the calls were sent, as an actor runs them),
and ``ray.get`` waits for its result, handing on what the method raised wrapped as Ray
wraps it (a ``RayTaskError`` whose ``cause`` is the original). Every worker resolving
through one :class:`RegistryRay` shares one registry, as the workers of one cluster do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import types
from collections.abc import Iterator
from typing import Any

from chunktune._ray_api import NODE_TYPE_LABEL
from chunktune._ray_registry import Registry


class RayError(Exception):
    """``ray.exceptions.RayError``: the base of Ray's own errors."""


class RayTaskError(RayError):
    """``ray.exceptions.RayTaskError``: an actor's method raised ``cause``."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(f"ray::Registry (the actor raised {type(cause).__name__}: {cause})")
        self.cause = cause


class _Handle:
    """An actor handle: ``handle.claim.remote(...)`` runs ``Registry.claim`` on the loop."""

    def __init__(self, registry: Registry, loop: asyncio.AbstractEventLoop, sent: list[str]):
        self._registry, self._loop, self._sent = registry, loop, sent

    def __getattr__(self, name: str) -> types.SimpleNamespace:
        method = getattr(self._registry, name)

        def remote(*args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            self._sent.append(name)
            return asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop)

        return types.SimpleNamespace(remote=remote)


class RegistryRay:
    """``ray`` as ``chunktune.ray`` uses it, on node type ``node_type``, with one registry."""

    def __init__(self, loop: asyncio.AbstractEventLoop, node_type: str = "a") -> None:
        self.registry = Registry()
        self.sent: list[str] = []  # the registry methods called, in order
        self.handle = _Handle(self.registry, loop, self.sent)
        self._loop = loop
        self._labels = {NODE_TYPE_LABEL: node_type}
        self.exceptions = types.SimpleNamespace(RayError=RayError, RayTaskError=RayTaskError)

    def restart(self) -> None:
        """The registry actor as Ray restarts it after its process died: empty."""
        self.registry = self.handle._registry = Registry()

    def is_initialized(self) -> bool:
        return True

    def get(self, ref: concurrent.futures.Future[Any], timeout: float | None = None) -> Any:
        try:
            return ref.result(timeout)
        except Exception as exc:
            if not ref.done() or ref.cancelled():
                raise  # the wait timed out (Ray's GetTimeoutError), or nothing ran
            raise RayTaskError(exc) from exc

    def cancel(self, ref: concurrent.futures.Future[Any]) -> None:
        """``ray.cancel`` of an async actor's call: its coroutine is cancelled on the loop."""
        ref.cancel()

    def get_runtime_context(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            get_node_id=lambda: "n" * 56,
            get_job_id=lambda: "01000000",
            get_node_labels=lambda: dict(self._labels),
        )

    def run(self, coroutine: Any) -> Any:
        """Run a registry coroutine (``ray.registry.events(...)``, say) on its loop."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(60)


@contextlib.contextmanager
def registry_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a daemon thread, as the registry actor's, for the block."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="registry", daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        # Calls sent late (an ``abandon`` after the hard limit) run before the loop
        # stops: a task left pending is destroyed later, in whatever test is running.
        asyncio.run_coroutine_threadsafe(_drain(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


async def _drain() -> None:
    """Let the loop's other tasks finish (a second at most), then cancel what is left."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if not others:
        return
    _, pending = await asyncio.wait(others, timeout=1.0)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
