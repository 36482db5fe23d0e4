"""``chunktune cache list [--json]``: one line per stored decision, or one JSON document.

The table is for a person: keys as ``cache show`` and ``cache clear`` take them, newest
first, a cpus column where the entries were measured with different CPUs (a 1-CPU slot
and its whole machine), a host column where they come from more than one host.
``--json`` is for a program: every entry's facts under stable names, and nothing else on
stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._cache_entry import CacheEntry
from .._shown import shown_file, shown_path
from ._common import EXIT_OK, console_on, entries_of, open_cache, short_keys, table_console
from ._plain_table import Column, plain_table
from ._render import chunk_label, entry_age, entry_text, model_summary
from ._streams import escaped

if TYPE_CHECKING:
    from rich.table import Table

__all__ = ["add_list_parser"]

_COLUMNS: tuple[Column, ...] = (
    ("model", "left", 0),
    ("N", "right", 0),
    ("T", "right", 0),
    ("chunk", "right", 0),
    ("age", "right", 0),
    ("policy", "left", 0),
)
_HOST_CHARS = 12  # a host's first name, cut to this: the column says where, `show` says all


def add_list_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``list`` to the ``cache`` verbs."""
    listing = verbs.add_parser(
        "list", parents=[common], help="one line per entry (--json: one JSON document)"
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print the entries as one JSON list on stdout, newest first (fields: see README)",
    )
    listing.set_defaults(handler=_cmd_cache_list)


def _cmd_cache_list(args: argparse.Namespace) -> int:
    cache = open_cache(args.config)
    entries = cache.entries(strict=True)
    newest_first = sorted(entries.items(), key=lambda kv: -kv[1].created)
    short = short_keys(entries)
    if args.json:
        listed = [entry_fields(key, short[key], entry) for key, entry in newest_first]
        sys.stdout.write(json.dumps(listed, indent=2, allow_nan=False) + "\n")
        return EXIT_OK
    if not entries:
        print(f"no entries in {shown_file(cache.path)}")
        return EXIT_OK
    # the key is what `cache show` takes: never cut, however narrow the terminal
    columns: list[Column] = [("key", "left", max(map(len, short.values()))), *_COLUMNS]
    # which host measured an entry matters once a merged cache holds several hosts'
    hosts = len({entry.host for entry in entries.values()}) > 1
    # a slot's entries and its whole machine's look alike but for the CPUs they had
    slots = len({cpu_slot(entry.device) for entry in entries.values()}) > 1
    if slots:
        columns.append(("cpus", "right", 0))
    if hosts:
        columns.append(("host", "left", 0))
    now = time.time()
    rows = []
    for key, entry in newest_first:
        cells = [
            short[key],
            model_summary(entry),
            str(entry.num_envs or "?"),
            str(entry.nthread or "?"),
            chunk_label(entry.chunk_size, entry.native_chunk),
            entry_age(entry, now),
            entry_text(entry.policy),
        ]
        if slots:
            cells.append(cpu_slot(entry.device))
        if hosts:
            cells.append(short_host(entry.host))
        rows.append(cells)
    console = console_on(sys.stdout)
    if console.is_terminal or console.options.ascii_only:
        # fitted to a window, or drawn in ASCII (rich's own box of |, - and +): rich's; a
        # pipe's console as wide as the table, so that no cell is cut there either
        ascii_only = console.options.ascii_only
        if ascii_only:
            # each cell as the stream will write it (… as ..., a name it cannot hold as
            # escapes): rich lays out what is written, so every row is as wide as the rule
            rows = [[escaped(cell, console.file) for cell in cells] for cells in rows]
        table = _rich_table(columns, rows, fold=ascii_only)
        console = table_console(table)
        console.print(table)
    else:  # laid out as rich lays it out there, without its cost per row
        console.file.write("".join(f"{line}\n" for line in plain_table(columns, rows)))
    console.print(f"{entries_of(len(entries))} in {shown_file(cache.path)}")
    busy = sum(entry.load is not None and entry.load.busy for entry in entries.values())
    if busy:
        console.print(
            f"{busy} of them measured while the machine was busy: each is measured again "
            "by the first request that finds it calm (`cache show KEY` says which)"
        )
    return EXIT_OK


