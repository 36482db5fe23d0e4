"""The settings model: frozen attrs records validated at construction.

An invalid ``Settings`` cannot exist: every field has a validator. It holds every
known policy (a ``Policy``, from ``_policy``), the active one's name, and the cache,
log and Ray sections. Loading from TOML lives in ``_config``; nothing here touches
files or imports the sweep.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import attrs

from ._errors import ConfigError, InvalidArgumentError
from ._policy import MAX_LIMIT_S, Policy
from ._shown import shown_one, shown_some, spelled, type_named, unprinted
from ._validators import boolean, choice, number, path_text, plain_numbers, record

__all__ = [
    "DEFAULT_POLICY",
    "CacheSettings",
    "FormatSetting",
    "LogSettings",
    "RaySettings",
    "Settings",
    "StderrMode",
    "WhileSweeping",
    "policy_name_problem",
    "unknown_policy",
]

FormatSetting = Literal["auto", "json", "toml"]
"""How the cache file is stored: by its name's suffix, or as said."""
StderrMode = Literal["auto", "always", "never"]
"""When the one-line decision goes to stderr."""
WhileSweeping = Literal["wait", "native"]
"""What a Ray worker does while another worker measures its node type."""

CACHE_FORMATS: tuple[FormatSetting, ...] = get_args(FormatSetting)
STDERR_MODES: tuple[StderrMode, ...] = get_args(StderrMode)
WHILE_SWEEPING: tuple[WhileSweeping, ...] = get_args(WhileSweeping)
DEFAULT_POLICY = "balanced"


def _path_str(value: str | os.PathLike[str] | None) -> object:
    """An ``os.PathLike`` (a ``pathlib.Path``) as the text of its path; anything else as is
    (for the validator to judge). Its parameter's type is what ``CacheSettings(path=...)``
    takes, to a type checker and in help()."""
    if isinstance(value, os.PathLike):
        text = os.fspath(value)
        if isinstance(text, str):
            return text
    return value


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class CacheSettings:
    """Where decisions are stored. ``path=None`` means the platform's user cache dir.

    ``format = "auto"`` goes by the path's name: ``.toml`` (any case) is TOML, any other
    name JSON (``cache.db`` too, as every release has read and written it).

    ``system_path`` names a read-only cache (an image's shipped answers), consulted
    after ``path`` on lookup and never written.
    """

    path: str | None = attrs.field(
        default=None, converter=_path_str, validator=path_text(optional=True)
    )
    format: FormatSetting = attrs.field(default="auto", validator=choice(CACHE_FORMATS))
    enabled: bool = attrs.field(default=True, validator=boolean())
    system_path: str | None = attrs.field(
        default=None, converter=_path_str, validator=path_text(optional=True)
    )


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class LogSettings:
    """How a decision is reported.

    ``stderr = "auto"`` writes the one-line decision to stderr only while the
    ``chunktune`` logger would not show INFO (collector subprocesses, where nothing
    configured logging), as the older tuner did: a cached decision once per key per
    process, a sweep's every time. Otherwise, and under ``"never"``, the line is logged
    at INFO as sparingly, a cached decision's later hits at DEBUG.
    """

    stderr: StderrMode = attrs.field(default="auto", validator=choice(STDERR_MODES))


@attrs.frozen(kw_only=True, field_transformer=plain_numbers)
class RaySettings:
    """How ``chunktune.ray`` behaves on a Ray cluster. Times in seconds.

    ``init_local``: outside ``ray.init()``, call ``ray.init()`` instead of raising (it
    joins the cluster ``RAY_ADDRESS`` names where that is set, else starts a local Ray),
    waiting for it at most ``chunktune._ray_api.START_TIMEOUT_S`` seconds.
    ``while_sweeping``: a worker whose node type is being measured by another worker
    ``"wait"`` s for that answer, or uses the ``"native"`` chunk now and picks the
    answer up on a later resolve. ``wait_timeout_s`` bounds that wait (then native,
    nothing cached); ``lease_s`` is how long a sweeping worker's claim outlives its
    last heartbeat before another worker of its type takes over.
    """

    init_local: bool = attrs.field(default=False, validator=boolean())
    while_sweeping: WhileSweeping = attrs.field(default="wait", validator=choice(WHILE_SWEEPING))
    wait_timeout_s: float = attrs.field(
        default=600.0, validator=number(0.0, MAX_LIMIT_S, lo_open=True)
    )
    lease_s: float = attrs.field(default=30.0, validator=number(0.1, 3600.0))


