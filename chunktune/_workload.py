"""The Workload protocol and the arithmetic of the pool's chunking.

The base of chunktune's own modeled workloads (simulated, replayed) is ``_modeled``'s.
"""

from __future__ import annotations

import decimal
import math
import numbers
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ._errors import InvalidArgumentError, WorkloadError
from ._named import UNREAD, named, told
from ._shown import digits, shown, shown_line, shown_one, type_named

__all__ = [
    "MAX_COUNT",
    "MAX_SECONDS",
    "MIN_SECONDS",
    "SETTLE_ON_CANCEL",
    "SignatureValue",
    "Workload",
    "WorkloadRaised",
    "as_seconds",
    "call_workload",
    "check_chunk_size",
    "check_count",
    "check_seconds",
    "check_seed",
    "check_signature",
    "check_workload",
    "max_int_digits",
    "native_chunk",
    "raised_by_workload",
    "read_workload",
    "settles_on_cancel",
    "upper_chunk",
]

SignatureValue = str | int | float | bool

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


def native_chunk(num_envs: int, nthread: int) -> int:
    """The chunk MuJoCo's pool uses for ``chunk_size=None``: ``max(1, N // (10*T))``.

    Raises:
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    n = check_count(num_envs, what="num_envs")
    return max(1, n // (10 * check_count(nthread, what="nthread")))


def upper_chunk(num_envs: int, nthread: int) -> int:
    """The largest useful chunk, ``ceil(N/T)``: any larger leaves a worker idle.

    Raises:
        InvalidArgumentError: ``num_envs`` or ``nthread`` is not an integer >= 1.
    """
    n = check_count(num_envs, what="num_envs")
    return -(-n // check_count(nthread, what="nthread"))


MAX_COUNT = 2**31 - 1
"""The most envs or threads a pool can have: MuJoCo counts them in a C ``int``."""

MAX_SECONDS = 1e6
"""The longest call a sweep takes as measured (11.6 days): a ``run()`` that says more
is broken, and its seconds (1e308, say) would overflow the statistics."""

MIN_SECONDS = 1e-9
"""The shortest call a sweep takes as measured (a nanosecond, less than one chunk's
dispatch): a ``run()`` that says less is broken, and its seconds (1e-310, say) would
overflow the budget's arithmetic."""


def check_count(value: object, *, what: str, high: int = MAX_COUNT) -> int:
    """Return ``value`` as an int count from 1 to ``high`` (envs, threads, steps, a chunk size).

    Raises:
        InvalidArgumentError: ``value`` is not an integer, or is outside ``[1, high]``;
            the message names ``what``.
    """
    # a workload's count may be any object, whose repr and type name are anyone's text: on
    # one line, escaped (shown() keeps an object's own line breaks)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(
            f"{what} must be an integer >= 1, got {shown_one(value)} ({type_named(value)})"
        )
    count = int(value)
    if count < 1:
        raise InvalidArgumentError(f"{what} must be an integer >= 1, got {shown_one(value)}")
    if count > high:
        raise InvalidArgumentError(
            f"{what} must be an integer from 1 to {high}, got {shown_one(value)}"
        )
    return count


def check_seed(value: object) -> int:
    """Return ``value`` as an int seed for numpy's generators.

    Raises:
        InvalidArgumentError: ``value`` is not an integer >= 0.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidArgumentError(f"seed must be an integer >= 0, got {shown_one(value)}")
    return int(value)


def check_chunk_size(value: object, *, what: str = "chunk_size", num_envs: int = MAX_COUNT) -> int:
    """Return ``value`` as an int chunk size, or raise InvalidArgumentError.

    Raises:
        InvalidArgumentError: ``value`` is not an integer, or is outside ``[1, num_envs]``
            (a chunk of more envs than the batch holds is no chunk of it).
    """
    return check_count(value, what=what, high=num_envs)


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
    plain = False if value is _ABSENT else _plain(value)
    if isinstance(plain, bool):
        return plain
    raise WorkloadError(
        f"the workload's settle_on_cancel ({type_named(workload)}.settle_on_cancel) is "
        f"{shown_one(value)} ({type_named(value)}); expected True (a cancelled resolve waits "
        "for the run() in flight: it steps the caller's pool) or False"
    )


def _plain(value: Any) -> Any:
    """A numpy scalar or 0-d array as the Python number it holds; anything else as it is."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    return value


