"""``chunktune cache merge FILE... [-o OUT]``: many hosts' caches into one, newest entry per key.

A fleet's caches, collected from its nodes, merge into the user's cache or into one
file (``-o``) that an image can ship as its system cache. Every input is read and
checked before anything is written, and all of them are merged in one write; a key held
by several inputs keeps the entry created last, and each replaced or kept entry is
named, so nothing is dropped without a line saying so.
"""

from __future__ import annotations

import argparse

from .._cache import DecisionCache
from .._cache_format import suffix_format
from .._cache_parse import ParsedCache
from .._cache_transfer import read_cache_file
from .._errors import CacheError, InvalidArgumentError
from .._shown import shown_file, shown_some
from ._common import (
    EXIT_OK,
    STDIN,
    STDIN_NAME,
    entries_of,
    exists,
    file_arg,
    open_cache,
    output_file,
    read_stdin_cache,
    same_file,
    short_keys,
    warn_skipped,
)
from ._own_files import not_own_file

__all__ = ["add_merge_parser"]

_SHOW_ALTERED = 5  # keys named in the refusal of an altered OUT; the rest are counted


def add_merge_parser(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Add ``merge`` to the ``cache`` verbs."""
    merge = verbs.add_parser(
        "merge",
        parents=[common],
        help="merge cache files into the cache (or -o OUT); the newest entry per key wins",
    )
    merge.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="chunktune caches, merged in order (- reads one from stdin, as JSON)",
    )
    merge.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="merge into OUT (.json or .toml, created if missing) instead of the cache",
    )
    merge.set_defaults(handler=_cmd_cache_merge)


def _target(args: argparse.Namespace) -> tuple[DecisionCache, str]:
    """The cache to merge into, and how to name its entries that were there before."""
    if args.output is None:
        return open_cache(args.config, instead="; use -o OUT"), "the cache"
    out = output_file("merge -o", args.output)
    fmt = suffix_format(out)
    if fmt is None:
        raise InvalidArgumentError(
            f"merge -o {shown_file(out)}: the name must end in .json or .toml"
        )
    # a cache may be merged into, under its lock; a lock (the sweep lock named *.json)
    # replaced would let two sweeps measure at once
    not_own_file(out, "merged cache", args.config, caches_too=False)
    if out.exists():
        if not out.is_file():
            # never read: /dev/zero has no end (all memory went), a FIFO blocks for good
            raise CacheError(
                f"merge -o {shown_file(out)}: it is no regular file (a device, FIFO or socket); "
                "expected a cache file's name"
            )
        # an existing OUT must be a cache as chunktune wrote it: never quarantine it here
        altered = read_cache_file(out).altered
        if altered:
            keys = shown_some(altered, _SHOW_ALTERED)
            raise CacheError(
                f"merge -o {shown_file(out)}: it holds {entries_of(len(altered))} ({keys}) "
                "whose checksum does not match, edited or damaged after chunktune wrote them; "
                "it is left as it is (merge into another file)"
            )
    return DecisionCache(out, format=fmt), shown_file(out)


def _cmd_cache_merge(args: argparse.Namespace) -> int:
    target, before = _target(args)
    inputs: list[tuple[str, ParsedCache]] = []
    if args.files.count(STDIN) > 1:
        raise InvalidArgumentError(
            f"merge: - (stdin) is given {args.files.count(STDIN)} times; expected it once at most"
        )
    for value in args.files:
        if value == STDIN:
            inputs.append((STDIN_NAME, read_stdin_cache("merge")))
            continue
        path = file_arg("merge FILE", value)
        if exists(path) and same_file(path, target.path):
            raise InvalidArgumentError(
                f"merge {shown_file(path)}: that is the file being merged into"
            )
        inputs.append((shown_file(path), read_cache_file(path)))  # all read before any write
    for name, parsed in inputs:
        warn_skipped(parsed, name)
    # one write for every input: each write rewrites the whole file
    reports = target.merge_many([parsed.entries for _, parsed in inputs])
    # as `cache list` shows them: apart from the job's other policies, in OUT or merged
    every = {key for _, parsed in inputs for key in parsed.entries}
    short = short_keys({*target.entries(), *every})
    origin: dict[str, str] = {}  # key -> the input its current entry came from
    totals = {"added": 0, "replaced": 0, "kept": 0, "same": 0}
    for (name, _), report in zip(inputs, reports, strict=True):
        for key in report.replaced:
            print(
                f"replaced {short[key]}: {name}'s entry is newer than {origin.get(key, before)}'s"
            )
        for key in report.kept:
            print(f"kept {short[key]} from {origin.get(key, before)}: {name}'s entry is not newer")
        for key in (*report.added, *report.replaced):
            origin[key] = name
        totals["added"] += len(report.added)
        totals["replaced"] += len(report.replaced)
        totals["kept"] += len(report.kept)
        totals["same"] += len(report.same)
    held = len(target.entries(strict=True))
    print(
        f"merged {len(inputs)} file{'' if len(inputs) == 1 else 's'} "
        f"into {shown_file(target.path)}: "
        f"{totals['added']} added, {totals['replaced']} replaced by newer entries, "
        f"{totals['kept']} not taken (not newer), {totals['same']} already present; "
        f"{entries_of(held)} now"
    )
    return EXIT_OK
