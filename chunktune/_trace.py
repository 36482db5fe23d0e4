"""Traces: recorded real landscapes, every chunk size measured in interleaved rounds.

A trace is one JSON object::

    {"num_envs": 256, "nthread": 2, "native": 12, "rounds": 24,
     "samples": {"1": [0.081, 0.079, ...], "2": [...], ...},
     "signature": {...}, "machine": {...}, "recorded": "2026-11-30T09:12:00+00:00"}

``samples[c][r]`` is the seconds of the call with chunk size ``c`` in round ``r``;
every round measured every size once, in a fresh random order (``order``, when
present, lists each round's sizes in the order they ran). ``chunktune record``
writes traces; :class:`chunktune.sim.ReplayWorkload` replays them.
"""

from __future__ import annotations

import codecs
import difflib
import json
import numbers
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ._counts import MAX_COUNT, native_chunk, upper_chunk
from ._errors import InvalidArgumentError, TraceError
from ._paths import is_path
from ._reading import MAX_NESTING, MAX_TRACE_BYTES, TooLarge, nests_deeper, read_capped
from ._returned import MAX_SECONDS, MIN_SECONDS, as_seconds
from ._shown import jsoned, plural, shown_file, shown_one, type_named

__all__ = ["Trace", "dump_trace", "load_trace", "trace_from_dict"]


def _samples_repr(samples: dict[int, tuple[float, ...]]) -> str:
    """``samples`` as a repr says it: how many sizes, from which to which, not every second
    (a recorded trace holds thousands, which a log line or a debugger would print whole)."""
    if not samples:
        return "{}"
    return f"<{len(samples)} sizes from {min(samples)} to {max(samples)}>"


def _order_repr(order: tuple[tuple[int, ...], ...]) -> str:
    """``order`` as a repr says it: how many rounds it orders, not each round's order."""
    return f"<{len(order)} rounds>" if order else "()"


# hash=False: samples and its tables are dicts, so a hash would raise; __hash__
# is None, as type checkers then say (equality stays by value)
@attrs.frozen(kw_only=True, hash=False)
class Trace:
    """A recorded landscape. ``samples`` maps chunk size to seconds, one per round.

    Its repr gives how many sizes and rounds it holds, not the seconds themselves.
    """

    num_envs: int
    nthread: int
    rounds: int
    samples: dict[int, tuple[float, ...]] = attrs.field(repr=_samples_repr)
    signature: dict[str, Any] = attrs.field(factory=dict)
    machine: dict[str, Any] = attrs.field(factory=dict)
    recorded: str = ""
    description: str = ""
    order: tuple[tuple[int, ...], ...] = attrs.field(default=(), repr=_order_repr)

    @property
    def native(self) -> int:
        """The chunk the pool uses for ``chunk_size=None``."""
        return native_chunk(self.num_envs, self.nthread)

    def select_rounds(self, rounds: Iterable[int]) -> Trace:
        """The same trace with only the rounds numbered ``rounds`` (0-based, in that order).

        Half of a trace's rounds can be replayed while the other half scores the
        choice, so the score is not the same noise the choice was made on.

        Raises:
            InvalidArgumentError: a round is not an integer in ``0..rounds-1``, is listed
                twice, or no round is listed.
        """
        picked = list(rounds)
        for r in picked:
            bad = isinstance(r, bool) or not isinstance(r, numbers.Integral)
            if bad or not 0 <= int(r) < self.rounds:
                raise InvalidArgumentError(
                    f"round {r!r} is not in this trace; expected an integer in 0..{self.rounds - 1}"
                )
        if not picked or len(set(picked)) != len(picked):
            raise InvalidArgumentError(
                f"rounds {picked!r}: expected at least one round, each listed once"
            )
        index = [int(r) for r in picked]
        return attrs.evolve(
            self,
            rounds=len(index),
            samples={c: tuple(s[r] for r in index) for c, s in self.samples.items()},
            order=tuple(self.order[r] for r in index) if len(self.order) == self.rounds else (),
        )

    def to_dict(self) -> dict[str, Any]:
        """The trace as the JSON object of the file format."""
        doc: dict[str, Any] = {
            "num_envs": self.num_envs,
            "nthread": self.nthread,
            "native": self.native,
            "rounds": self.rounds,
            "samples": {str(c): list(s) for c, s in sorted(self.samples.items())},
            "signature": dict(self.signature),
            "machine": dict(self.machine),
            "recorded": self.recorded,
        }
        if self.description:
            doc["description"] = self.description
        if self.order:
            doc["order"] = [list(r) for r in self.order]
        return doc


def _count(doc: Mapping[str, Any], field: str, where: str) -> int:
    if field not in doc:
        raise TraceError(f'{where}: missing field "{field}"')
    value = doc[field]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise TraceError(
            f"{where}: {field} is {jsoned(value)}; expected an integer from 1 to {MAX_COUNT}"
        )
    return value


