"""The Workload contract's checks: what run() may return, what signature() may hold."""

from __future__ import annotations

import decimal
import enum
import fractions
import importlib
import math
import pydoc
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TypeVar

import numpy as np
import pytest

import chunktune
from chunktune import WorkloadError
from chunktune._shown import unprinted
from chunktune._workload import (
    MAX_SECONDS,
    MIN_SECONDS,
    SignatureValue,
    call_workload,
    check_seconds,
    check_signature,
)

_T = TypeVar("_T")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(0.25, id="float"),
        pytest.param(2, id="int"),
        pytest.param(np.float32(0.25), id="np.float32"),
        pytest.param(np.float64(0.25), id="np.float64"),
        pytest.param(np.int64(2), id="np.int64"),
        pytest.param(np.array(0.25), id="0-d array"),
        pytest.param(fractions.Fraction(1, 4), id="Fraction"),
        pytest.param(decimal.Decimal("0.25"), id="Decimal"),
        pytest.param(MIN_SECONDS, id="shortest"),
        pytest.param(MAX_SECONDS, id="longest"),
    ],
)
def test_any_positive_real_number_of_seconds_is_accepted(value: object) -> None:
    """run() may return any real number > 0, numpy's included; it comes back a float."""
    seconds = check_seconds(value, 4)
    assert type(seconds) is float and seconds == float(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="bool"),
        pytest.param(np.bool_(True), id="np.bool_"),
        pytest.param(math.nan, id="nan"),
        pytest.param(np.float32("inf"), id="np.inf"),
        pytest.param(0.0, id="zero"),
        pytest.param(-1.0, id="negative"),
        pytest.param(1e308, id="absurdly long"),
        pytest.param(1e-310, id="absurdly short"),
        pytest.param(10**400, id="integer past any float"),
        pytest.param("0.5", id="str"),
        pytest.param(None, id="None"),
        pytest.param(np.array([0.5]), id="1-d array"),
        pytest.param(decimal.Decimal("NaN"), id="Decimal-nan"),
        pytest.param(decimal.Decimal("sNaN"), id="Decimal-snan"),
        pytest.param(decimal.Decimal("-Infinity"), id="Decimal-inf"),
        pytest.param(decimal.Decimal("1e-400"), id="Decimal-past-float"),
    ],
)
def test_anything_but_positive_finite_seconds_is_rejected(value: object) -> None:
    """run() returning a bool, NaN, inf, < 1 ns, > 1e6 s, a string or an array raises, naming it."""
    with pytest.raises(WorkloadError, match=r"run\(4\) returned .*positive number of seconds"):
        check_seconds(value, 4)


class Color(enum.Enum):
    RED = 1


class Kind(str, enum.Enum):  # noqa: UP042  (str() of this kind differs from its value)
    BOX = "box"


def test_numpy_values_become_python_values() -> None:
    """numpy scalars and 0-d arrays become the Python numbers they hold; plain values stay."""
    sig = check_signature(
        {
            "n": np.int64(5),
            "dt": np.float64(0.5),
            "on": np.bool_(False),
            "name": np.str_("hopper"),
            "scale": np.array(2.0),
            "kind": Kind.BOX,
            "plain": 3,
        }
    )
    assert sig == {
        "n": 5, "dt": 0.5, "on": False, "name": "hopper", "scale": 2.0, "kind": "box", "plain": 3
    }  # fmt: skip
    assert [type(v) for v in sig.values()] == [int, float, bool, str, float, str, int]