def _rich_table(columns: list[Column], rows: list[list[str]], *, fold: bool = False) -> Table:
    """The table rich fits to a terminal's width; ``fold``: a cell too wide for its column
    goes on over more lines instead of ending in ``…`` (which an ASCII stream writes as
    ``...``, two characters wider than rich laid the row out for)."""
    from rich import box  # rich loads only for a table to draw
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    (key, _, least), *others = columns
    table.add_column(key, no_wrap=True, min_width=least)
    for name, justify, _ in others:
        table.add_column(name, justify=justify, overflow="fold" if fold else "ellipsis")
    for cells in rows:
        table.add_row(*cells)
    return table


def short_host(host: str) -> str:
    """``host``'s first name (``node7`` of ``node7.cluster.example``), at most 12 characters;
    ``"?"`` where the entry does not know it."""
    name = host.split(".", 1)[0] or host
    if not name:
        return "?"
    # cut, then escaped: a merged entry's host name may hold a newline or an escape
    return shown_path(name if len(name) <= _HOST_CHARS else name[: _HOST_CHARS - 1] + "…")


def cpu_slot(device: Mapping[str, object]) -> str:
    """The CPUs an entry was measured with: ``"1 of 2"`` (usable of the machine's logical
    CPUs), ``", quota 1.5"`` added under a CPU quota; ``"?"`` for what it does not record."""
    usable, logical = device.get("usable_cpus"), device.get("logical_cpus")
    cell = f"{_count(usable)} of {_count(logical)}"
    quota = recorded_quota(device)
    if quota is not None:
        cell += f", quota {quota:g}"
    return cell


def _count(value: object) -> str:
    """A recorded CPU count for a cell; a merged entry's text escaped, ``?`` where none."""
    return "?" if value is None else shown_path(str(value))


def recorded_quota(device: Mapping[str, object]) -> float | None:
    """An entry's CPU quota in CPUs; None for none (``"none"``), or what is no number."""
    quota = device.get("cpu_quota")
    # a bool is an int to isinstance, and no quota
    return quota if isinstance(quota, int | float) and not isinstance(quota, bool) else None


def iso_created(created: float) -> str | None:
    """``created`` (seconds since the epoch) in ISO 8601, UTC; None where it is unknown
    (zero, negative) or no date the platform can write (``1e300``)."""
    if not (math.isfinite(created) and created > 0):
        return None
    try:
        stamp = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return stamp.isoformat(timespec="seconds")


def entry_fields(key: str, short: str, entry: CacheEntry) -> dict[str, Any]:
    """One entry of ``cache list --json``: the README's fields, None for what it does not know."""
    device = entry.device
    return {
        "key": key,
        "short_key": short,
        "chunk_size": entry.chunk_size,
        "native_chunk": entry.native_chunk or None,
        "num_envs": entry.num_envs or None,
        "nthread": entry.nthread or None,
        "model": model_summary(entry),
        "model_file": entry.model_file,
        "policy": entry.policy or None,
        "policy_hash": entry.policy_hash or None,
        "reason": entry.reason,
        "gain": entry.gain,
        "partial": entry.partial,
        "busy": entry.load is not None and entry.load.busy,
        "created": iso_created(entry.created),
        "host": entry.host or None,
        "machine": {
            "cpu": device.get("cpu"),
            "cpus": device.get("logical_cpus"),
            "usable_cpus": device.get("usable_cpus"),
            "cpu_quota": recorded_quota(device),
            "mujoco": entry.mujoco_version or device.get("mujoco"),
        },
        "chunktune_version": entry.chunktune_version or None,
        "signature": dict(sorted(entry.signature.items())),
    }
