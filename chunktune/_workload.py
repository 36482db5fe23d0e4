"""The Workload protocol, and reading one: its members, each read once, and its own code
called so that what it raises stays its failure.

Checking the counts a pool is given is ``_counts``'s, checking what a workload's methods
return ``_returned``'s. The base of chunktune's own modeled workloads
(simulated, replayed) is ``_modeled``'s.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ._counts import MAX_COUNT as MAX_COUNT
from ._counts import check_chunk_size as check_chunk_size
from ._counts import check_count as check_count
from ._counts import check_seed as check_seed
from ._counts import native_chunk as native_chunk
from ._counts import upper_chunk as upper_chunk
from ._errors import InvalidArgumentError, WorkloadError
from ._named import UNREAD, named, told
from ._returned import MAX_SECONDS as MAX_SECONDS
from ._returned import MIN_SECONDS as MIN_SECONDS
from ._returned import SignatureValue as SignatureValue
from ._returned import as_seconds as as_seconds
from ._returned import check_seconds as check_seconds
from ._returned import check_signature as check_signature
from ._returned import max_int_digits as max_int_digits
from ._returned import plain_scalar
from ._shown import shown_one, type_named

# the counts' and the returned values' names, once defined here, are re-exported
# (``X as X``): tests, benchmarks and older callers import them from here
__all__ = [
    "SETTLE_ON_CANCEL",
    "Workload",
    "WorkloadRaised",
    "call_workload",
    "check_workload",
    "raised_by_workload",
    "read_workload",
    "settles_on_cancel",
]

_T = TypeVar("_T")


@runtime_checkable
class Workload(Protocol):
    """One representative batched pool call that chunktune can time.

    ``num_envs`` is the batch size N (how many envs one call steps), ``nthread`` the
    pool's worker count T: each an integer >= 1. ``signature()`` returns everything
    besides N and T that changes the cost of a step; it goes into the cache key.
    ``run(chunk_size)`` performs one blocking pool call with that chunk size (``None`` =
    the pool's native default) and returns the seconds it took; the sweep trusts that
    figure.

    chunktune only reads ``num_envs`` and ``nthread``, so a plain attribute, a
    property or a frozen record's field each satisfies the protocol, in a class that
    subclasses ``Workload`` or one that does not. Type checkers agree for a class that
    does not; in a subclass, pyright takes only properties (mypy takes all three).

    One member is optional, and no part of what ``isinstance`` checks:
    ``settle_on_cancel``, a bool (default False). True says that ``run()`` steps a pool
    its caller owns and may step again once the resolve returns: a resolve that is
    cancelled, or that ``hard_limit_s`` ends, then returns only once the ``run()`` in
    flight has returned, and no later one starts. False keeps the prompt return: the
    call in flight finishes on its own, in the sweep's thread (see
    :func:`settles_on_cancel`).
    """

    if TYPE_CHECKING:
        # read-only properties: a settable attribute declared here would refuse, to a type
        # checker, every workload whose counts are properties or frozen fields. What they
        # mean is in the class docstring too, which help() shows at run time
        @property
        def num_envs(self) -> int:
            """The batch size N: how many envs one call steps."""
            ...

        @property
        def nthread(self) -> int:
            """The pool's worker count T."""
            ...

    else:
        # but not at run time: a class that subclasses Workload would inherit the
        # properties, and its own ``self.num_envs = 64`` would raise AttributeError (no
        # setter). Annotations are members enough for isinstance().
        num_envs: int
        nthread: int

    def signature(self) -> Mapping[str, SignatureValue]:
        """What besides N and T changes the cost of a step: str keys, scalar values."""
        ...

    def run(self, chunk_size: int | None) -> float:
        """One blocking pool call with ``chunk_size`` (None: native); the seconds it took."""
        ...


class WorkloadRaised(Exception):
    """What a workload's method raised that would not reach the resolve as itself.

    A ``StopIteration`` becomes a ``RuntimeError`` once it leaves a coroutine, and an
    ``asyncio.CancelledError`` (no ``Exception``) would read as the caller's own
    cancellation: both travel as this, the workload's exception in ``original``.
    """

    def __init__(self, original: BaseException) -> None:
        # the workload's type and message as ever ("StopIteration: " for an empty one), each
        # on one escaped, bounded line: both are anyone's text; a __str__ that raises is
        # still the workload's failure, not a new one raised here
        message = told(original)
        kind = type_named(original)
        super().__init__(f"{kind} {UNREAD}" if message is None else f"{kind}: {message}")
        self.original = original


def call_workload(method: Callable[[], _T]) -> _T:
    """``method()``, a workload's own code, whatever it raises kept a failure of the workload.

    Raises:
        WorkloadRaised: it raised ``StopIteration`` or a ``BaseException`` that is no
            ``Exception`` (``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit``
            pass as themselves).
        Exception: whatever else it raised.
    """
    try:
        return method()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except StopIteration as exc:
        raise WorkloadRaised(exc) from exc
    except Exception:
        raise
    except BaseException as exc:
        raise WorkloadRaised(exc) from exc