@pytest.mark.parametrize(
    ("signature", "named"),
    [
        pytest.param({"n": None}, "'n'", id="None"),
        pytest.param({"sizes": {1, 2}}, "'sizes'", id="set"),
        pytest.param({"blob": b"x"}, "'blob'", id="bytes"),
        pytest.param({"obj": object()}, "'obj'", id="object"),
        pytest.param({"color": Color.RED}, "'color'", id="enum"),
        pytest.param({"v": [1, 2]}, "'v'", id="list"),
        pytest.param({"x": math.nan}, "'x'", id="nan"),
        pytest.param({"x": np.float64("inf")}, "'x'", id="inf"),
        pytest.param({"a": np.zeros(3)}, "'a'", id="array"),
        pytest.param({5: "x"}, "5", id="int-key"),
        pytest.param([("n", 1)], "list", id="not-a-mapping"),
        pytest.param({"x": fractions.Fraction(10**400)}, "'x'", id="fraction-past-float"),
        pytest.param({"x": [10**5000]}, "'x'", id="list-of-a-long-int"),
        pytest.param({10**5000: "x"}, r"100000000000000000\.\.\.0", id="long-int-key"),
        pytest.param([10**5000], "list", id="not-a-mapping-of-a-long-int"),
    ],
)
def test_unkeyable_signatures_are_rejected_naming_the_key(signature: object, named: str) -> None:
    """A value that is not str, int, finite float or bool (or a non-str key) raises, naming it."""
    with pytest.raises(WorkloadError, match=named):
        check_signature(signature)


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_ctrl_c_or_an_exit_in_a_workload_passes_as_itself(kind: type[BaseException]) -> None:
    """call_workload lets KeyboardInterrupt, SystemExit and GeneratorExit through as themselves."""

    def stop() -> float:
        raise kind

    with pytest.raises(kind):
        call_workload(stop)


@pytest.fixture
def int_limit() -> Iterator[Callable[[int], None]]:
    """Sets Python's int-to-str limit for one test, and puts it back."""
    before = sys.get_int_max_str_digits()
    yield sys.set_int_max_str_digits
    sys.set_int_max_str_digits(before)


@pytest.mark.parametrize(
    ("limit", "allowed"),
    [
        pytest.param(None, 4300, id="default"),
        pytest.param(1000, 1000, id="lowered"),
        pytest.param(10000, 4300, id="raised: files must stay readable at the default"),
        pytest.param(0, 4300, id="lifted: files must stay readable at the default"),
    ],
)
def test_an_int_too_long_to_write_out_is_refused_naming_it_and_the_limit(
    limit: int | None, allowed: int, int_limit: Callable[[int], None]
) -> None:
    """A signature int of more digits than a key may write out raises a precise WorkloadError."""
    if limit is not None:
        int_limit(limit)
    longest = 10**allowed - 1
    assert check_signature({"n": longest}) == {"n": longest}
    for too_long in (10**allowed, -(10**allowed)):
        with pytest.raises(WorkloadError) as caught:
            check_signature({"seed": too_long})
        message = str(caught.value)
        assert message.startswith(f"signature()['seed'] is an int of {allowed + 1} digits (")
        assert f"at most {allowed} digits" in message
        assert "sys.get_int_max_str_digits()" in message
        assert "1000000000000000" in message and len(message) < 400


def test_a_count_too_long_to_write_out_is_refused_as_an_invalid_argument() -> None:
    """num_envs of 5001 digits raises InvalidArgumentError quoting it cut, not a bare ValueError."""
    from chunktune import InvalidArgumentError
    from chunktune._workload import check_count

    with pytest.raises(InvalidArgumentError, match=r"got 100000000000000000\.\.\.0+$"):
        check_count(10**5000, what="num_envs")


USER_WORKLOADS = """
    from __future__ import annotations

    import time
    from typing import Final

    import attrs

    import chunktune


    class MyPool:  # README's own workload
        num_envs = 512
        nthread = 8

        def signature(self) -> dict[str, str | int | float | bool]:
            return {"kind": "my-simulator", "model": "hopper-v3", "nstep": 4}

        def run(self, chunk_size: int | None) -> float:
            start = time.perf_counter()
            return time.perf_counter() - start


    class Counted:  # counts as read-only properties
        def __init__(self, n: int) -> None:
            self._n = n

        @property
        def num_envs(self) -> int:
            return self._n

        @property
        def nthread(self) -> int:
            return 4

        def signature(self) -> dict[str, str]:
            return {"kind": "counted"}

        def run(self, chunk_size: int | None) -> float:
            return 0.001


    @attrs.frozen
    class Frozen:  # a frozen record, as chunktune's own style writes them
        num_envs: int
        nthread: int

        def signature(self) -> dict[str, int]:
            return {"n": 1}

        def run(self, chunk_size: int | None) -> float:
            return 0.001


    class Constant:
        num_envs: Final = 64
        nthread: Final = 2

        def signature(self) -> dict[str, bool]:
            return {"b": True}

        def run(self, chunk_size: int | None) -> float:
            return 0.001


    class Subclassed(chunktune.Workload):  # the protocol subclassed, its counts set in __init__
        num_envs: int
        nthread: int

        def __init__(self, n: int) -> None:
            self.num_envs, self.nthread = n, 2

        def signature(self) -> dict[str, str]:
            return {"kind": "subclassed"}

        def run(self, chunk_size: int | None) -> float:
            return 0.001


    workloads: list[chunktune.Workload] = [
        MyPool(), Counted(64), Frozen(64, 2), Constant(), Subclassed(64)
    ]
    for w in workloads:
        decision: chunktune.Decision = chunktune.resolve_sync(w, manual=2)
        chunk: int | None = decision.chunk_size
"""


