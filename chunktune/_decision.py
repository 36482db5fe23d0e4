"""The Decision a resolve returns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._load import MachineLoad

__all__ = ["Decision", "Source", "headline", "size_name", "timings_to_ms"]

Source = Literal["manual", "disabled", "trivial", "cache", "benchmark", "fallback"]


# one converter per field, each typed as its field: attrs shows a converter's parameter
# type in __init__, to help() and to a type checker, where Any would let any value pass
def _timings(value: Mapping[int | None, float]) -> dict[int | None, float]:
    return dict(value)


def _samples(value: Mapping[int | None, int]) -> dict[int | None, int]:
    return dict(value)


def size_name(chunk: int | None) -> str:
    """A chunk size as messages and reports name it: ``"native"`` for None."""
    return "native" if chunk is None else str(chunk)


def timings_to_ms(timings: Mapping[int | None, float]) -> dict[str, float]:
    """``{None: 0.0123, 8: 0.0101}`` as ``{"native": 12.3, "8": 10.1}`` (milliseconds)."""
    ordered = sorted(timings.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0))
    return {size_name(k): v * 1e3 for k, v in ordered}


# hash=False: timings and samples are dicts, so a hash would raise; __hash__ is
# None, as type checkers then say (equality stays by value)
@attrs.frozen(kw_only=True, hash=False)
class Decision:
    """Which chunk to pass to ``rollout(chunk_size=...)``, and why.

    ``chunk_size`` is ``None`` for the native default, which for this workload
    means ``native_chunk``. ``timings`` maps every measured candidate to its
    estimate in seconds, ``samples`` to the rounds that estimate rests on (confirmation
    pairs not counted); ``probe_seconds`` is the sum of ``run()`` seconds this
    call spent (0.0 unless it swept). ``gain`` is the estimated fraction by which
    ``chunk_size`` beats native (0.0 when native is kept) and ``gain_ci`` its
    confidence interval from the confirmation against native, when it confirmed a
    gain (``None`` otherwise: an inconclusive confirmation's figures are in ``reason``);
    both allow for when the sequential test stopped (:mod:`chunktune._sequential`).
    ``policy`` names the policy whose settings made the decision: on a cache hit, the
    one whose sweep stored it (a ``balanced`` result may answer a ``quick`` request).
    ``load`` is the machine's load as the sweep that made the decision began (``None``
    where the system keeps none, for a decision no sweep made, and for one cached before
    it was recorded); a decision measured while every CPU was busy is measured again by
    the first request that finds the machine calm (:mod:`chunktune._load`).
    Decisions compare by value and do not hash (``timings`` is a dict).
    """

    chunk_size: int | None
    native_chunk: int
    source: Source
    reason: str
    key: str = ""
    timings: dict[int | None, float] = attrs.field(factory=dict, converter=_timings)
    samples: dict[int | None, int] = attrs.field(factory=dict, converter=_samples)
    raced_out: tuple[int, ...] = ()
    probe_seconds: float = 0.0
    partial: bool = False
    policy: str = ""
    gain: float = 0.0
    gain_ci: tuple[float, float] | None = None
    load: MachineLoad | None = None

    @property
    def effective_chunk(self) -> int:
        """The chunk size the pool will actually use."""
        return self.native_chunk if self.chunk_size is None else self.chunk_size

    def to_json(self) -> dict[str, Any]:
        """The decision as the JSON object ``chunktune tune --json`` prints."""
        return {
            "chunk_size": self.chunk_size,
            "native_chunk": self.native_chunk,
            "source": self.source,
            "policy": self.policy,
            "reason": self.reason,
            "probe_seconds": self.probe_seconds,
            "key": self.key,
            "timings_ms": timings_to_ms(self.timings),
            "gain": self.gain,
            "gain_ci": None if self.gain_ci is None else list(self.gain_ci),
            "partial": self.partial,
            "load": None if self.load is None else attrs.asdict(self.load),
        }


def headline(decision: Decision, *, probes: bool = False) -> str:
    """What a decision says first: ``chunk_size=8 (native=12, benchmark)``.

    With ``probes``, its probe seconds join the parentheses when it spent any
    (``..., benchmark, 8.23 s of probes)``). Resolve's one-line report follows it with
    the reason; ``tune_cluster``'s line per node type with where it was had.
    """
    what = f"chunk_size={size_name(decision.chunk_size)} (native={decision.native_chunk}, "
    what += decision.source
    if probes and decision.probe_seconds:
        what += f", {decision.probe_seconds:.2f} s of probes"
    return what + ")"