def check_signature(signature: object) -> dict[str, SignatureValue]:
    """A workload's ``signature()`` as a plain ``{str: str | int | float | bool}`` dict.

    numpy scalars and 0-d arrays become the Python numbers they hold; plain values
    are kept as they are, so the cache keys of valid signatures never change.

    Raises:
        WorkloadError: ``signature`` is not a mapping, a key is not a string, or a
            value is none of str, int (of at most :func:`max_int_digits` digits), float
            (finite) and bool.
    """
    if not isinstance(signature, Mapping):
        raise WorkloadError(
            f"signature() returned {type_named(signature)} {shown_one(signature)}; expected a "
            "mapping of str to str, int, float or bool"
        )
    plain: dict[str, SignatureValue] = {}
    for key, raw in signature.items():
        if not isinstance(key, str):
            raise WorkloadError(
                f"signature() key {shown_one(key)} is of type {type_named(key)}; keys must be "
                "strings"
            )
        value = _plain(raw)
        if isinstance(value, bool | str):
            # exactly str or bool, whatever subclass (an enum, say) carried it
            plain[key] = bool(value) if isinstance(value, bool) else str.__str__(value)
        elif isinstance(value, numbers.Integral):
            plain[key] = _keyable_int(key, int(value))
        elif isinstance(value, numbers.Real) and _finite(value):
            plain[key] = float(value)
        else:
            raise WorkloadError(
                f"signature()[{_key(key)}] is {shown_one(raw)} ({type_named(raw)}); expected a "
                "str, int, finite float or bool"
            )
    return plain


def max_int_digits() -> int:
    """The most decimal digits a signature's int may have.

    Python's int-to-str limit (``sys.get_int_max_str_digits()``, lowered or lifted by
    the program), but never past its default: a cache key and a cache file write the
    int out in decimal, and every process that reads the file back must be able to.
    """
    default = sys.int_info.default_max_str_digits
    now = sys.get_int_max_str_digits()
    return min(now, default) if now > 0 else default


def _keyable_int(key: str, value: int) -> int:
    """``value``, unless it has more digits than a cache key may write out.

    Raises:
        WorkloadError: ``value`` has more than :func:`max_int_digits` digits.
    """
    limit = max_int_digits()
    # under 3 bits a digit it is short enough: only a long one pays for counting
    if value.bit_length() > 3 * limit and (count := digits(value)) > limit:
        raise WorkloadError(
            f"signature()[{_key(key)}] is an int of {count} digits ({shown(value)}); expected a "
            f"str, an int of at most {limit} digits, a finite float or a bool: the cache key "
            "and file write ints out in decimal, which Python refuses past "
            "sys.get_int_max_str_digits() (a hash of the number, as a str, keys it)"
        )
    return value


def _key(key: str) -> str:
    """A signature's key for a message, as its repr (printable: Python escapes what is
    not), bounded: a key of 10k characters would fill a message's line."""
    return shown_line(repr(key))


def _finite(value: numbers.Real) -> bool:
    """Whether ``value`` is a finite float: not inf or nan, nor too large for a float."""
    try:
        return math.isfinite(value)
    except OverflowError:  # a Fraction past float's range
        return False


def check_seconds(value: object, chunk: int | None) -> float:
    """What ``run(chunk)`` returned, as a float of seconds.

    Any real number counts (numpy scalars and 0-d arrays, a ``Fraction``, a ``Decimal``),
    but not a bool.

    Raises:
        WorkloadError: ``value`` is not a real number in [:data:`MIN_SECONDS`,
            :data:`MAX_SECONDS`].
    """
    seconds = as_seconds(value)
    if seconds is None:
        raise WorkloadError(
            f"run({chunk!r}) returned {shown_one(value)}; expected a positive number of seconds "
            f"from {MIN_SECONDS:g} to {MAX_SECONDS:g}"
        )
    return seconds


def as_seconds(value: object) -> float | None:
    """``value`` as float seconds in [:data:`MIN_SECONDS`, :data:`MAX_SECONDS`] (numpy
    scalars and ``Decimal`` too), else None."""
    plain = _plain(value)
    # a Decimal holds a real number, but is no numbers.Real (it will not mix with floats)
    if isinstance(plain, bool) or not isinstance(plain, numbers.Real | decimal.Decimal):
        return None
    try:
        seconds = float(plain)
    # an integer past any float (JSON and Python allow one), a signaling NaN Decimal
    except (OverflowError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and MIN_SECONDS <= seconds <= MAX_SECONDS else None
