"""``chunktune policy list|show``: the measurement policies, presets and the user's own."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import tomli_w

from .._config import load_settings, preset_names, preset_tables
from .._converter import unstructure_policy
from .._idle_keys import idle_when_pasted
from .._policy import Policy
from .._settings import Settings
from .._shown import escaped_toml, shown_path, spelled
from ._common import EXIT_OK, help_formatter, named_policy, table_console

__all__ = ["add_parser"]

_POLICY_EPILOG = """\
examples:
  chunktune policy list                every policy, where it comes from, the active one
  chunktune policy show                the active policy as TOML
  chunktune policy show seed           the policy that behaves like the older tuner
"""


_AS_YOUR_OWN = (
    "# as a policy of your own: these keys under [policies.NAME] in a settings file, "
    "[candidates] as [policies.NAME.candidates]\n"
)


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> None:
    """Add ``policy`` and its verbs to ``commands``; every verb takes ``common``'s options."""
    policy = commands.add_parser(
        "policy",
        help="list the policies or show one as TOML",
        description="The measurement policies: shipped presets and your own.",
        epilog=_POLICY_EPILOG,
        formatter_class=help_formatter,
    )
    verbs = policy.add_subparsers(dest="verb", metavar="VERB", required=True)
    verbs.add_parser(
        "list", parents=[common], help="name, description and origin of every policy"
    ).set_defaults(handler=_cmd_policy_list)
    show = verbs.add_parser("show", parents=[common], help="a policy, fully resolved, as TOML")
    show.add_argument("name", nargs="?", metavar="NAME", help="default: the active policy")
    show.set_defaults(handler=_cmd_policy_show)


def _policy_origin(name: str, settings: Settings, user: frozenset[str], presets: set[str]) -> str:
    if name in user:
        source = shown_path(str(settings.source))
        return f"{source} (overrides the preset)" if name in presets else source
    return "preset"


def _cmd_policy_list(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    user = settings.user_policies
    presets = set(preset_names())
    from rich import box  # rich loads only for a table to draw
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    # the name is what `policy show` and --policy take: never cut, however narrow
    width = max(len(name) for name in settings.policies) + len(" *")
    table.add_column("policy", no_wrap=True, min_width=width)
    table.add_column("description")
    table.add_column("from")
    for name in sorted(settings.policies, key=lambda n: (n in user, n)):
        label = f"{name} *" if name == settings.policy else name
        table.add_row(
            label,
            # a user's description may hold a newline or an escape sequence
            shown_path(settings.policies[name].description or "-"),
            _policy_origin(name, settings, user, presets),
        )
    console = table_console(table)
    console.print(table)
    source = shown_path(settings.source) if settings.source else "built-in default"
    console.print(f"* the active policy ({source})")
    return EXIT_OK


def _cmd_policy_show(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    name, policy = named_policy(settings, args.name, "policy show NAME")
    origin = _policy_origin(name, settings, settings.user_policies, set(preset_names()))
    active = "; the active policy" if name == settings.policy else ""
    sys.stdout.write(f"# policy {spelled(name)}, fully resolved (from {origin}{active})\n")
    # printed as a file of policies/ is written; a settings file holds it one table down
    sys.stdout.write(_AS_YOUR_OWN)
    sys.stdout.write(escaped_toml(_pastable(policy)))
    return EXIT_OK


def _pastable(policy: Policy) -> str:
    """``policy`` as TOML whose keys, pasted back as that second line says, load without a
    warning: each key the loader would say has no effect there is commented out under why,
    after the plain keys and before any table, so that uncommented it lands where it was."""
    full = unstructure_policy(policy)
    live, idle = idle_when_pasted(policy, preset_tables())
    if not idle:
        return tomli_w.dumps(full)
    lines: list[str] = []
    for why in dict.fromkeys(idle.values()):  # each reason once, in the order first met
        keys = [k for k in full if idle.get(k) == why]
        lines.append(f"# left out, as it would have no effect: {why}")
        lines += [f"# {line}" for line in _dumped(full, keys).splitlines() if line]
    plain = [k for k, v in live.items() if not isinstance(v, dict)]
    tables = _dumped(live, [k for k in live if k not in plain])
    return _dumped(live, plain) + "\n".join(lines) + "\n" + ("\n" + tables if tables else "")


def _dumped(table: dict[str, Any], keys: list[str]) -> str:
    """``keys`` of ``table`` as TOML (the plain ones first, then each table under its
    header, as ``tomli_w`` writes any table)."""
    return tomli_w.dumps({k: table[k] for k in keys})
