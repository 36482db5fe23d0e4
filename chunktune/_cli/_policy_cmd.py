"""``chunktune policy list|show``: the measurement policies, presets and the user's own."""

from __future__ import annotations

import argparse
import sys

from .._config import load_settings, preset_names
from .._converter import dump_policy
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
    sys.stdout.write(escaped_toml(dump_policy(policy)))
    return EXIT_OK
