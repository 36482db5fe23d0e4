"""What the command line draws: candidate tables, cache summaries and the step-time plot.

Pure presentation over numbers a Decision or a CacheEntry already holds; nothing
here measures, reads settings or touches the cache file. Times come in seconds
and are shown in milliseconds.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._cache_entry import CacheEntry
from .._load import MachineLoad
from .._shown import first_units, shown_path

if TYPE_CHECKING:
    from rich.table import Table

__all__ = [
    "Row",
    "candidate_rows",
    "candidate_table",
    "chunk_label",
    "chunk_size_line",
    "entry_age",
    "entry_table",
    "entry_text",
    "format_age",
    "format_created",
    "load_label",
    "model_summary",
    "plot_formats",
    "signature_summary",
    "write_plot",
]

_CHOSEN_STYLE = "bold green"
_RACED_STYLE = "dim"


@attrs.frozen(kw_only=True)
class Row:
    """One measured candidate. ``chunk`` None is the native default."""

    chunk: int | None
    seconds: float
    ratio: float | None
    samples: int | None
    raced_out: bool
    chosen: bool


def chunk_label(chunk: int | None, native_chunk: int) -> str:
    """``"native (=12)"`` for None (``"native"`` when the native chunk is unknown), else ``"8"``."""
    if chunk is not None:
        return str(chunk)
    return f"native (={native_chunk})" if native_chunk > 0 else "native"


def chunk_size_line(chunk: int | None, native_chunk: int) -> str:
    """What to pass to ``rollout(chunk_size=...)``, as ``tune`` and ``cache show`` say it:
    ``"chunk_size=None (native, 12)"``, ``"chunk_size=8 (native would be 12)"``; without
    the native chunk where it is unknown (an older tuner's entry)."""
    shown = "None" if chunk is None else str(chunk)
    if native_chunk <= 0:
        return f"chunk_size={shown}" + (" (native)" if chunk is None else "")
    native = f"native, {native_chunk}" if chunk is None else f"native would be {native_chunk}"
    return f"chunk_size={shown} ({native})"


def load_label(load: MachineLoad) -> str:
    """``"load 0.75 on 4 CPUs"``; a busy one says it is measured again once calm."""
    if load.busy:
        return f"{load} (busy: measured again once the machine is calm)"
    return str(load)


def candidate_rows(
    timings: Mapping[int | None, float],
    *,
    chunk_size: int | None,
    samples: Mapping[int | None, int] | None = None,
    raced_out: Sequence[int] = (),
) -> list[Row]:
    """The measured candidates, native first, then by chunk size; ratios are to native."""
    native_s = timings.get(None)
    ordered = sorted(timings.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0))
    out = []
    for chunk, seconds in ordered:
        out.append(
            Row(
                chunk=chunk,
                seconds=seconds,
                ratio=seconds / native_s if native_s else None,
                samples=None if samples is None else samples.get(chunk),
                raced_out=chunk is not None and chunk in raced_out,
                chosen=chunk == chunk_size,
            )
        )
    return out


def _decimals(rows: Sequence[Row]) -> int:
    """Decimals that give the fastest estimate three significant digits (0 to 4)."""
    smallest = min((r.seconds * 1e3 for r in rows if r.seconds > 0), default=1.0)
    return max(0, min(4, 2 - math.floor(math.log10(smallest))))