def raised_by_workload(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a workload's own method, through :func:`call_workload`
    (not out of chunktune's code around it)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is call_workload.__code__:
            return True
        tb = tb.tb_next
    return False


_MEMBERS = ("num_envs", "nthread", "signature", "run")
_METHODS = ("signature", "run")


def check_workload(workload: object) -> tuple[int, int]:
    """Validate a workload and return its ``(num_envs, nthread)``: :func:`read_workload`'s
    first two.

    Raises:
        WorkloadError, InvalidArgumentError: as :func:`read_workload`.
    """
    num_envs, nthread, _ = read_workload(workload)
    return num_envs, nthread


def read_workload(workload: object) -> tuple[int, int, bool]:
    """Validate a workload and return its ``(num_envs, nthread, settle_on_cancel)``.

    Each member is read once (a property that counts its reads, or resizes a batch, is
    read as ``resolve`` was called): a resolve keeps what this read, ``settle_on_cancel``
    included, for its sweep.

    Raises:
        WorkloadError: the object lacks ``num_envs``, ``nthread``, ``signature`` or ``run``,
            reading one raised (a property of the workload's), its ``signature`` or ``run``
            is not callable, or its ``settle_on_cancel`` is neither True nor False.
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    # what isinstance(workload, Workload) checks, without typing's slow protocol walk:
    # this runs on every resolve, cache hits included
    read = {name: _member(workload, name) for name in _MEMBERS}
    missing = [name for name, value in read.items() if value is _ABSENT]
    # the workload's class's name, and any member's repr and type, are anyone's text: each
    # told on one line, escaped and bounded
    owner = type_named(workload)
    if missing:
        raise WorkloadError(
            f"{owner} object is not a chunktune.Workload: it lacks "
            f"{', '.join(missing)} (a workload needs num_envs, nthread, signature() and run())"
        )
    for name in _METHODS:
        # a member that is no method would fail only once called: a manual size would
        # answer, a policy that measures would fall back to native, neither naming it
        member = read[name]
        if not callable(member):
            raise WorkloadError(
                f"{owner} object is not a chunktune.Workload: its "
                f"{name} is {shown_one(member)} ({type_named(member)}); expected a method "
                f"{name}() (a workload needs num_envs, nthread, signature() and run())"
            )
    # named as the workload's own: a bare "nthread must be ..." reads as an argument of
    # resolve's, which has none of that name
    num_envs = check_count(read["num_envs"], what=f"the workload's num_envs ({owner}.num_envs)")
    nthread = read["nthread"]
    if isinstance(nthread, numbers.Integral) and not isinstance(nthread, bool) and nthread == 0:
        # MuJoCo's nthread=0 steps on the calling thread: there are no chunks to tune
        raise InvalidArgumentError(
            f"the workload's nthread ({owner}.nthread) must be an integer >= 1, got 0: a "
            "pool of nthread=0 steps every env on the calling thread, where chunk_size "
            "changes nothing; pass chunk_size=None to it without resolving"
        )
    nthread = check_count(nthread, what=f"the workload's nthread ({owner}.nthread)")
    settles = settles_on_cancel(workload)  # a wrong one is told before anything is measured
    return num_envs, nthread, settles


_ABSENT = object()
"""What :func:`_member` reads where the workload has no such member."""


def _member(workload: object, name: str) -> Any:
    """``workload``'s member ``name``, read once; :data:`_ABSENT` where it has none.

    Raises:
        WorkloadError: reading it raised (a property of the workload's, or its
            ``__getattr__``), naming the member and what it raised.
        KeyboardInterrupt, SystemExit, GeneratorExit: as it raised them.
    """
    # no call_workload() around it: every resolve reads five members, cache hits included,
    # and what it would wrap (a StopIteration, a CancelledError) is unwrapped here anyway
    try:
        return getattr(workload, name)
    except AttributeError as exc:
        # hasattr() would take a property that raised AttributeError (its pool not built
        # yet) for a member the class lacks, and say "it lacks nthread" of one that has it
        if not _defined(workload, name):
            return _ABSENT
        raised: BaseException = exc
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:
        # a StopIteration or a CancelledError too: the workload's, not the caller's cancel
        raised = exc
    # the workload's own code raised, where resolve has no counts to fall back on; its
    # message is anyone's text, told on one line as a reason tells it (a __str__ that
    # raises too included)
    owner = type_named(workload)
    raise WorkloadError(
        f"reading the workload's {name} ({owner}.{name}) raised {named(raised)}; "
        f"expected {_EXPECTED[name]}"
    ) from raised


_EXPECTED = {
    "num_envs": "an integer >= 1",
    "nthread": "an integer >= 1",
    "signature": "a method signature()",
    "run": "a method run()",
    "settle_on_cancel": "True or False",
}


def _defined(workload: object, name: str) -> bool:
    """Whether ``name`` is a member of the workload's class (a property, a slot), found
    without running any of the workload's code."""
    # not inspect.getattr_static: about 10 us, on every resolve of a workload that has no
    # settle_on_cancel (most), where a whole cache hit costs some 25 us
    return any(name in klass.__dict__ for klass in type(workload).__mro__)


SETTLE_ON_CANCEL = "settle_on_cancel"
"""The optional workload member that asks a cancelled resolve to wait for its probe."""


def settles_on_cancel(workload: object) -> bool:
    """The workload's ``settle_on_cancel``: False where it has none.

    Raises:
        WorkloadError: it is neither True nor False (numpy's bools count as Python's), or
            reading it raised.
    """
    value = _member(workload, SETTLE_ON_CANCEL)
    plain = False if value is _ABSENT else plain_scalar(value)
    if isinstance(plain, bool):
        return plain
    raise WorkloadError(
        f"the workload's settle_on_cancel ({type_named(workload)}.settle_on_cancel) is "
        f"{shown_one(value)} ({type_named(value)}); expected True (a cancelled resolve waits "
        "for the run() in flight: it steps the caller's pool) or False"
    )