def test_a_user_s_workloads_type_check_as_workloads_under_mypy_strict(tmp_path: Path) -> None:
    """Attribute, property, frozen-field, Final or subclass-set counts pass mypy --strict."""
    user = tmp_path / "trainer.py"
    user.write_text(textwrap.dedent(USER_WORKLOADS))
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--",
            str(user),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


class _Modeled:
    """A trainer's own workload, no subclass of anything: modeled seconds, its calls counted."""

    num_envs = 64
    nthread = 2

    def __init__(self) -> None:
        self.calls = 0

    def signature(self) -> dict[str, SignatureValue]:
        return {"kind": "own", "cls": type(self).__name__}

    def run(self, chunk_size: int | None) -> float:
        self.calls += 1
        return 0.01 * (1 + 0.02 * abs((chunk_size or 3) - 4))  # 4 the fastest, native 3


class _Subclassed(chunktune.Workload):
    """A workload that subclasses the protocol and sets its counts in ``__init__``."""

    num_envs: int
    nthread: int

    def __init__(self, num_envs: int, nthread: int) -> None:
        self.num_envs, self.nthread = num_envs, nthread

    def signature(self) -> dict[str, SignatureValue]:
        return {"kind": "subclassed"}

    def run(self, chunk_size: int | None) -> float:
        return _Modeled().run(chunk_size)


@pytest.mark.anyio
async def test_a_subclass_of_workload_may_set_its_counts_in_init() -> None:
    """class W(chunktune.Workload) with self.num_envs = ... in __init__ builds and resolves."""
    workload = _Subclassed(64, 2)
    assert isinstance(workload, chunktune.Workload)
    decision = await chunktune.resolve(workload, policy="quick")
    assert decision.source == "benchmark" and decision.native_chunk == 3


class _Halt(BaseException):
    """A workload's own BaseException that is no Exception (as asyncio's CancelledError)."""


def _raising(error: BaseException, member: str) -> _Modeled:
    """A _Modeled whose ``member`` is a property that raises ``error``."""

    def read(self: object) -> object:
        raise error

    unbuilt: type[_Modeled] = type("Unbuilt", (_Modeled,), {member: property(read)})
    return unbuilt()


@pytest.mark.anyio
@pytest.mark.parametrize("manual", [None, 2], ids=["policy", "manual"])
@pytest.mark.parametrize(
    ("member", "error", "expected"),
    [
        pytest.param(
            "num_envs", RuntimeError("batch not built yet"), "an integer >= 1", id="num_envs"
        ),
        pytest.param("nthread", AttributeError("pool not started"), "an integer >= 1", id="attr"),
        pytest.param("nthread", KeyError("nthread"), "an integer >= 1", id="nthread-keyerror"),
        pytest.param("run", ValueError("no pool"), r"a method run\(\)", id="run"),
        pytest.param("settle_on_cancel", OSError("gone"), "True or False", id="settle"),
        pytest.param("signature", StopIteration("spent"), r"a method signature\(\)", id="stop"),
        pytest.param("nthread", _Halt("torn down"), "an integer >= 1", id="baseexception"),
    ],
)
async def test_a_member_whose_property_raises_is_a_workload_error_naming_it(
    member: str, error: BaseException, expected: str, manual: int | None
) -> None:
    """A property that raises as it is read: WorkloadError naming the member and the error."""
    workload = _raising(error, member)
    with pytest.raises(WorkloadError) as caught:
        await chunktune.resolve(workload, policy="quick", manual=manual)
    message = str(caught.value)
    assert message.startswith(f"reading the workload's {member} (Unbuilt.{member}) raised ")
    assert f"{type(error).__name__}: {error}" in message and re.search(
        f"expected {expected}$", message
    )
    assert caught.value.__cause__ is error and workload.calls == 0


_HOSTILE = "line one\n\x1b[2J\x1b[31mred\r" + "x" * 10_000 + "\u202eend"


