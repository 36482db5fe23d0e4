"""Giving up at ``hard_limit_s``: the fallback a resolve then answers, saying where it stood.

The owner of a flight notes in its :class:`Watch` what it waits for (a key's lock, the
machine's sweep lock), reports a long wait once (to its ``on_progress``, to the tasks
sharing its flight, and to the logger), and says where it stood if ``hard_limit_s`` ends
the flight. A task sharing another's sweep, one whose request was never keyed and one whose
settings file never answered give up with the fallbacks here too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import anyio
import attrs

from ._decision import Decision
from ._events import ProgressCallback, ProgressEvent
from ._flights import Flight
from ._lock_note import Holder
from ._locks import Lock
from ._shown import shown_file
from ._threads import hop

__all__ = [
    "HOLDER_LOOK_S",
    "STALLED_TRY_S",
    "Watch",
    "gave_up_keying",
    "gave_up_reading_settings",
    "gave_up_sharing",
]

logger = logging.getLogger("chunktune")


STALLED_TRY_S = 1.0
"""How long a try at a lock file may go unanswered before giving up at ``hard_limit_s``
suggests a stalled file system: a healthy one answers a try within milliseconds, and a
loaded machine starts the try's thread well within this. A try in flight for less is
named only as not yet answered (or, where earlier tries found the lock held, not named:
the wait is for that holder)."""

HOLDER_LOOK_S = 0.1
"""How long giving up at ``hard_limit_s`` may spend reading who holds the lock waited for, to
name it in the reason: a note that does not answer (a stalled file system) is left behind,
and the holder reported last is named. The one margin a resolve may run past its limit."""


def _gave_up(why: str, key: str, limit: float, native: int, policy_name: str) -> Decision:
    return Decision(
        chunk_size=None,
        native_chunk=native,
        source="fallback",
        reason=f"kept the native chunk {native}: gave up after the hard limit of {limit:g} s "
        f"(hard_limit_s) {why}",
        key=key,
        policy=policy_name,
    )


def gave_up_sharing(key: str, limit: float, native: int, policy_name: str) -> Decision:
    """The fallback of a task whose ``hard_limit_s`` ran out while it shared another's sweep."""
    why = "while another task of this process was still measuring this workload"
    return _gave_up(why, key, limit, native, policy_name)


def gave_up_keying(limit: float, native: int, policy_name: str) -> Decision:
    """The fallback of a task whose ``hard_limit_s`` ran out before its request was keyed."""
    why = (
        "while the workload's signature() (or the cache file) had not answered; "
        "nothing was measured"
    )
    return _gave_up(why, "", limit, native, policy_name)


def gave_up_reading_settings(limit: float, native: int, policy_name: str) -> Decision:
    """The fallback of a task whose ``hard_limit_s`` (a Policy's it was given) ran out
    before its settings file was read (``settings=None``)."""
    why = "while the settings file had not answered; nothing was measured"
    return _gave_up(why, "", limit, native, policy_name)


@attrs.define
class Watch:
    """Where an owned flight stands, so that giving up at the hard limit can say why.

    Its waits are told to the owner's ``on_progress`` and to the tasks sharing ``flight``.
    """

    on_progress: ProgressCallback | None
    native: int = attrs.field(kw_only=True)
    policy_name: str = attrs.field(kw_only=True)
    flight: Flight | None = attrs.field(default=None, kw_only=True)
    waiting_for: Literal["key", "sweep"] | None = None
    lock: Lock | None = None
    holder: Holder | None = None
    sweeping: bool = False
    settles: bool = False  # the workload's run() in flight is waited for (settle_on_cancel)
    probe_seconds: float = 0.0  # the seconds of the calls the sweep has made so far
    decided: Decision | None = None  # measured; being stored

    def waiting(self, what: Literal["key", "sweep"], lock: Lock) -> Callable[[Holder | None], None]:
        """Note the wait for ``lock``; the callback reports it once it has lasted a moment,
        and again when another process takes the lock over."""
        self.waiting_for, self.lock, self.holder = what, lock, None
        began = anyio.current_time()

        def on_wait(holder: Holder | None) -> None:
            self.holder = holder
            who = holder.describe() if holder is not None else "holder unknown"
            message = (
                f"waiting for another sweep ({who})"
                if what == "sweep"
                else f"waiting for another process measuring this workload ({who})"
            )
            logger.info("chunktune: %s", message)
            waited = anyio.current_time() - began
            event = ProgressEvent(kind="waiting", elapsed_s=waited, message=message)
            if self.flight is not None:
                self.flight.tell(event)
            if self.on_progress is not None:
                self.on_progress(event)

        return on_wait

    async def gave_up(self, key: str, limit: float) -> Decision:
        """The fallback once ``hard_limit_s`` ran out, saying where it stood."""
        lock = self.lock if self.waiting_for is not None else None
        # how long the try in flight had gone unanswered, where that is what is known: its
        # first try, or one long unanswered. One only slow to answer after earlier tries
        # found the lock held tells nothing new: the wait is for that holder, as between tries
        unanswered = None if lock is None else lock.in_flight_s()
        if lock is not None and lock.refused and (unanswered or 0.0) < STALLED_TRY_S:
            unanswered = None
        if lock is not None and unanswered is None:
            # the holder reported may be gone: killed, and another process (on another
            # host of a shared cache) took the lock over; name whoever holds it now
            with anyio.move_on_after(HOLDER_LOOK_S):
                self.holder = await hop(lock.holder, abandon_on_cancel=True) or self.holder
        who = f" ({self.holder.describe()})" if self.holder is not None else ""
        if lock is not None and unanswered is not None:
            what = "the machine's sweep lock" if self.waiting_for == "sweep" else "this key's lock"
            stalled = " (a stalled file system?)" if unanswered >= STALLED_TRY_S else ""
            why = (
                f"while its try at {what} ({shown_file(lock.path)}) had not answered after "
                f"{unanswered:.2g} s{stalled}; nothing was measured"
            )
        elif self.waiting_for == "sweep":
            why = f"while another sweep{who} held the machine; nothing was measured"
        elif self.waiting_for == "key":
            why = f"while another process{who} was measuring this workload"
        elif self.sweeping and self.settles:
            why = (
                "before the sweep finished; the sweep was stopped once its run() in flight "
                "had ended (the workload settles on cancel) and nothing more is measured"
            )
        elif self.sweeping:
            why = (
                "before the sweep finished; the sweep was abandoned: the run() in flight "
                "finishes on its own and nothing more is measured"
            )
        else:
            why = "before the sweep started"
        return attrs.evolve(
            _gave_up(f"{why}; nothing was cached", key, limit, self.native, self.policy_name),
            probe_seconds=self.probe_seconds,
        )
