"""A race's field from paired rounds of given levels, for the choosing and field tests."""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from chunktune import Policy, load_settings
from chunktune._field import Field
from chunktune._probe import Probe
from chunktune.sim import SimulatedWorkload

# per-round noise: each size's calls alternate this far either side of its level
WOBBLE = (0.998, 1.002, 0.999, 1.001, 0.997, 1.003)


def balanced(**changes: object) -> Policy:
    """The shipped ``balanced`` policy with ``changes``."""
    return attrs.evolve(load_settings().get_policy("balanced"), **changes)  # type: ignore[arg-type]


def field(
    pol: Policy, rows: Mapping[int, tuple[float | None, ...]], *, wobble: tuple[float, ...] = WOBBLE
) -> Field:
    """Paired rounds, one per wobble: native at 1 s, each size at its row's level that round
    (the row's last level from then on; None: not measured that round); native 12, upper 128."""
    w = SimulatedWorkload.from_layout("uniform", num_envs=1024, nthread=8)
    probe = Probe(w, pol, check_cancelled=lambda: None, on_event=None, clock=lambda: 0.0)
    f = Field(probe, [None, *rows])
    for r, jitter in enumerate(wobble):
        f.ev.add(None, r, 1.0)
        for chunk, levels in rows.items():
            level = levels[min(r, len(levels) - 1)]
            if level is not None:
                f.ev.add(chunk, r, level * jitter)
    f.round = len(wobble) - 1
    return f