def _table(doc: Mapping[str, Any], field: str, where: str) -> dict[str, Any]:
    value = doc.get(field, {})
    if not isinstance(value, dict):
        raise TraceError(f"{where}: {field} is {jsoned(value)}; expected an object")
    return value


_FIELDS = (
    "num_envs", "nthread", "native", "rounds", "samples",
    "signature", "machine", "recorded", "description", "order",
)  # fmt: skip


def trace_from_dict(doc: object, *, where: str = "trace") -> Trace:
    """Validate a parsed trace document.

    Raises:
        TraceError: a field is missing or malformed, or an unknown one is near a known
            name (a misspelling; the message names it and ``where``). Other unknown
            fields (a newer chunktune's) are ignored.
    """
    if not isinstance(doc, dict):
        raise TraceError(f"{where}: expected a JSON object, got {type_named(doc)}")
    for key in doc:
        # every optional field has a default: a misspelt one ("oder") would otherwise be
        # dropped without a word, and the replay would draw without the order. A field
        # no name is near (a newer chunktune's, a note added by hand) is left as it is:
        # a trace is read by later and earlier versions alike
        near = [] if key in _FIELDS else difflib.get_close_matches(key, _FIELDS, 1, 0.75)
        if near:
            raise TraceError(
                f"{where}: unknown field {jsoned(key)}; did you mean {jsoned(near[0])}? "
                "(expected " + ", ".join(_FIELDS) + ")"
            )
    num_envs = _count(doc, "num_envs", where)
    nthread = _count(doc, "nthread", where)
    rounds = _count(doc, "rounds", where)
    native = native_chunk(num_envs, nthread)
    if "native" in doc and doc["native"] != native:
        raise TraceError(
            f"{where}: native is {jsoned(doc['native'])}, but the native chunk for "
            f"{plural(num_envs, 'env')} on {plural(nthread, 'thread')} is {native}"
        )
    samples = _samples(doc, num_envs, nthread, rounds, where)
    if native not in samples:
        raise TraceError(f"{where}: samples has no entry for the native chunk {native}")
    description = _text(doc, "description", where)
    recorded = _text(doc, "recorded", where)
    order = _order(doc, rounds, sorted(samples), where)
    return Trace(
        num_envs=num_envs,
        nthread=nthread,
        rounds=rounds,
        samples=samples,
        signature=_table(doc, "signature", where),
        machine=_table(doc, "machine", where),
        recorded=recorded,
        description=description,
        order=order,
    )


def _samples(
    doc: Mapping[str, Any], num_envs: int, nthread: int, rounds: int, where: str
) -> dict[int, tuple[float, ...]]:
    """The ``samples`` field: chunk sizes in 1..ceil(N/T), each with one seconds per round."""
    if "samples" not in doc:
        raise TraceError(f'{where}: missing field "samples"')
    raw = doc["samples"]
    if not isinstance(raw, dict) or not raw:
        raise TraceError(f"{where}: samples is {jsoned(raw)}; expected an object of chunk sizes")
    upper = upper_chunk(num_envs, nthread)
    samples: dict[int, tuple[float, ...]] = {}
    for key, values in raw.items():
        try:
            chunk = int(key)
        except ValueError:
            chunk = 0
        if str(chunk) != key or not 1 <= chunk <= upper:
            raise TraceError(
                f"{where}: samples[{jsoned(key)}]: chunk sizes must be integers in 1..{upper} "
                f"(ceil(N/T) for {plural(num_envs, 'env')} on {plural(nthread, 'thread')})"
            )
        if not isinstance(values, list) or len(values) != rounds:
            held = (
                f"it holds {plural(len(values), 'value')}"
                if isinstance(values, list)
                else f"it is {jsoned(values)}"
            )
            raise TraceError(
                f"{where}: samples[{jsoned(key)}] must be a list of {plural(rounds, 'second')} "
                f"(one per round); {held}"
            )
        plain = _plain_seconds(values)
        if plain is not None:
            samples[chunk] = plain
            continue
        # a value the fast path refuses: each is checked on its own, and the first that is
        # no seconds is named (an int, a numpy scalar or a Decimal may still be seconds)
        seconds = [as_seconds(t) for t in values]
        for r, (t, s) in enumerate(zip(values, seconds, strict=True)):
            if s is None:
                raise TraceError(
                    f"{where}: samples[{jsoned(key)}][{r}] is {jsoned(t)}; expected seconds "
                    f"from {MIN_SECONDS:g} to {MAX_SECONDS:g}"
                )
        samples[chunk] = tuple(s for s in seconds if s is not None)
    return samples


def _plain_seconds(values: list[Any]) -> tuple[float, ...] | None:
    """``values`` as seconds if every one is a float (not a subclass) from
    :data:`MIN_SECONDS` to :data:`MAX_SECONDS`, as every recorded call is; else None.

    What :func:`as_seconds` would make of them, a value at a time, at C speed: a recorded
    trace holds millions (4.5 s for 13 MiB a value at a time, about 1.5 us each).
    """
    if set(map(type, values)) != {float}:
        return None
    seconds = np.fromiter(values, dtype=np.float64, count=len(values))
    # NaN fails both comparisons, as infinities and -0.0 fail one
    if not bool(((seconds >= MIN_SECONDS) & (seconds <= MAX_SECONDS)).all()):
        return None
    return tuple(values)