def candidate_table(rows: Sequence[Row], *, native_chunk: int, title: str | None = None) -> Table:
    """The candidates as a table: chunk, estimate (ms), ratio to native, samples, note.

    Where the race dropped some sizes (``raced out``), the sizes it had not dropped
    when it ended are its ``contender``s; a schedule that races nothing notes neither.
    """
    from rich import box  # rich loads only for a table to draw
    from rich.table import Table
    from rich.text import Text

    table = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    table.add_column("chunk", justify="right")
    table.add_column("estimate ms", justify="right")
    table.add_column("vs native", justify="right")
    table.add_column("samples", justify="right")
    table.add_column("note")
    digits = _decimals(rows)
    raced = any(row.raced_out for row in rows)
    for row in rows:
        notes = []
        if row.chunk is None:
            notes.append("native")
        elif row.chunk == native_chunk:
            notes.append("= native")
        if row.chosen:
            notes.append("<- chosen")
        if row.raced_out:
            notes.append("raced out")
        elif raced and row.chunk is not None and not row.chosen:
            notes.append("contender")
        style = _CHOSEN_STYLE if row.chosen else (_RACED_STYLE if row.raced_out else "")
        table.add_row(
            chunk_label(row.chunk, native_chunk),
            f"{row.seconds * 1e3:.{digits}f}",
            "-" if row.ratio is None else f"{row.ratio:.3f}",
            "-" if row.samples is None else str(row.samples),
            Text(", ".join(notes)),
            style=style,
        )
    return table


def entry_table(entry: CacheEntry) -> Table:
    """A stored entry's evidence as a candidate table."""
    rows = candidate_rows(
        entry.timings,
        chunk_size=entry.chunk_size,
        samples=entry.samples or None,
        raced_out=entry.raced_out,
    )
    return candidate_table(rows, native_chunk=entry.native_chunk)


def format_age(seconds: float) -> str:
    """A short age: ``"42s"``, ``"17m"``, ``"5h"``, ``"12d"``; ``"?"`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def entry_age(entry: CacheEntry, now: float | None = None) -> str:
    """How long ago the entry was created, as :func:`format_age` writes it."""
    if not entry.created > 0:  # unknown (0), or not a date at all
        return "?"
    return format_age((time.time() if now is None else now) - entry.created)


def format_created(created: float, now: float | None = None) -> str:
    """``"2026-11-30 08:15:02 (5h ago)"`` in local time; ``"unknown"`` for any date it cannot show.

    Zero or negative means unknown; a date the platform's clock cannot represent
    (``1e300``, say) is shown as unknown rather than raising.
    """
    if not (math.isfinite(created) and created > 0):
        return "unknown"
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(created))
    except (OverflowError, OSError, ValueError):
        return "unknown"
    age = format_age((time.time() if now is None else now) - created)
    return f"{stamp} ({age} ago)" if age != "?" else f"{stamp} (in the future)"


_SUMMARY_ITEMS = 3  # signature items a summary shows; the whole one is in `cache show`
_SUMMARY_VALUE = 12  # characters of each value it shows


def entry_text(text: str, missing: str = "?") -> str:
    """An entry's own text (its host, policy, versions) as a line shows it, ``missing`` where
    it has none: a merged entry's came from another machine's file, and may hold anything."""
    return shown_path(text) if text else missing


def _short(value: object) -> str:
    text = f"{value:g}" if isinstance(value, float) else shown_path(str(value))
    return text if len(text) <= _SUMMARY_VALUE else first_units(text, _SUMMARY_VALUE - 1) + "…"


def signature_summary(signature: Mapping[str, Any]) -> str:
    """A signature in a few words: its kind, then its first keys by name with their values,
    shortened.

    For example ``reach horizon=200 robot=ur5e task=reach-v3 …``; ``"?"`` when empty. By
    name, not as stored: JSON files store a table sorted, TOML files as it was made, and one
    entry lists alike from either.
    """
    words = [shown_path(str(signature["kind"]))] if "kind" in signature else []
    items = sorted((k, v) for k, v in signature.items() if k != "kind")
    words += [f"{shown_path(k)}={_short(v)}" for k, v in items[:_SUMMARY_ITEMS]]
    if len(items) > _SUMMARY_ITEMS:
        words.append("…")
    return " ".join(words) or "?"


def model_summary(entry: CacheEntry) -> str:
    """What the entry was measured on, in a few words.

    With a known model: the signature's kind and the model file's name (or its label,
    or its hash), for example ``mujoco.rollout scene.xml (demo)``; a file's label follows
    its name, ``mujoco.rollout humanoid.xml (humanoid-dr)``. Otherwise, a custom
    workload's signature in short (:func:`signature_summary`).
    """
    sig: Mapping[str, Any] = entry.signature
    label = shown_path(str(sig["model_label"])) if sig.get("model_label") else None
    if entry.model_file:
        name = shown_path(os.path.basename(entry.model_file))
        # two families drawn from one file (light and heavy contact) are two entries
        # that the file's name alone would show alike
        if label is not None:
            name = f"{name} ({label})"
    elif label is not None:
        name = label
    elif sig.get("model_sha"):
        name = shown_path(str(sig["model_sha"])[:12])
    else:
        return signature_summary(sig)
    if sig.get("states") == "demo":
        name = f"{name} (demo)"
    return f"{shown_path(str(sig.get('kind', '?')))} {name}"


# ---------------------------------------------------------------- the plot


def plot_formats() -> set[str]:
    """File suffixes (without the dot) the plot can be written as.

    Raises:
        ImportError: matplotlib is not installed.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return set(FigureCanvasAgg.get_supported_filetypes())