class _HostileRepr:
    """A count of the wrong type whose repr is anyone's text: a newline, escapes, 10k chars."""

    def __repr__(self) -> str:
        return _HOSTILE


def _one_bounded_line(message: str) -> None:
    """``message`` holds none of _HOSTILE's raw controls, and not its 10k characters."""
    assert unprinted(message) is None, message[:300]
    assert len(message) < 600, len(message)


@pytest.mark.anyio
@pytest.mark.parametrize("member", ["num_envs", "nthread"])
async def test_a_counts_hostile_message_is_told_on_one_escaped_bounded_line(member: str) -> None:
    """A count property raising with newlines, escapes and 10k characters: one bounded line."""
    with pytest.raises(WorkloadError) as caught:
        await chunktune.resolve(_raising(RuntimeError(_HOSTILE), member), manual=2)
    message = str(caught.value)
    _one_bounded_line(message)
    assert message.startswith(f"reading the workload's {member} (Unbuilt.{member}) raised ")
    assert '"line one\\n\\u001B[2J' in message and message.endswith("expected an integer >= 1")


@pytest.mark.anyio
@pytest.mark.parametrize("member", ["num_envs", "nthread"])
async def test_a_count_of_the_wrong_type_with_a_hostile_repr_is_told_on_one_line(
    member: str,
) -> None:
    """A count that is no int, its repr newlines, escapes and 10k characters: one bounded line."""
    workload = _Modeled()
    setattr(workload, member, _HostileRepr())
    with pytest.raises(chunktune.InvalidArgumentError) as caught:
        await chunktune.resolve(workload, manual=2)
    message = str(caught.value)
    _one_bounded_line(message)
    assert '"line one\\n\\u001B[2J' in message and message.endswith("(_HostileRepr)")


@pytest.mark.anyio
async def test_a_ctrl_c_as_a_count_is_read_passes_as_itself() -> None:
    """A KeyboardInterrupt raised by a count's property reaches the caller as itself."""
    with pytest.raises(KeyboardInterrupt):
        await chunktune.resolve(_raising(KeyboardInterrupt(), "nthread"), policy="quick")


@pytest.mark.anyio
async def test_each_count_is_read_once_per_resolve() -> None:
    """A property count is read once per resolve: its native chunk is of that one read."""

    class Growing(_Modeled):
        reads = 0

        @property
        def num_envs(self) -> int:  # type: ignore[override]
            self.reads += 1
            return 64 * self.reads

    workload = Growing()
    decision = await chunktune.resolve(workload, policy="quick")
    assert workload.reads == 1 and decision.native_chunk == 3


@pytest.mark.anyio
async def test_a_property_that_raises_with_no_message_is_named_without_a_colon() -> None:
    """An error with an empty message is named alone: 'raised RuntimeError; expected ...'."""
    with pytest.raises(WorkloadError) as caught:
        await chunktune.resolve(_raising(RuntimeError(), "num_envs"), manual=2)
    assert str(caught.value) == (
        "reading the workload's num_envs (Unbuilt.num_envs) raised RuntimeError; "
        "expected an integer >= 1"
    )


class _Counted(_Modeled):
    """A _Modeled whose members are properties that count their reads, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: dict[str, int] = {}

    def _read(self, name: str, value: _T) -> _T:
        self.reads[name] = self.reads.get(name, 0) + 1
        return value

    @property
    def num_envs(self) -> int:  # type: ignore[override]
        return self._read("num_envs", 64)

    @property
    def nthread(self) -> int:  # type: ignore[override]
        return self._read("nthread", 2)

    @property
    def settle_on_cancel(self) -> bool:
        return self._read("settle_on_cancel", False)


@pytest.mark.anyio
async def test_under_manual_each_member_is_read_once() -> None:
    """A manual resolve reads each member once: counts, signature, run and settle_on_cancel."""

    class Methods(_Counted):
        @property
        def signature(self) -> Callable[[], dict[str, SignatureValue]]:
            return self._read("signature", super().signature)

        @property
        def run(self) -> Callable[[int | None], float]:
            return self._read("run", super().run)

    workload = Methods()
    decision = await chunktune.resolve(workload, manual=2)
    assert decision.chunk_size == 2 and decision.native_chunk == 3
    assert workload.reads == dict.fromkeys(
        ["num_envs", "nthread", "signature", "run", "settle_on_cancel"], 1
    )


@pytest.mark.anyio
async def test_a_measuring_resolve_reads_the_counts_and_settle_on_cancel_once() -> None:
    """A resolve that sweeps reads num_envs, nthread and settle_on_cancel once each."""
    workload = _Counted()
    decision = await chunktune.resolve(workload, policy="quick")
    assert decision.source == "benchmark" and workload.calls > 0
    assert workload.reads == {"num_envs": 1, "nthread": 1, "settle_on_cancel": 1}


def test_an_object_with_no_member_is_told_each_it_lacks_in_order() -> None:
    """An object with no member: WorkloadError listing all four, in the protocol's order."""
    with pytest.raises(WorkloadError) as caught:
        chunktune.resolve_sync(object())  # type: ignore[arg-type]
    assert str(caught.value) == (
        "object object is not a chunktune.Workload: it lacks num_envs, nthread, signature, run "
        "(a workload needs num_envs, nthread, signature() and run())"
    )


