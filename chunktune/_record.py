"""Recording a real landscape: every chunk size, in rounds of fresh random order. Blocking."""

from __future__ import annotations

import datetime
import numbers
import os
import time
from collections.abc import Callable, Sequence

import numpy as np

from ._counts import check_count, check_seed, native_chunk, upper_chunk
from ._errors import InvalidArgumentError
from ._events import ProgressCallback, ProgressEvent
from ._exiting import call_in_flight
from ._fingerprint import device_fingerprint
from ._reading import MAX_TRACE_BYTES
from ._returned import check_seconds, check_signature
from ._shown import plural, shown
from ._trace import Trace
from ._workload import Workload

__all__ = ["MAX_CALLS", "check_calls", "check_sizes", "record"]


def _no_check() -> None:
    return None


def _sizes_are(values: Sequence[object], one: str, many: str) -> str:
    """``"chunk size 9 <one>"`` or ``"chunk sizes 0, 9 <many>"``: each value once, as given."""
    texts = list(dict.fromkeys(map(shown, values)))
    if len(texts) == 1:
        return f"chunk size {texts[0]} {one}"
    return f"chunk sizes {', '.join(texts)} {many}"


def check_sizes(sizes: Sequence[int] | None, num_envs: int, nthread: int) -> list[int]:
    """The sizes to record, ascending, native's included: every size when ``sizes`` is None.

    Raises:
        InvalidArgumentError: a size is no integer (numpy's count) or is outside
            ``1..ceil(N/T)``, or ``sizes`` is empty.
    """
    upper = upper_chunk(num_envs, nthread)
    if sizes is None:
        return list(range(1, upper + 1))
    sizes = list(sizes)  # a numpy array has no truth value
    if not sizes:
        raise InvalidArgumentError("sizes is empty; expected at least one chunk size")
    where = f"1..{upper} (ceil(N/T) for {plural(num_envs, 'env')} on {plural(nthread, 'thread')})"
    # numpy's integers count, as everywhere a chunk size is taken (np.arange gives them)
    odd = [c for c in sizes if isinstance(c, bool) or not isinstance(c, numbers.Integral)]
    if odd:
        odd_sizes = _sizes_are(odd, "is not an integer", "are not integers")
        raise InvalidArgumentError(f"{odd_sizes}; expected integers in {where}")
    bad = [c for c in sizes if not 1 <= c <= upper]
    if bad:
        raise InvalidArgumentError(f"{_sizes_are(bad, 'is outside', 'are outside')} {where}")
    return sorted({*(int(c) for c in sizes), native_chunk(num_envs, nthread)})


# a call writes at least 10 bytes: its seconds ("0.1, ") and its place in the order (a
# line of its own, indented 3); a trace of more calls than this is past what load_trace
# reads, so it could never be replayed
MAX_CALLS = MAX_TRACE_BYTES // 10
"""The most calls (sizes times rounds) a recording may make."""


def check_calls(sizes: int, rounds: int) -> None:
    """Refuse a recording of ``sizes`` sizes in ``rounds`` rounds whose trace no one could read.

    Raises:
        InvalidArgumentError: it would make more than :data:`MAX_CALLS` calls.
    """
    if sizes * rounds > MAX_CALLS:
        mib = MAX_TRACE_BYTES // 2**20
        raise InvalidArgumentError(
            f"{plural(rounds, 'round')} of {plural(sizes, 'size')} make "
            f"{sizes * rounds} calls; expected at most "
            f"{MAX_CALLS} (a trace holds 10 bytes a call or more, and one past {mib} MiB "
            "cannot be read back)"
        )


def _loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def record(
    workload: Workload,
    *,
    rounds: int,
    sizes: Sequence[int] | None = None,
    seed: int = 0,
    description: str = "",
    on_event: ProgressCallback | None = None,
    check_cancelled: Callable[[], None] = _no_check,
    clock: Callable[[], float] = time.monotonic,
) -> Trace:
    """Measure every size (or ``sizes``) ``rounds`` times, each round in a fresh random order.

    One unrecorded native call first warms the pool. Events: one ``probe`` per call
    (``round`` counts from 1). The trace's signature is the workload's as resolve keys it
    (:func:`~chunktune._returned.check_signature`: numpy numbers as the Python numbers
    they hold), taken before anything is measured.

    Raises:
        InvalidArgumentError: ``rounds`` is not an integer from 1 to 2**31 - 1, a size
            is no integer or out of range, or sizes times rounds is past :data:`MAX_CALLS`.
        WorkloadError: ``signature()`` returned a value that cannot be keyed, or ``run()``
            returned something other than positive seconds.
        UsageError: Python's exit has begun: no call starts any more.
        Exception: whatever ``signature()``, ``run()`` or ``check_cancelled()`` raised.
    """
    rounds = check_count(rounds, what="rounds")  # at most what a trace may hold
    n, t = workload.num_envs, workload.nthread
    chunks = check_sizes(sizes, n, t)
    check_calls(len(chunks), rounds)  # said now, not when memory or the reader gives out
    # refused now, not after minutes of recording; keyed as a resolve of it would be
    signature = check_signature(workload.signature())
    rng = np.random.default_rng(check_seed(seed))
    samples: dict[int, list[float]] = {c: [] for c in chunks}
    order: list[tuple[int, ...]] = []
    machine = {**device_fingerprint(), "loadavg_start": _loadavg()}
    recorded = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    start = clock()
    check_cancelled()
    with call_in_flight():  # Python's exit waits for it, as for a sweep's probe
        workload.run(None)
    for r in range(1, rounds + 1):
        this = tuple(chunks[int(i)] for i in rng.permutation(len(chunks)))
        for c in this:
            check_cancelled()
            with call_in_flight():
                seconds = check_seconds(workload.run(c), c)
            samples[c].append(seconds)
            if on_event is not None:
                on_event(
                    ProgressEvent(
                        kind="probe",
                        chunk_size=c,
                        seconds=seconds,
                        round=r,
                        elapsed_s=clock() - start,
                    )
                )
        order.append(this)
    machine["loadavg_end"] = _loadavg()
    return Trace(
        num_envs=n,
        nthread=t,
        rounds=rounds,
        samples={c: tuple(s) for c, s in samples.items()},
        signature=signature,
        machine=machine,
        recorded=recorded,
        description=description,
        order=tuple(order),
    )