def write_plot(
    path: str | os.PathLike[str],
    rows: Sequence[Row],
    *,
    native_chunk: int,
    title: str,
    bound_s: float | None = None,
) -> None:
    """Step time against chunk size on a log axis; native, chosen and the balance bound marked.

    Draws on matplotlib's Agg canvas directly (no pyplot, no global backend switch).

    Raises:
        ImportError: matplotlib is not installed.
        OSError: the file cannot be written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(7.0, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    _plot_candidates(ax, rows)
    _mark_native_and_chosen(ax, rows, native_chunk)
    if bound_s is not None:
        ax.axhline(
            bound_s * 1e3,
            color="0.3",
            linestyle=":",
            linewidth=1.2,
            label="balance bound sum(cost)/T",
        )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.set_xlabel("chunk size (envs per chunk)")
    ax.set_ylabel("time per pool call (ms)")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.savefig(Path(path), dpi=120)


def _plot_candidates(ax: Any, rows: Sequence[Row]) -> None:
    """Each sized row's time (ms) on ``ax``: a line through all, those raced out hollow."""
    sized = [(r.chunk, r) for r in rows if r.chunk is not None]
    live = [(c, r) for c, r in sized if not r.raced_out]
    raced = [(c, r) for c, r in sized if r.raced_out]
    ax.plot(
        [c for c, _ in sized],
        [r.seconds * 1e3 for _, r in sized],
        color="0.6",
        linewidth=1,
        zorder=1,
    )
    ax.scatter(
        [c for c, _ in live],
        [r.seconds * 1e3 for _, r in live],
        color="tab:blue",
        label="candidate",
        zorder=2,
    )
    if raced:
        ax.scatter(
            [c for c, _ in raced],
            [r.seconds * 1e3 for _, r in raced],
            facecolors="none",
            edgecolors="tab:blue",
            label="raced out",
            zorder=2,
        )


def _mark_native_and_chosen(ax: Any, rows: Sequence[Row], native_chunk: int) -> None:
    """Native's time (ms) on ``ax`` as a line and a diamond at ``native_chunk``; the chosen
    row ringed."""
    native = next((r for r in rows if r.chunk is None), None)
    if native is not None and native_chunk > 0:
        ax.axhline(native.seconds * 1e3, color="tab:red", linestyle="--", linewidth=1)
        ax.scatter(
            [native_chunk],
            [native.seconds * 1e3],
            marker="D",
            color="tab:red",
            label=f"native (chunk {native_chunk})",
            zorder=3,
        )
    chosen = next((r for r in rows if r.chosen), None)
    if chosen is not None:
        x = native_chunk if chosen.chunk is None else chosen.chunk
        ax.scatter(
            [x],
            [chosen.seconds * 1e3],
            marker="o",
            s=320,
            facecolors="none",
            edgecolors="tab:green",
            linewidths=2,
            label=f"chosen ({'native' if chosen.chunk is None else chosen.chunk})",
            zorder=4,
        )
