"""The settings a resolve reads (for ``settings=None``), bounded by a given Policy's limit.

A :class:`Policy` object given with ``hard_limit_s`` bounds the settings file's read: a
read that has not ended by then is left behind in a daemon thread and the native chunk
is returned. A policy's name (or none) is looked up in the settings read, so only the
loop can bound that read; a repeat, the file unchanged, is answered by a stat alone.
"""

from __future__ import annotations

import logging

import anyio
import attrs

from ._counts import native_chunk
from ._decision import Decision
from ._discovered import SETTINGS_THREAD, discovered_settings, remembered_settings
from ._giving_up import gave_up_reading_settings
from ._policy import Policy
from ._request import Ask
from ._threads import hop, in_own_thread, wait_in_thread

__all__ = ["given_limit", "settings_at_hand", "with_settings"]

logger = logging.getLogger("chunktune")


def given_limit(asked: Ask) -> float | None:
    """The ``hard_limit_s`` of a Policy object the caller gave: known before any settings
    file is read (a policy's name, or none, is looked up in the settings read)."""
    return asked.policy.hard_limit_s if isinstance(asked.policy, Policy) else None


def _unread_settings(asked: Ask, limit: float) -> Decision:
    """The fallback once a given Policy's ``hard_limit_s`` ran out before the settings file
    was read; logged as a warning, there being no settings to say how to report it."""
    native = native_chunk(asked.num_envs, asked.nthread)
    decision = gave_up_reading_settings(limit, native, "custom")
    logger.warning("chunktune: %s", decision.reason)
    return decision


def settings_at_hand(asked: Ask) -> Ask | None:
    """``asked`` as :func:`~chunktune._here.decide_here` may take it on the calling thread;
    None where a settings file is still to be read under a given Policy's ``hard_limit_s``,
    a read that only the loop bounds (:func:`with_settings`).

    Blocking (a stat): a repeat, the file unchanged, is answered here, no thread started.
    """
    if asked.manual is not None or asked.settings is not None or given_limit(asked) is None:
        return asked
    known = remembered_settings()
    return None if known is None else attrs.evolve(asked, settings=known)


async def with_settings(asked: Ask, started: float) -> Ask | Decision:
    """``asked`` with the settings discovery finds (for ``settings=None``).

    Under a Policy given with ``hard_limit_s`` the read is bounded by that limit, counted
    from ``started`` (the loop's clock): a read that has not ended by then is left behind in
    a daemon thread, and the fallback is returned instead.

    Raises:
        ConfigError: as :func:`chunktune.load_settings`.
    """
    limit = given_limit(asked)
    if limit is None:
        return attrs.evolve(asked, settings=await wait_in_thread(discovered_settings))
    # a repeat is answered by a stat in a hop, no thread of its own started
    settings = await hop(remembered_settings)
    if settings is not None:
        return attrs.evolve(asked, settings=settings)
    with anyio.move_on_after(started + limit - anyio.current_time()):
        settings = await in_own_thread(discovered_settings, name=SETTINGS_THREAD)
    if settings is None:
        return _unread_settings(asked, limit)
    return attrs.evolve(asked, settings=settings)
