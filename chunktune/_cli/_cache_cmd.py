"""``chunktune cache path|list|show|clear|export|import|merge``: the decision cache by hand.

``list`` lives in :mod:`._list_cmd`, ``merge`` in :mod:`._merge_cmd`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import get_args

from .._cache import DecisionCache
from .._cache_format import CacheFormat, encode, suffix_format
from .._cache_transfer import read_cache_file, write_cache_file
from .._errors import CacheError, InvalidArgumentError
from .._shown import shown_file, shown_path
from ._common import (
    EXIT_OK,
    EXIT_USAGE,
    STDIN,
    STDIN_NAME,
    console_on,
    entries_of,
    error,
    exists,
    file_arg,
    help_formatter,
    newer_skipped,
    open_cache,
    output_file,
    read_stdin_cache,
    same_file,
    short_keys,
    warn_skipped,
)
from ._entry_keys import MIN_CLEAR_CHARS, find_entry, named_keys
from ._list_cmd import add_list_parser
from ._merge_cmd import add_merge_parser
from ._own_files import not_own_file
from ._render import (
    chunk_size_line,
    entry_table,
    entry_text,
    format_created,
    load_label,
    model_summary,
)

__all__ = ["add_parser"]

_STDOUT = "-"  # export's FILE for stdout, as `tar -f -` writes it
_FORMATS: tuple[CacheFormat, ...] = get_args(CacheFormat)  # export --format's choices

_CACHE_EPILOG = """\
examples:
  chunktune cache path                 where the cache file is
  chunktune cache list                 one line per stored decision
  chunktune cache list --json | jq '.[] | select((.host // "") | startswith("node7")) | .key'
                                       the entries as JSON, for a program
  chunktune cache show 3fa9c1          the stored table of one entry (key prefix)
  chunktune cache clear --yes          delete every entry
  chunktune cache clear 3fa9c1d2 --yes delete one entry (8 or more of its
                                       key's characters, or the key as listed)
  chunktune cache export backup.toml   a copy, in the format of the suffix
  chunktune cache export - | jq .      the cache as JSON on stdout
  chunktune cache export --format toml - > backup.toml
                                       the cache as TOML on stdout
  chunktune cache import other.json    merge another machine's cache, or an older
                                       tuner's JSON cache (keys legacy-<key>)
  ssh node7 chunktune cache export - | chunktune cache import -
                                       another machine's cache, piped
  chunktune cache merge n*.json -o fleet.json
                                       many hosts' caches into one file

On import and merge, a key present in both keeps the entry created later.
The cache file: a name ending in .toml is stored as TOML, any other as JSON
([cache] format can say which); export and merge -o take .json or .toml names,
and export takes - for stdout (JSON, or TOML with --format toml). import and merge
read a file by its suffix, and take - for stdin (JSON). A --format that contradicts
FILE's suffix is refused.
"""


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add ``cache`` and its verbs to ``commands``; every verb takes ``common``'s options."""
    cache = commands.add_parser(
        "cache",
        help="inspect, clear, export, import or merge the decision cache",
        description="Inspect and manage the decision cache.",
        epilog=_CACHE_EPILOG,
        formatter_class=help_formatter,
    )
    verbs = cache.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser("path", parents=[common], help="print the cache file's path").set_defaults(
        handler=_cmd_cache_path
    )
    add_list_parser(verbs, common)
    show = verbs.add_parser("show", parents=[common], help="the stored table of one entry")
    show.add_argument("key", metavar="KEY-PREFIX", help="the start of the entry's key")
    show.set_defaults(handler=_cmd_cache_show)
    clear = verbs.add_parser(
        "clear", parents=[common], help="delete every entry, or those the KEYs name"
    )
    clear.add_argument(
        "keys",
        nargs="*",
        metavar="KEY",
        help=f"an entry's key as `cache list` shows it, or its first {MIN_CLEAR_CHARS} or more "
        "characters where they name one entry only (default: every entry, those a newer "
        "chunktune wrote that this one cannot read too)",
    )
    clear.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    clear.set_defaults(handler=_cmd_cache_clear)
    export = verbs.add_parser(
        "export", parents=[common], help="write a copy (.json or .toml by the suffix; - for stdout)"
    )
    export.add_argument(
        "file", metavar="FILE", help="a .json or .toml name, or - for stdout (JSON by default)"
    )
    export.add_argument(
        "--format",
        choices=_FORMATS,
        help="json or toml (default: FILE's suffix; json for -); must agree with FILE's suffix",
    )
    export.add_argument("--force", action="store_true", help="replace FILE if it exists")
    export.set_defaults(handler=_cmd_cache_export)
    imp = verbs.add_parser(
        "import", parents=[common], help="merge a chunktune cache or an older tuner's cache"
    )
    imp.add_argument(
        "file", metavar="FILE", help="a .json or .toml cache file, or - for stdin (JSON)"
    )
    imp.set_defaults(handler=_cmd_cache_import)
    add_merge_parser(verbs, common)


def _cmd_cache_path(args: argparse.Namespace) -> int:
    print(open_cache(args.config).path)
    return EXIT_OK


def _cmd_cache_show(args: argparse.Namespace) -> int:
    cache = open_cache(args.config)
    key, entry = find_entry(cache, args.key)
    facts = [
        ("model", model_summary(entry)),
        ("model file", shown_path(entry.model_file) if entry.model_file else "-"),
        ("envs x threads", f"{entry.num_envs or '?'} x {entry.nthread or '?'}"),
        ("policy", f"{entry_text(entry.policy)} ({entry_text(entry.policy_hash, 'no hash')})"),
        ("created", format_created(entry.created)),
        ("host", entry_text(entry.host)),
        # the key's machine part: entries of one job from two kinds of machine differ here
        ("machine", _pairs(entry.device) or "not recorded"),
        (
            "versions",
            f"chunktune {entry_text(entry.chunktune_version)}, "
            f"mujoco {entry_text(entry.mujoco_version)}",
        ),
        ("probe time", f"{entry.probe_seconds:.2f} s" + (" (partial)" if entry.partial else "")),
        ("measured at", "load not recorded" if entry.load is None else load_label(entry.load)),
    ]
    if entry.signature:
        facts.append(("signature", _pairs(entry.signature)))
    console = console_on(sys.stdout)
    width = max(len(name) for name, _ in facts)
    # the key on a line of its own: where it does not fit beside its name it goes whole to
    # the next line, for a copy to paste, never cut in two
    console.print(f"{'key':<{width}}  {key}")
    if console.is_terminal:
        # a grid: on a narrow terminal a long value (the machine, the signature) wraps
        # within its column, under the value, not from the left edge under the names
        from rich.table import Table  # rich loads only for a terminal's grid

        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for name, value in facts:
            grid.add_row(name, value)
        console.print(grid)
    else:  # piped: one line each, for grep, with no padding after it
        for name, value in facts:
            console.print(f"{name:<{width}}  {value}")
    if entry.timings:
        console.print(entry_table(entry))
    else:
        console.print("(no candidates stored)")
    console.print(chunk_size_line(entry.chunk_size, entry.native_chunk))
    if entry.reason:
        console.print(shown_path(entry.reason))
    return EXIT_OK


def _pairs(table: Mapping[str, object]) -> str:
    """``name=value`` for each of ``table``'s items, by name, whatever their stored order;
    text that would not print as written (a newline in a custom signature) quoted, escaped."""
    return ", ".join(
        f"{shown_path(k)}={shown_path(v) if isinstance(v, str) else v}"
        for k, v in sorted(table.items())
    )


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    cache = open_cache(args.config)
    if args.keys:
        return _clear_named(cache, args.keys, yes=args.yes)
    count = len(cache.entries(strict=True))
    # a newer chunktune's entries that this one cannot read go too: clear empties the cache
    newer = len(cache.unreadable())
    if count + newer == 0:
        cache.clear()  # no entries, but idle key locks and dead writers' temporary files
        print(f"no entries in {shown_file(cache.path)}; nothing to clear")
        return EXIT_OK
    every = "the" if count + newer == 1 else "all"
    what = f"{entries_of(count + newer)} from {shown_file(cache.path)}{_newer(newer)}"
    refused = _refused(args.yes, what, f"{every} ")
    if refused is not None:
        return refused
    newer = len(cache.unreadable())  # as of now, not of the question asked
    removed = cache.clear() + newer
    print(f"deleted {entries_of(removed)} from {shown_file(cache.path)}{_newer(newer)}")
    return EXIT_OK


def _newer(count: int) -> str:
    """`` (among them 1 a newer chunktune wrote, which this one cannot read)``; nothing for 0."""
    if not count:
        return ""
    return f" (among them {count} a newer chunktune wrote, which this one cannot read)"


def _clear_named(cache: DecisionCache, names: list[str], *, yes: bool) -> int:
    """``cache clear KEY...``: delete the entries the names name, every other one kept.

    Every name is checked before anything is deleted; the entries go under the write
    lock, so an entry another process stores meanwhile stays.
    """
    entries = cache.entries(strict=True)
    keys = named_keys(entries, names, newer=cache.unreadable())
    short = short_keys(entries)
    listed = ", ".join(short[k] for k in keys)
    refused = _refused(yes, f"{entries_of(len(keys))} ({listed}) from {shown_file(cache.path)}", "")
    if refused is not None:
        return refused
    removed = cache.remove(keys)
    for key in keys:
        print(f"deleted {short[key]}" if key in removed else f"{short[key]} was already gone")
    print(f"deleted {entries_of(len(removed))} from {shown_file(cache.path)}")
    return EXIT_OK


def _refused(yes: bool, what: str, every: str) -> int | None:
    """None to go on deleting ``what`` (``--yes``, or a yes typed at the terminal), else
    the exit code to end with: 2 off a terminal (there is no one to ask), 0 for a no."""
    if yes:
        return None
    if not sys.stdin.isatty():
        error(
            f"refusing to delete {what} without --yes "
            "(stdin is not a terminal, so there is no one to ask)"
        )
        return EXIT_USAGE
    answer = _ask(f"Delete {every}{what}? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        print("nothing deleted")
        return EXIT_OK
    return None


def _ask(question: str) -> str:
    """The line typed in answer to ``question``, asked on stderr; ``""`` at the end of input.

    Asked on stderr, as ``rm -i`` asks, so that the question is seen when stdout is
    redirected (``cache clear > log``) and does not end up in that file.
    """
    try:
        print(question, end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
    except KeyboardInterrupt:  # Ctrl-C: "interrupted" follows on a line of its own
        print(file=sys.stderr, flush=True)
        raise
    if not answer.endswith("\n"):  # input ended (Ctrl-D): end the question's line
        print(file=sys.stderr, flush=True)
    return answer


def _cmd_cache_export(args: argparse.Namespace) -> int:
    cache = open_cache(args.config)
    if args.file == _STDOUT:
        _export_to_stdout(cache, args.format or "json")
        return EXIT_OK
    target = output_file("export", args.file)
    fmt = suffix_format(target)
    if fmt is None:
        raise InvalidArgumentError(
            f"export {shown_file(target)}: the name must end in .json or .toml"
        )
    if args.format is not None and args.format != fmt:
        # a .json file holding TOML would not read back: import goes by the suffix
        raise InvalidArgumentError(
            f"export {shown_file(target)}: --format {args.format} contradicts the name's suffix "
            f"{target.suffix}; expected a .{args.format} name, or no --format"
        )
    if same_file(target, cache.path):
        raise InvalidArgumentError(f"export {shown_file(target)}: that is the cache file itself")
    not_own_file(target, "export", args.config)  # a lock, the system cache
    if exists(target) and not args.force:
        raise InvalidArgumentError(
            f"export {shown_file(target)}: the file exists; add --force to replace it"
        )
    entries = cache.entries(strict=True)
    write_cache_file(target, entries, format=fmt)
    print(
        f"exported {entries_of(len(entries))} from {shown_file(cache.path)} "
        f"to {shown_path(str(target))}"
    )
    return EXIT_OK


def _export_to_stdout(cache: DecisionCache, fmt: CacheFormat) -> None:
    """The cache as a cache file in ``fmt`` on stdout, and nothing else there
    (``export - | jq``): the bytes ``export`` writes to a file of that suffix.

    Raises:
        CacheError: the cache cannot be read, or an entry cannot be encoded.
    """
    entries = cache.entries(strict=True)
    try:
        data = encode(entries, fmt)
    except (TypeError, ValueError) as exc:
        raise CacheError(f"cannot export {shown_file(cache.path)}: {exc}") from exc
    sys.stdout.write(data.decode())


def _cmd_cache_import(args: argparse.Namespace) -> int:
    cache = open_cache(args.config)
    if args.file == STDIN:
        source, parsed = STDIN_NAME, read_stdin_cache("import")
    else:
        path = file_arg("import", args.file)
        if exists(path) and same_file(path, cache.path):
            raise InvalidArgumentError(f"import {shown_file(path)}: that is the cache file itself")
        source, parsed = shown_file(path), read_cache_file(path)
    incoming, kind = parsed.entries, parsed.kind
    warn_skipped(parsed, source)
    report = cache.merge(incoming)
    # as `cache list` shows them: a legacy key whole, a job's policies apart
    short = short_keys({*cache.entries(), *incoming})
    for key in report.replaced:
        print(f"replaced {short[key]}: the imported entry is newer")
    for key in report.kept:
        print(f"kept {short[key]}: the entry already in the cache is newer")
    added, replaced, kept, same = (
        len(report.added),
        len(report.replaced),
        len(report.kept),
        len(report.same),
    )
    offered = len(incoming) + len(parsed.skipped)  # a malformed entry is one not imported
    summary = (
        f"imported {added + replaced} of {entries_of(offered)} from {kind} {shown_path(source)}"
    )
    extras = []
    newer = newer_skipped(parsed)
    if len(parsed.skipped) > newer:
        extras.append(f"{len(parsed.skipped) - newer} malformed, skipped")
    if newer:
        extras.append(f"{newer} a newer chunktune wrote, skipped")
    if replaced:
        extras.append(f"{replaced} replacing older entries")
    if kept:
        extras.append(f"kept {kept} newer entries already in the cache")
    if same:
        extras.append(f"{same} already present")
    if extras:
        summary += f" ({'; '.join(extras)})"
    print(f"{summary} into {shown_file(cache.path)}")
    return EXIT_OK
