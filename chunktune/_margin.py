"""The policy's margin as the sweep compares gains against it: a log gain, rounding allowed.

A gain is ``log(t_native / t_size)``. ``margin = 0.01`` asks for a size at least 1%
faster, so a size exactly 1% faster clears it. But its gain comes out of two timings,
a division and a log, each rounded: ``log(0.02 / (0.02 * 0.99))`` is 1.6e-16 under
``-log1p(-0.01)``, and such a size missed the margin it meets. The threshold is
therefore a few units in the last place of a ratio (about 1.0) under the margin's log:
far below any difference a timing can show (2e-15 of a call), far above the rounding.
"""

from __future__ import annotations

import math
import sys

__all__ = ["ROUNDING", "least_gain"]

ROUNDING = 8 * sys.float_info.epsilon
"""The rounding allowed a log gain: a few units in the last place of a ratio of timings."""


def least_gain(margin: float) -> float:
    """The least log gain that clears ``margin`` (a fraction): ``-log(1 - margin)``, less
    :data:`ROUNDING`, so that a size exactly the margin faster clears it."""
    return -math.log1p(-margin) - ROUNDING
