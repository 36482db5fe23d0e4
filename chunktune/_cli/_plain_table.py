"""A table laid out as rich draws ``cache list``'s off a terminal, without rich's cost per row.

rich measures and renders each cell through its own objects, about 2 ms a row here: a
fleet's 50,000 entries took two minutes to list into a pipe. Off a terminal the table is
as wide as it needs (no cell is cut or wrapped: :func:`chunktune._cli._common.table_console`),
so its layout is simple arithmetic: each column as wide as its widest cell (in terminal
cells, as rich counts them), ``box.SIMPLE_HEAD`` without edges: three spaces between
columns, a rule of ``─`` under the header. A terminal's table, which rich fits to the
window, and an ASCII one are still drawn by rich.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

__all__ = ["Column", "plain_table"]

Column = tuple[str, Literal["left", "right"], int]
"""A column's header, how its cells are justified, and its least width."""

_GAP = "   "  # a cell's right padding, the box's blank divider, the next cell's left padding


def plain_table(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> Iterator[str]:
    """The table's lines, header and rule first, as rich prints ``Table(box=SIMPLE_HEAD,
    pad_edge=False, show_edge=False)`` of these columns on a console as wide as it, in
    UTF-8 (an ASCII console gets rich's ASCII box instead)."""
    from rich.cells import cell_len  # rich loads only for a table to draw

    widths = [max(least, cell_len(name)) for name, _, least in columns]
    lengths = [[cell_len(cell) for cell in row] for row in rows]
    for row in lengths:
        widths = [max(w, n) for w, n in zip(widths, row, strict=True)]
    right = [justify == "right" for _, justify, _ in columns]

    def line(cells: Sequence[str], sizes: Sequence[int]) -> str:
        return _GAP.join(
            " " * (w - n) + c if r else c + " " * (w - n)
            for c, n, w, r in zip(cells, sizes, widths, right, strict=True)
        )

    names = [name for name, _, _ in columns]
    yield line(names, [cell_len(name) for name in names])
    yield "─" * (sum(widths) + len(_GAP) * (len(widths) - 1))
    for cells, sizes in zip(rows, lengths, strict=True):
        yield line(cells, sizes)