def _text(doc: Mapping[str, Any], field: str, where: str) -> str:
    """An optional string field (``""`` when absent)."""
    value = doc.get(field, "")
    if not isinstance(value, str):
        raise TraceError(f"{where}: {field} is {jsoned(value)}; expected a string")
    return value


def _order(
    doc: Mapping[str, Any], rounds: int, sizes: list[int], where: str
) -> tuple[tuple[int, ...], ...]:
    """The optional ``order`` field: per round, the ascending ``sizes`` in the order they ran."""
    order_raw = doc.get("order", [])
    if not isinstance(order_raw, list):
        raise TraceError(f"{where}: order must be a list of rounds, each a list of chunk sizes")
    if order_raw and len(order_raw) != rounds:
        raise TraceError(
            f"{where}: order lists {plural(len(order_raw), 'round')}; expected {rounds} "
            "(one per round)"
        )
    for r, calls in enumerate(order_raw):
        # each round ran every recorded size once; anything else is not the order they ran in
        if not (
            isinstance(calls, list)
            and all(isinstance(c, int) and not isinstance(c, bool) for c in calls)
            and sorted(calls) == sizes
        ):
            raise TraceError(
                f"{where}: order[{r}] is {jsoned(calls)}; expected the recorded chunk sizes, "
                "each once, in the order they ran"
            )
    return tuple(tuple(r) for r in order_raw)


def load_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a trace file.

    Raises:
        TraceError: ``path`` names no file (``""``, a NUL byte), the file cannot be read,
            is not UTF-8 (or starts with a BOM), holds more than
            :data:`~chunktune._reading.MAX_TRACE_BYTES` (256 MiB), is not JSON, nests
            deeper than :data:`~chunktune._reading.MAX_NESTING` levels, gives a key twice
            in one object, or a field is missing, malformed or unknown; the message names
            the file and the field.
    """
    if not is_path(path):
        raise TraceError(f"{shown_one(path)} is not a trace file's path (a str or os.PathLike)")
    name = os.fspath(path)
    # "" would read the current folder ("cannot read trace ."), and a NUL byte made open()
    # raise a bare ValueError; no file is named either way
    if not isinstance(name, str) or not name or "\0" in name:
        raise TraceError(f"{shown_one(name)} is not a trace file's path; expected a file name")
    file = Path(name)
    # the name as every message shows it: a newline or a byte that is no UTF-8 in it would
    # split the one line a command prints, or fail a log written as UTF-8
    shown = shown_file(file)
    try:
        raw = read_capped(file, MAX_TRACE_BYTES)
    except OSError as exc:
        raise TraceError(f"cannot read trace {shown}: {exc}") from exc
    except TooLarge as exc:
        raise TraceError(
            f"cannot read trace {shown}: it holds more than {exc.limit}; expected a recorded "
            "trace (a few hundred KB)"
        ) from None
    if raw.startswith(codecs.BOM_UTF8):  # some Windows editors write one, as settings say
        raise TraceError(
            f"{shown} starts with a UTF-8 byte-order mark (BOM); expected plain UTF-8 JSON "
            "(save it without the BOM)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a trace edited in a Latin-1 editor; "cannot read" would send the user to permissions
        raise TraceError(
            f"{shown} is not UTF-8 text: byte {raw[exc.start]:#04x} at offset {exc.start} "
            "(a file saved in another encoding?); expected a JSON trace in UTF-8"
        ) from None
    too_deep = False
    try:
        doc = json.loads(text, object_pairs_hook=_once_each)
    except _Repeated as exc:
        raise TraceError(
            f"{shown}: {jsoned(exc.key)} is given more than once in one object; expected "
            "each field and chunk size once"
        ) from None
    except RecursionError:
        too_deep = True  # deeper than this Python's json follows
    except ValueError as exc:
        raise TraceError(f"{shown} is not a JSON trace: {exc}") from exc
    if too_deep or nests_deeper(doc, MAX_NESTING):
        # the same on every Python, whichever depth its json parser follows
        raise TraceError(
            f"{shown} is nested more than {MAX_NESTING} levels deep; expected a recorded "
            "trace (its calls 3 levels down)"
        )
    return trace_from_dict(doc, where=shown)


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice is an error, not the last one silently."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Repeated(key)
            seen.add(key)
    return doc


def dump_trace(trace: Trace) -> str:
    """The trace as JSON text (one line per chunk size, so diffs stay readable)."""
    doc = trace.to_dict()
    samples = doc.pop("samples")
    head = json.dumps(doc, indent=1, sort_keys=True)
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in samples.items())
    return head[:-2] + ',\n "samples": {\n' + rows + "\n }\n}\n"
