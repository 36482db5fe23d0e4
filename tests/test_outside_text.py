"""Outside text (a class's name, an object's repr, an exception's message) in chunktune's
messages: one line, escaped, bounded, whatever a workload or a caller hands in."""

from __future__ import annotations

import logging
import pickle
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import chunktune
import chunktune.ray
import chunktune.sim
from chunktune import compat
from chunktune._shown import unprinted
from chunktune._workload import WorkloadRaised, call_workload

# each breaks a line, acts on a terminal or fills it: a newline and ANSI escapes, a bidi
# override, a NUL (no class's name may hold one), 10k characters
TEXTS = [
    pytest.param("line one\n\x1b[2J\x1b[31mred\r", id="newline-ansi"),
    pytest.param("abc\u202edcba", id="bidi-override"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("x" * 10_000, id="10k-chars"),
]
NAMES = [p for p in TEXTS if p.id != "nul"]
# a repr was bounded already (shown()): what it lacked was the escape
REPRS = [p for p in TEXTS if p.id != "10k-chars"]

LIMIT = 600
"""The most characters a message may run to, its outside text cut to its ends."""


def one_line(message: str) -> None:
    """``message`` holds no character a terminal would not print as written, and is bounded."""
    assert unprinted(message) is None, message[:300]
    assert len(message) < LIMIT, len(message)


class _Repr:
    """An object whose repr is anyone's text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _named_class(name: str, *bases: type) -> type:
    return type(name, bases or (object,), {})


class _Modeled:
    """A trainer's own workload: modeled seconds, a fixed signature."""

    num_envs = 64
    nthread = 2

    def signature(self) -> Mapping[str, str]:
        return {"kind": "outside-text"}

    def run(self, chunk_size: int | None) -> float:
        return 0.01


def _of_class(name: str, **members: object) -> object:
    """A _Modeled of a class named ``name``, with ``members`` set on the class."""
    return type(name, (_Modeled,), members)()


def _said(call: Callable[[], object]) -> str:
    """What a resolve said: its error's message, else its decision's reason."""
    try:
        decision = call()
    except chunktune.ChunktuneError as exc:
        return str(exc)
    assert isinstance(decision, chunktune.Decision)
    return decision.reason


async def _said_async(workload: object, keywords: dict[str, Any]) -> str:
    """:func:`_said` of ``await resolve(workload, **keywords)``, on the test's backend."""
    try:
        decision = await chunktune.resolve(workload, **keywords)  # type: ignore[arg-type]
    except chunktune.ChunktuneError as exc:
        return str(exc)
    return decision.reason


# --------------------------------------------------------------- a workload's class's name

WORKLOAD_CASES: list[Any] = [
    pytest.param(lambda name: _named_class(name)(), {"manual": 2}, id="lacks-members"),
    pytest.param(lambda name: _of_class(name, run=3), {"manual": 2}, id="run-not-callable"),
    pytest.param(lambda name: _of_class(name, num_envs=0), {"manual": 2}, id="num-envs-zero"),
    pytest.param(lambda name: _of_class(name, nthread=0), {"manual": 2}, id="nthread-zero"),
    pytest.param(lambda name: _of_class(name, nthread=property(_raise)), {"manual": 2},
                 id="count-raises"),
    pytest.param(lambda name: _of_class(name, settle_on_cancel=3), {"manual": 2},
                 id="settle-not-bool"),
    pytest.param(lambda name: _of_class("W", run=_named_class(name)()), {"manual": 2},
                 id="member-of-a-named-type"),
    pytest.param(lambda name: _of_class("W", settle_on_cancel=_named_class(name)()),
                 {"manual": 2}, id="settle-of-a-named-type"),
    pytest.param(lambda name: _of_class("W", signature=lambda self: _named_class(name)()),
                 {"policy": "quick", "refresh": True}, id="signature-of-a-named-type"),
    pytest.param(lambda name: _of_class("W", signature=lambda self: {_named_class(name)(): 1}),
                 {"policy": "quick", "refresh": True}, id="signature-key-of-a-named-type"),
    pytest.param(lambda name: _of_class("W", signature=lambda self: {"k": _named_class(name)()}),
                 {"policy": "quick", "refresh": True}, id="signature-value-of-a-named-type"),
]  # fmt: skip


def _raise(self: object) -> int:
    raise RuntimeError("not built yet")


@pytest.mark.anyio
@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize(("make", "keywords"), WORKLOAD_CASES)
async def test_a_workload_named_by_anyone_is_told_on_one_escaped_bounded_line(
    make: Callable[[str], object], keywords: dict[str, Any], text: str
) -> None:
    """A class named with newlines, escapes, U+202E or 10k characters: one escaped, bounded line."""
    one_line(await _said_async(make(text), keywords))


@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize(("make", "keywords"), WORKLOAD_CASES)
def test_a_workload_named_by_anyone_is_told_on_one_line_by_resolve_sync(
    make: Callable[[str], object], keywords: dict[str, Any], text: str
) -> None:
    """resolve_sync of a workload of a class named with hostile text: one escaped, bounded line."""
    workload = make(text)
    one_line(_said(lambda: chunktune.resolve_sync(workload, **keywords)))  # type: ignore[arg-type]


# --------------------------------------------------------------- an object's repr

REPR_CASES: list[Any] = [
    pytest.param(lambda r: _of_class("W", run=r), {"manual": 2}, id="run-not-callable"),
    pytest.param(lambda r: _of_class("W", settle_on_cancel=r), {"manual": 2}, id="settle"),
    pytest.param(lambda r: _of_class("W", signature=lambda self: r),
                 {"policy": "quick", "refresh": True}, id="signature-not-a-mapping"),
    pytest.param(lambda r: _of_class("W", signature=lambda self: {r: 1}),
                 {"policy": "quick", "refresh": True}, id="signature-key"),
    pytest.param(lambda r: _of_class("W", signature=lambda self: {"k": r}),
                 {"policy": "quick", "refresh": True}, id="signature-value"),
    pytest.param(lambda r: _Modeled(), {"refresh": "repr"}, id="refresh"),
    pytest.param(lambda r: _Modeled(), {"on_progress": "repr"}, id="on-progress"),
    pytest.param(lambda r: _Modeled(), {"policy": "repr"}, id="policy"),
    pytest.param(lambda r: _Modeled(), {"settings": "repr"}, id="settings"),
]  # fmt: skip


def _with_repr(
    make: Callable[[_Repr], object], keywords: dict[str, Any], text: str
) -> tuple[object, dict[str, Any]]:
    """The workload and keywords of a case, ``"repr"`` in them standing for the hostile object."""
    value = _Repr(text)
    return make(value), {k: value if v == "repr" else v for k, v in keywords.items()}


@pytest.mark.anyio
@pytest.mark.parametrize("text", REPRS)
@pytest.mark.parametrize(("make", "keywords"), REPR_CASES)
async def test_an_objects_repr_in_a_resolves_message_is_one_escaped_bounded_line(
    make: Callable[[_Repr], object], keywords: dict[str, Any], text: str
) -> None:
    """A member, a signature or an argument whose repr is hostile: one escaped, bounded line."""
    one_line(await _said_async(*_with_repr(make, keywords, text)))


@pytest.mark.parametrize("text", REPRS)
@pytest.mark.parametrize(("make", "keywords"), REPR_CASES)
def test_an_objects_repr_in_resolve_syncs_message_is_one_escaped_bounded_line(
    make: Callable[[_Repr], object], keywords: dict[str, Any], text: str
) -> None:
    """resolve_sync with a member or argument whose repr is hostile: one escaped, bounded line."""
    workload, given = _with_repr(make, keywords, text)
    one_line(_said(lambda: chunktune.resolve_sync(workload, **given)))  # type: ignore[arg-type]


def _long_key(self: object) -> dict[str, object]:
    return {"k" * 10_000: [1]}


@pytest.mark.anyio
async def test_a_signatures_long_key_is_cut_on_one_line() -> None:
    """A signature whose key of 10k characters holds a bad value: its key cut, on one line."""
    workload = _of_class("W", signature=_long_key)
    one_line(await _said_async(workload, {"policy": "quick", "refresh": True}))


def test_a_signatures_long_key_is_cut_on_one_line_by_resolve_sync() -> None:
    """resolve_sync of a signature whose 10k-character key holds a bad value: one bounded line."""
    workload = _of_class("W", signature=_long_key)
    said = _said(lambda: chunktune.resolve_sync(workload, policy="quick", refresh=True))  # type: ignore[arg-type]
    one_line(said)


# --------------------------------------------------------------- what a workload raised


@pytest.mark.parametrize("text", NAMES)
def test_what_a_workload_raised_past_exception_is_named_on_one_line(text: str) -> None:
    """A BaseException of a hostile name and message from a workload: WorkloadRaised's one line."""
    kind = _named_class(text, BaseException)

    def method() -> float:
        raise kind(text)

    with pytest.raises(WorkloadRaised) as caught:
        call_workload(method)
    one_line(str(caught.value))


def test_a_workload_raised_whose_message_cannot_be_read_is_still_a_workload_raised() -> None:
    """A StopIteration whose __str__ raises is WorkloadRaised saying so, not the __str__'s error."""

    class Unread(StopIteration):
        def __str__(self) -> str:
            raise ValueError("no str")

    def method() -> float:
        raise Unread

    with pytest.raises(WorkloadRaised) as caught:
        call_workload(method)
    assert str(caught.value) == "Unread (its message could not be read)"


def test_an_ordinary_workload_raised_reads_as_before() -> None:
    """A plain StopIteration's WorkloadRaised keeps its wording: type, colon, message."""
    for exc, said in [
        (StopIteration("done"), "StopIteration: done"),
        (StopIteration(), "StopIteration: "),
    ]:

        def method(exc: BaseException = exc) -> float:
            raise exc

        with pytest.raises(WorkloadRaised) as caught:
            call_workload(method)
        assert str(caught.value) == said


# --------------------------------------------------------------- settings, compat, mujoco, ray


def _settings_call(kind: str, value: object) -> Callable[[], object]:
    settings = chunktune.load_settings()
    return {
        "get_policy": lambda: settings.get_policy(value),  # type: ignore[arg-type]
        "dump_policy": lambda: chunktune.dump_policy(value),  # type: ignore[arg-type]
        "dump_settings": lambda: chunktune.dump_settings(value),  # type: ignore[arg-type]
        "load_settings": lambda: chunktune.load_settings(value),  # type: ignore[arg-type]
        "from_xml": lambda: chunktune.RolloutWorkload.from_xml(value, num_envs=4, nthread=2),  # type: ignore[arg-type]
    }[kind]


@pytest.mark.parametrize("text", REPRS)
@pytest.mark.parametrize(
    "kind", ["get_policy", "dump_policy", "dump_settings", "load_settings", "from_xml"]
)
def test_an_argument_with_a_hostile_repr_is_refused_on_one_line(kind: str, text: str) -> None:
    """A settings or model-file argument whose repr is hostile: refused on one escaped line."""
    with pytest.raises(chunktune.ChunktuneError) as caught:
        _settings_call(kind, _Repr(text))()
    one_line(str(caught.value))


@pytest.mark.parametrize("text", NAMES)
def test_an_argument_of_a_hostile_type_is_refused_on_one_line(text: str) -> None:
    """get_policy given an object of a hostile class: its type named on one escaped line."""
    with pytest.raises(chunktune.InvalidArgumentError) as caught:
        chunktune.load_settings().get_policy(_named_class(text)())
    one_line(str(caught.value))


@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize("argument", ["nthread", "adaptive"])
def test_compats_argument_of_a_hostile_type_is_refused_on_one_line(
    argument: str, text: str
) -> None:
    """compat.resolve_chunk_size given a hostile-typed nthread or adaptive: one escaped line."""
    keywords: dict[str, Any] = {
        "pool": None, "state": None, "model": None, "n_variants": 1, "num_envs": 8,
        "nthread": 2, "dtype": "float64", "post_step_forward_sensor": False,
        "bench_nsteps": 1, "manual_chunk_size": None, "adaptive": True,
    }  # fmt: skip
    keywords[argument] = _named_class(text)()
    with pytest.raises(chunktune.InvalidArgumentError) as caught:
        compat.resolve_chunk_size(**keywords)
    one_line(str(caught.value))


@pytest.mark.parametrize("text", TEXTS)
def test_a_rollout_pool_with_a_hostile_repr_is_refused_on_one_line(text: str) -> None:
    """RolloutWorkload(rollout=<no pool, its repr hostile>): refused on one escaped line."""
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
    with pytest.raises(chunktune.InvalidArgumentError) as caught:
        chunktune.RolloutWorkload(model, num_envs=4, nthread=2, rollout=_Repr(text))
    one_line(str(caught.value))


@pytest.mark.parametrize("text", NAMES)
def test_a_hostile_key_type_refused_by_the_cache_is_warned_on_one_line(
    text: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """cache.update({<key of a hostile class>: entry}): the warning names its type on one line."""
    cache = chunktune.DecisionCache(tmp_path / "cache.json")
    with caplog.at_level(logging.WARNING, logger="chunktune"):
        cache.update({_named_class(text)(): None})
    (record,) = [r for r in caplog.records if "not caching entry" in r.getMessage()]
    one_line(record.getMessage())


@pytest.mark.parametrize("text", TEXTS)
def test_a_make_workload_that_does_not_pickle_is_told_on_one_line(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """tune_cluster(f) where pickling f raises hostile text: one escaped, bounded line."""

    def dumps(value: object) -> bytes:
        raise pickle.PicklingError(text)

    ray = types.SimpleNamespace(
        is_initialized=lambda: True, cloudpickle=types.SimpleNamespace(dumps=dumps)
    )
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(chunktune.InvalidArgumentError, match="does not pickle") as caught:
        chunktune.ray.tune_cluster(_Modeled)
    one_line(str(caught.value))


# --------------------------------------------------------------- more arguments and returns


def _run_raising(name: str) -> object:
    """A workload whose run() raises an exception of a class called ``name``."""
    kind = _named_class(name, RuntimeError)

    def run(self: object, chunk_size: int | None) -> float:
        raise kind("boom")

    return _of_class("W", run=run)


def _run_returning(text: str) -> object:
    """A workload whose run() returns an object whose repr is ``text``."""
    value = _Repr(text)
    return _of_class("W", run=lambda self, chunk_size: value)


def _count_of_repr(value: int, text: str) -> object:
    """A workload whose num_envs is the int ``value``, of a type whose repr is ``text``."""
    return _of_class("W", num_envs=type("I", (int,), {"__repr__": lambda self: text})(value))


@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize(
    ("make", "keywords"),
    [
        pytest.param(_run_raising, {"policy": "quick", "refresh": True}, id="run-raises"),
        pytest.param(_run_returning, {"policy": "quick", "refresh": True}, id="run-returns"),
        pytest.param(lambda t: _count_of_repr(0, t), {"manual": 2}, id="count-below-one"),
        pytest.param(lambda t: _count_of_repr(2**40, t), {"manual": 2}, id="count-too-many"),
    ],
)
def test_what_a_workloads_run_or_count_gives_is_told_on_one_line(
    make: Callable[[str], object], keywords: dict[str, Any], text: str
) -> None:
    """run() raising a hostile class or returning a hostile repr, a count's repr: one line."""
    workload = make(text)
    one_line(_said(lambda: chunktune.resolve_sync(workload, **keywords)))  # type: ignore[arg-type]


@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize("argument", ["refresh", "on_progress", "policy", "settings"])
def test_a_resolve_argument_of_a_hostile_type_is_refused_on_one_line(
    argument: str, text: str
) -> None:
    """resolve_sync given refresh, on_progress, policy or settings of a hostile class: one line."""
    value = _named_class(text)()
    one_line(_said(lambda: chunktune.resolve_sync(_Modeled(), **{argument: value})))


def _hostile_call(kind: str, value: object, tmp_path: Path) -> Callable[[], object]:
    return {
        "update": lambda: chunktune.DecisionCache(tmp_path / "c.json").update(value),  # type: ignore[arg-type]
        "cache-path": lambda: chunktune.DecisionCache(value),  # type: ignore[arg-type]
        "replay-trace": lambda: chunktune.sim.ReplayWorkload(value),  # type: ignore[arg-type]
        "sim-seed": lambda: chunktune.sim.SimulatedWorkload([0.01] * 4, nthread=2, seed=value),  # type: ignore[arg-type]
    }[kind]


@pytest.mark.parametrize("text", NAMES)
@pytest.mark.parametrize("kind", ["update", "cache-path", "replay-trace", "sim-seed"])
def test_a_cache_or_sim_argument_of_a_hostile_type_is_refused_on_one_line(
    kind: str, text: str, tmp_path: Path
) -> None:
    """A cache's changes or path, a replay's trace, a sim's seed of a hostile class: one line."""
    with pytest.raises(chunktune.ChunktuneError) as caught:
        _hostile_call(kind, _named_class(text)(), tmp_path)()
    one_line(str(caught.value))


@pytest.mark.parametrize("text", NAMES)
def test_a_model_variant_of_a_hostile_type_is_refused_on_one_line(text: str) -> None:
    """RolloutWorkload([model, <an object of a hostile class>]): refused on one escaped line."""
    mujoco = pytest.importorskip("mujoco")
    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody/></mujoco>")
    with pytest.raises(chunktune.InvalidArgumentError) as caught:
        chunktune.RolloutWorkload([model, _named_class(text)()], num_envs=4, nthread=2)
    one_line(str(caught.value))


@pytest.mark.parametrize("text", TEXTS)
def test_a_ray_tasks_error_is_told_on_one_line(text: str) -> None:
    """A task's exception whose last line is hostile text: _why tells it on one escaped line."""
    from chunktune._ray_cluster import _why

    one_line(_why(RuntimeError(f"first\n{text}\x1b")))


@pytest.mark.parametrize("text", REPRS)
def test_a_recordings_run_returning_a_hostile_repr_is_refused_on_one_line(text: str) -> None:
    """record() of a run() returning an object whose repr is hostile: WorkloadError, one line."""
    from chunktune._record import record

    with pytest.raises(chunktune.WorkloadError) as caught:
        record(_run_returning(text), rounds=1, sizes=[2])  # type: ignore[arg-type]
    one_line(str(caught.value))


# --------------------------------------------------------------- a settings file's keys and values

# where a settings file's unknown key is found: each table the converter structures
KEY_TABLES: list[Any] = [
    pytest.param(lambda key: {key: 1}, id="top-level"),
    pytest.param(lambda key: {"cache": {key: 1}}, id="cache"),
    pytest.param(lambda key: {"policies": {"mine": {key: 1}}}, id="policy"),
    pytest.param(
        lambda key: {"policies": {"mine": {"candidates": {"strategy": "seed", key: 1}}}},
        id="candidates",
    ),
    pytest.param(lambda key: {"log": {key: [[[[[[[[[[1]]]]]]]]]]}}, id="too-deep"),
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("document", KEY_TABLES)
def test_a_settings_files_unknown_key_is_told_on_one_line(
    document: Callable[[str], dict[str, Any]], text: str, tmp_path: Path
) -> None:
    """A settings file's key of newlines, escapes, U+202E, NUL or 10k characters: one line."""
    import tomli_w

    path = tmp_path / "chunktune.toml"
    path.write_text(tomli_w.dumps(document(text)), encoding="utf-8")
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.load_settings(path)
    one_line(str(caught.value))


def test_a_settings_files_printable_unknown_key_reads_as_before(tmp_path: Path) -> None:
    """An unknown key that prints as written is named as written, at its dotted path."""
    path = tmp_path / "chunktune.toml"
    path.write_text("[cache]\npaht = 'x'\n", encoding="utf-8")
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.load_settings(path)
    assert caught.value.problems == ("cache.paht: unknown key; did you mean path?",)


def test_a_candidates_count_of_hundreds_of_digits_is_told_on_one_bounded_line(
    tmp_path: Path,
) -> None:
    """candidates = <a 400-digit int>: its value cut in the message, as any value is."""
    path = tmp_path / "chunktune.toml"
    path.write_text(f"[policies.mine]\ncandidates = {10**400}\n", encoding="utf-8")
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.load_settings(path)
    one_line(str(caught.value))


class _Raising(Mapping[str, object]):
    """A table whose every read raises ``error``: what cattrs did not expect."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __getitem__(self, key: str) -> object:
        raise self.error

    def __iter__(self) -> Any:
        return iter(["margin"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("kind", [ValueError, RuntimeError])
def test_an_unexpected_structure_failure_is_told_on_one_line(
    kind: type[Exception], text: str
) -> None:
    """What a table raised that no hook expected (its message hostile text): one problem line."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    problems: list[str] = []
    assert structure(_Raising(kind(text)), Policy, "policies.mine", problems) is None
    assert len(problems) == 1
    one_line(problems[0])


def test_an_unexpected_structure_failure_whose_message_cannot_be_read_is_one_problem() -> None:
    """A table's error whose __str__ raises: one problem saying so, not the __str__'s error."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    class Unread(RuntimeError):
        def __str__(self) -> str:
            raise ValueError("no str")

    problems: list[str] = []
    assert structure(_Raising(Unread()), Policy, "policies.mine", problems) is None
    assert problems == ["policies.mine: Unread (its message could not be read)"]


def test_an_unexpected_structure_failure_of_no_message_is_named_by_its_type() -> None:
    """A table's error with an empty message: the problem names its type, not an empty line."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    problems: list[str] = []
    assert structure(_Raising(RuntimeError()), Policy, "policies.mine", problems) is None
    assert problems == ["policies.mine: RuntimeError"]


class _KeysRaising(_Raising):
    """A table whose keys cannot be listed (listing them raises ``error``); its values read."""

    def __getitem__(self, key: str) -> object:
        return 0.05

    def __iter__(self) -> Any:
        raise self.error


@pytest.mark.parametrize("text", TEXTS)
def test_a_tables_own_key_error_is_told_on_one_line(text: str) -> None:
    """A table's KeyError (read as a missing key) whose key is hostile text: one problem line."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    problems: list[str] = []
    assert structure(_KeysRaising(KeyError(text)), Policy, "policies.mine", problems) is None
    assert len(problems) == 1 and problems[0].startswith("policies.mine: missing required key ")
    one_line(problems[0])


def test_a_tables_key_error_of_no_key_is_one_problem_not_a_crash() -> None:
    """A table's bare KeyError(): one problem naming its type, not an IndexError from chunktune."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    problems: list[str] = []
    assert structure(_KeysRaising(KeyError()), Policy, "policies.mine", problems) is None
    assert problems == ["policies.mine: KeyError"]


@pytest.mark.parametrize("length", [60, 61, 200])
def test_a_settings_files_long_printable_key_is_named_whole_up_to_sixty_characters(
    length: int, tmp_path: Path
) -> None:
    """An unknown key of up to 60 printable characters is named whole; a longer one cut, quoted."""
    key = "k" * (length - 1) + "z"
    path = tmp_path / "chunktune.toml"
    path.write_text(f"[cache]\n{key} = 1\n", encoding="utf-8")
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.load_settings(path)
    (problem,) = caught.value.problems
    shown = problem.removeprefix("cache.").partition(": unknown key")[0]
    # a cut key is quoted, as spelled() cuts a string: k...z bare would read as a dotted path
    assert shown == key if length <= 60 else shown == f'"{key[:28]}...{key[-29:]}"'


@pytest.mark.parametrize("text", REPRS)
@pytest.mark.parametrize(
    "document",
    [
        pytest.param(lambda v: {"policies": {"mine": {"margin": v}}}, id="not-a-number"),
        pytest.param(lambda v: {"policies": {"mine": {"candidates": v}}}, id="no-candidates"),
        pytest.param(lambda v: {"cache": v}, id="not-a-table"),
        pytest.param(lambda v: {"policy": v}, id="policy-name"),
        pytest.param(lambda v: {"cache": {"path": v}}, id="not-a-string"),
    ],
)
def test_a_settings_value_given_in_code_with_a_hostile_repr_is_told_on_one_line(
    document: Callable[[object], dict[str, Any]], text: str
) -> None:
    """Settings from code holding an object whose repr is hostile text: each problem one line."""
    from chunktune._config import settings_from_dict

    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict(document(_Repr(text)))
    assert caught.value.problems
    for problem in caught.value.problems:
        one_line(problem)
    one_line(str(caught.value))


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(lambda v: {"policies": {"mine": {"margin": v}}}, id="not-a-number"),
        pytest.param(lambda v: {"cache": v}, id="not-a-table"),
    ],
)
def test_a_refused_settings_value_is_told_as_spelled_however_long(
    document: Callable[[object], dict[str, Any]],
) -> None:
    """A value a hook refused (six strings of 100 characters): told whole as spelled, uncut."""
    from chunktune._config import settings_from_dict
    from chunktune._shown import spelled

    value = [chr(ord("a") + i) * 100 for i in range(6)]
    with pytest.raises(chunktune.ConfigError) as caught:
        settings_from_dict(document(value))
    assert len(spelled(value)) > 200  # past what one line shows of anyone's text
    assert any(spelled(value) in problem for problem in caught.value.problems)


@pytest.mark.parametrize("raised", [ValueError, RuntimeError, TypeError, RecursionError])
def test_a_table_error_whose_str_raises_anything_is_one_problem(raised: type[Exception]) -> None:
    """A table's error whose __str__ raises (whatever it raises): one problem saying so."""
    from chunktune._converter import structure
    from chunktune._policy import Policy

    class Unread(RuntimeError):
        def __str__(self) -> str:
            raise raised("no str")

    problems: list[str] = []
    assert structure(_Raising(Unread()), Policy, "policies.mine", problems) is None
    assert problems == ["policies.mine: Unread (its message could not be read)"]


# --------------------------------------------------------------- the paths of files chunktune uses

# a folder's name may hold what a file's name may: a newline, an ANSI escape, a lone byte
HOSTILE_FOLDER = "d\n\x1b[31m\udcff"


def _hostile_files(isolated: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Set the cache or the sweep lock to a path in a hostile folder, as ``case`` breaks it."""
    folder = isolated / HOSTILE_FOLDER
    folder.mkdir()
    if case == "damaged-cache":
        (folder / "cache.json").write_bytes(b'{"schema": 2, "entr')
        monkeypatch.setenv("CHUNKTUNE_CACHE", str(folder / "cache.json"))
    elif case == "unavailable-cache":
        (folder / "file").write_text("a file, not a folder")
        monkeypatch.setenv("CHUNKTUNE_CACHE", str(folder / "file" / "cache.json"))
    else:
        (folder / "file").write_text("a file, not a folder")
        monkeypatch.setenv("CHUNKTUNE_SWEEP_LOCK", str(folder / "file" / "sweep.lock"))


@pytest.mark.parametrize("case", ["damaged-cache", "unavailable-cache", "unusable-sweep-lock"])
def test_a_files_path_in_a_warning_is_one_escaped_line(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, case: str
) -> None:
    """The cache's or the sweep lock's path in a folder of hostile name is warned of escaped."""
    _hostile_files(isolated, case, monkeypatch)
    caplog.set_level(logging.WARNING, logger="chunktune")
    w = chunktune.sim.SimulatedWorkload(chunktune.sim.env_costs("blocked", 64), nthread=2)
    assert chunktune.resolve_sync(w, policy="quick").source == "benchmark"
    said = [r.getMessage() for r in caplog.records if r.name.startswith("chunktune")]
    assert said, case
    for message in said:
        one_line(message)
        message.encode("utf-8")  # a handler writing UTF-8 strictly (a JSON log) can write it
        assert "\\n\\u001B[31m\\\\udcff" in message, message