_KNOWN_SHOWN = 20  # policy names an unknown policy's message lists before counting the rest


def unknown_policy(name: object, known: Iterable[str]) -> str:
    """``unknown policy 'balancd'; did you mean balanced? known policies: ...``."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1) if isinstance(name, str) else []
    hint = f"did you mean {close[0]}? " if close else ""
    # a generated settings file may define thousands: the message stays a line, and
    # `chunktune policy list` shows them all
    listed = shown_some(names, _KNOWN_SHOWN, show=str)
    known_ones = f"known policies: {listed}" if names else "no policies are defined"
    return f"unknown policy {spelled(name)}; {hint}{known_ones}"


def policy_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a policy, or None: a control character (a newline, an
    escape, a bidi override) would print raw in ``tune``'s header and every table, and a
    blank name would print as nothing there (``cache list`` shows an entry whose policy
    is empty as one that records none, an older tuner's) and ``--policy`` could not
    name it."""
    if not name.strip():
        return (
            f"{spelled(name)} is not valid as a policy name: it is blank; "
            "expected a name that prints"
        )
    char = unprinted(name)
    if char is None:
        return None
    return (
        f"{spelled(name)} is not valid as a policy name: it holds a control character "
        f"({char}); expected a name that prints as written"
    )


def _known_policy(inst: Settings, _attr: attrs.Attribute[Any], value: str) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{shown_one(value)} is not valid for policy; expected a policy name")
    if value not in inst.policies:
        raise ConfigError(unknown_policy(value, inst.policies))


def _policy_map(value: Mapping[str, Policy]) -> dict[str, Policy]:
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{shown_one(value)} is not valid for policies; expected a mapping of names to Policy"
        )
    return dict(value)


# hash=False: policies is a dict, so a hash would raise; __hash__ is None, as
# type checkers then say (equality stays by value)
@attrs.frozen(kw_only=True, hash=False, field_transformer=plain_numbers)
class Settings:
    """The effective settings: the active policy's name, every known policy, cache, log, ray."""

    policies: dict[str, Policy] = attrs.field(converter=_policy_map)
    policy: str = attrs.field(default=DEFAULT_POLICY, validator=_known_policy)
    cache: CacheSettings = attrs.field(factory=CacheSettings, validator=record(CacheSettings))
    log: LogSettings = attrs.field(factory=LogSettings, validator=record(LogSettings))
    ray: RaySettings = attrs.field(factory=RaySettings, validator=record(RaySettings))
    source: str | None = attrs.field(default=None, eq=False)
    user_policies: frozenset[str] = attrs.field(default=frozenset(), eq=False)

    @policies.validator
    def _check_policies(self, _attr: attrs.Attribute[Any], value: dict[str, Policy]) -> None:
        for name, pol in value.items():
            if not isinstance(name, str):
                raise ConfigError(
                    f"{shown_one(name)} is not valid as a name in policies; expected a str"
                )
            problem = policy_name_problem(name)
            if problem is not None:
                raise ConfigError(problem)
            if not isinstance(pol, Policy):
                raise ConfigError(
                    f"{shown_one(pol)} is not valid for policies[{shown_one(name)}]; "
                    "expected a Policy"
                )

    def get_policy(self, name: str | None = None) -> Policy:
        """The named policy, or the active one.

        Raises:
            ConfigError: no policy has that name (the message lists the known ones).
            InvalidArgumentError: ``name`` is neither a str nor None (a Policy, a number).
        """
        if name is not None and not isinstance(name, str):
            # the caller's mistake, not a misspelled name: "unknown policy 3" misled
            raise InvalidArgumentError(
                f"get_policy takes a policy's name (a str), or None for the active policy, "
                f"got {shown_one(name)} ({type_named(name)})"
            )
        key = self.policy if name is None else name
        try:
            return self.policies[key]
        except KeyError:
            # a name asked for (resolve(policy=...), --policy) is no fault of the file's
            if name is not None:
                raise ConfigError(unknown_policy(key, self.policies), asked=True) from None
            raise ConfigError(unknown_policy(key, self.policies), source=self.source) from None

    @property
    def active(self) -> Policy:
        """The active policy."""
        return self.get_policy()