@pytest.mark.parametrize("count", ["num_envs", "nthread"])
def test_isinstance_of_workload_needs_both_counts(count: str) -> None:
    """isinstance(w, chunktune.Workload) is False for a workload lacking num_envs or nthread."""
    assert isinstance(_Modeled(), chunktune.Workload)
    lacking = type("Lacking", (), {k: v for k, v in vars(_Modeled).items() if k != count})
    assert not isinstance(lacking(), chunktune.Workload)


def test_a_cache_hit_reads_the_members_without_inspect() -> None:
    """A cache hit reads each member by plain getattr: no call into inspect on the way."""
    # it looked settle_on_cancel, which most workloads lack, up by getattr_static each time
    # (what that cost is hit_bench.py's to measure; this checks only that it is not called)
    workload = _Modeled()
    chunktune.resolve_sync(workload, policy="quick")
    called: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            called.append(frame.f_globals.get("__name__", "?"))

    sys.setprofile(profile)
    try:
        decision = chunktune.resolve_sync(workload, policy="quick")
    finally:
        sys.setprofile(None)
    assert decision.source == "cache" and "chunktune._workload" in called
    assert "inspect" not in called


class _Unreadable(RuntimeError):
    """An error whose message cannot be read: its __str__ raises."""

    def __str__(self) -> str:
        raise ValueError("no message")


def test_a_property_whose_error_has_an_unreadable_message_is_still_a_workload_error() -> None:
    """A count whose error's __str__ raises: a WorkloadError that says so, not a ValueError."""
    with pytest.raises(WorkloadError) as caught:
        chunktune.resolve_sync(_raising(_Unreadable(), "nthread"), manual=2)
    assert str(caught.value) == (
        "reading the workload's nthread (Unbuilt.nthread) raised _Unreadable (its message "
        "could not be read); expected an integer >= 1"
    )


def test_help_of_workload_says_what_each_count_means_and_a_subclass_may_set_them() -> None:
    """help(Workload) at run time says what num_envs and nthread mean; a subclass may set them."""
    shown = pydoc.plain(pydoc.render_doc(chunktune.Workload))
    text = " ".join(line.lstrip(" |") for line in shown.splitlines())  # as one paragraph
    assert "``num_envs`` is the batch size N (how many envs one call steps)" in text
    assert "``nthread`` the pool's worker count T: each an integer >= 1" in text
    workload = _Subclassed(4, 2)  # self.num_envs = 4 in __init__: no read-only property
    assert (workload.num_envs, workload.nthread) == (4, 2)


@pytest.mark.parametrize(
    ("home", "names"),
    [
        pytest.param(
            "chunktune._counts",
            ["MAX_COUNT", "check_chunk_size", "check_count", "check_seed", "native_chunk",
             "upper_chunk"],
            id="counts",
        ),
        pytest.param(
            "chunktune._returned",
            ["MAX_SECONDS", "MIN_SECONDS", "SignatureValue", "as_seconds", "check_seconds",
             "check_signature", "max_int_digits"],
            id="returned",
        ),
    ],
)  # fmt: skip
def test_the_names_moved_out_of_workload_are_still_importable_from_it(
    home: str, names: list[str]
) -> None:
    """Each count and return check lives in its own module; chunktune._workload still has it."""
    moved, old = importlib.import_module(home), importlib.import_module("chunktune._workload")
    for name in names:
        assert getattr(old, name) is getattr(moved, name), name
        assert name in moved.__all__, name
