"""What the command line draws from stored entries: dates, ages and what was measured."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from chunktune import CacheEntry
from chunktune._cli._render import (
    candidate_rows,
    candidate_table,
    chunk_label,
    entry_age,
    entry_table,
    format_age,
    format_created,
    model_summary,
    signature_summary,
)


@pytest.mark.parametrize(
    "created",
    [
        pytest.param(1e300, id="far-future"),
        pytest.param(-1e300, id="far-past"),
        pytest.param(0.0, id="unknown"),
        pytest.param(float("inf"), id="inf"),
        pytest.param(float("nan"), id="nan"),
        pytest.param(2.0**63, id="beyond-time_t"),
    ],
)
def test_dates_no_clock_can_show_are_unknown(created: float) -> None:
    """A date the platform cannot represent renders as unknown and an age of '?', never raises."""
    assert format_created(created) == "unknown"
    entry = CacheEntry(chunk_size=None, native_chunk=1, reason="", created=created)
    assert entry_age(entry) == "?"


def test_a_real_date_shows_when_and_how_long_ago() -> None:
    """A normal date shows local time and the age; one ahead of the clock says so."""
    now = time.time()
    assert format_created(now - 7200, now).endswith("(2h ago)")
    assert format_created(now + 7200, now).endswith("(in the future)")


@pytest.mark.parametrize(
    ("signature", "model_file", "summary"),
    [
        pytest.param(
            {"kind": "mujoco.rollout", "model_sha": "0123456789abcdef", "states": "demo"},
            "/x/scene.xml",
            "mujoco.rollout scene.xml (demo)",
            id="mujoco-file",
        ),
        pytest.param(
            {"kind": "mujoco.rollout", "model_sha": "0123456789abcdef"},
            None,
            "mujoco.rollout 0123456789ab",
            id="mujoco-hash",
        ),
        pytest.param(
            {"kind": "mujoco.rollout", "model_label": "humanoid-dr", "n_variants": 8},
            None,
            "mujoco.rollout humanoid-dr",
            id="mujoco-label",
        ),
        pytest.param(
            {"kind": "mujoco.rollout", "model_label": "humanoid-dr", "n_variants": 8},
            "/x/humanoid.xml",
            "mujoco.rollout humanoid.xml (humanoid-dr)",
            id="mujoco-file-and-label",
        ),
        pytest.param(
            {"kind": "simulated", "costs_sha": "0123456789abcdef", "dispatch_s": 5e-7},
            None,
            "simulated costs_sha=0123456789a… dispatch_s=5e-07",
            id="kind-first",
        ),
        pytest.param(
            {"a": 1, "b": True, "c": 0.25, "d": "x"}, None, "a=1 b=True c=0.25 …", id="more"
        ),
        pytest.param({}, None, "?", id="empty"),
    ],
)
def test_model_summary_names_the_model_or_the_signature(
    signature: dict[str, object], model_file: str | None, summary: str
) -> None:
    """A known model shows its file, label or hash; any other workload its first signature items."""
    entry = CacheEntry(
        chunk_size=None, native_chunk=1, reason="", signature=signature, model_file=model_file
    )
    assert model_summary(entry) == summary
    if not {"model_sha", "model_label"} & signature.keys():
        assert signature_summary(signature) == summary


def _notes(
    timings: dict[int | None, float], chunk: int | None, raced: tuple[int, ...]
) -> dict[str, str]:
    """Each row's note, by its chunk label ("native" for native's row)."""
    rows = candidate_rows(timings, chunk_size=chunk, raced_out=raced)
    out = io.StringIO()
    Console(file=out, width=120, no_color=True).print(candidate_table(rows, native_chunk=12))
    row = re.compile(r"^\s*(native|\d+)(?: \(=12\))?\s+\S+\s+\S+\s+\S+\s*(.*?)\s*$")
    return {m[1]: m[2] for ln in out.getvalue().splitlines() if (m := row.match(ln))}


def test_every_row_of_a_race_has_a_note() -> None:
    """Sizes the race had not dropped when it ended are noted 'contender', none left blank."""
    timings = {None: 0.1, 3: 0.095, 4: 0.09, 6: 0.097, 64: 0.15}
    notes = _notes(timings, None, raced=(64,))
    assert notes == {
        "native": "native, <- chosen",
        "3": "contender",
        "4": "contender",
        "6": "contender",
        "64": "raced out",
    }
    assert _notes(timings, 4, raced=(64,))["4"] == "<- chosen"


def test_a_schedule_that_races_nothing_notes_no_contenders() -> None:
    """Without a size raced out (the seed schedule), the others carry no note."""
    notes = _notes({None: 0.1, 4: 0.09, 8: 0.11}, 4, raced=())
    assert notes == {"native": "native", "4": "<- chosen", "8": ""}


def test_a_row_s_ratio_is_its_time_over_native_s() -> None:
    """'vs native' is the candidate's time divided by native's: below 1 means faster."""
    rows = candidate_rows({None: 0.060, 4: 0.045, 8: 0.090}, chunk_size=4)
    assert [(r.chunk, r.ratio) for r in rows] == [(None, 1.0), (4, 0.75), (8, 1.5)]


def test_the_size_native_would_pick_is_noted_as_native() -> None:
    """A candidate equal to the native chunk is noted '= native', so one size is not seen as two."""
    notes = _notes({None: 0.1, 4: 0.09, 12: 0.1}, 4, raced=())
    assert notes == {"native": "native", "4": "<- chosen", "12": "= native"}


def test_the_table_shows_each_size_s_sample_count() -> None:
    """The samples column shows how many calls each size's estimate rests on."""
    rows = candidate_rows({None: 0.1, 4: 0.09}, chunk_size=4, samples={None: 7, 4: 5})
    out = io.StringIO()
    Console(file=out, width=120, no_color=True).print(candidate_table(rows, native_chunk=12))
    lines = out.getvalue().splitlines()
    assert next(ln for ln in lines if ln.lstrip().startswith("native")).split()[4] == "7"
    assert next(ln for ln in lines if ln.split()[:1] == ["4"]).split()[3] == "5"


def test_a_native_chunk_of_zero_is_unknown_and_not_shown() -> None:
    """native_chunk 0 means unknown (a migrated entry): the label is 'native', with no '(=0)'."""
    assert chunk_label(None, 0) == "native"
    assert chunk_label(None, 12) == "native (=12)"


def test_estimates_show_the_fastest_to_three_significant_digits() -> None:
    """Fastest 10 ms: every estimate shows one decimal (10.0, 12.3), not two."""
    rows = candidate_rows({None: 0.0100, 4: 0.0123}, chunk_size=None)
    out = io.StringIO()
    Console(file=out, width=200).print(candidate_table(rows, native_chunk=12))
    assert "10.0 " in out.getvalue() and "12.3 " in out.getvalue()
    assert "10.00" not in out.getvalue()


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(59.9, "59s"), (60.0, "1m"), (3600.0, "1h"), (86400.0, "1d")],
)
def test_an_age_of_exactly_a_unit_is_shown_in_that_unit(seconds: float, shown: str) -> None:
    """An age of exactly a minute, hour or day is 1m, 1h or 1d, not 60s, 60m or 24h."""
    assert format_age(seconds) == shown


def test_a_signature_value_of_exactly_twelve_characters_is_shown_whole() -> None:
    """A value of 12 characters fits the summary as it is; only longer ones are cut."""
    assert signature_summary({"kind": "k", "a": "x" * 12}) == f"k a={'x' * 12}"
    assert signature_summary({"kind": "k", "a": "x" * 13}) == f"k a={'x' * 11}…"


def test_a_signature_of_exactly_three_items_past_its_kind_is_shown_whole() -> None:
    """A summary cuts ('…') only a signature with more than three items besides its kind."""
    assert signature_summary({"kind": "k", "a": 1, "b": 2, "c": 3}) == "k a=1 b=2 c=3"


def _drawn(table: object) -> list[str]:
    """A table as a console 200 columns wide and colourless prints it, line by line."""
    out = io.StringIO()
    Console(file=out, width=200, no_color=True).print(table)
    return out.getvalue().splitlines()


def test_estimates_of_microseconds_show_four_decimals() -> None:
    """Fastest 12.3 us: estimates show four decimals (0.0123 ms), the most a table gives."""
    rows = candidate_rows({None: 12.3e-6, 4: 1.23e-6}, chunk_size=4)
    lines = _drawn(candidate_table(rows, native_chunk=12))
    assert next(ln for ln in lines if ln.lstrip().startswith("native")).split()[2] == "0.0123"
    assert next(ln for ln in lines if ln.split()[:1] == ["4"]).split()[1] == "0.0012"


def test_native_is_no_contender_when_a_race_chose_another_size() -> None:
    """A race that chose 4 leaves native's row noted 'native' alone, never 'contender'."""
    timings = {None: 0.1, 3: 0.095, 4: 0.09, 64: 0.15}
    assert _notes(timings, 4, raced=(64,)) == {
        "native": "native",
        "3": "contender",
        "4": "<- chosen",
        "64": "raced out",
    }


def test_a_stored_entry_s_table_shows_its_sample_counts() -> None:
    """`cache show`'s table gives each size the samples its stored estimate rests on."""
    entry = CacheEntry(
        chunk_size=4,
        native_chunk=12,
        reason="",
        timings={None: 0.1, 4: 0.09},
        samples={None: 7, 4: 5},
    )
    lines = _drawn(entry_table(entry))
    assert next(ln for ln in lines if ln.lstrip().startswith("native")).split()[4] == "7"
    assert next(ln for ln in lines if ln.split()[:1] == ["4"]).split()[3] == "5"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.0, "0s"), (119.9, "1m"), (5399.0, "1h"), (86400.0 * 1.9, "1d")],
)
def test_an_age_is_counted_in_whole_units_down(seconds: float, shown: str) -> None:
    """An age is the whole units passed, rounded down (119 s is 1m); no time at all is 0s."""
    assert format_age(seconds) == shown


def test_an_entry_made_this_second_is_zero_seconds_old() -> None:
    """An entry created at the clock's now is '0s' old, not an unknown age ('?')."""
    now = time.time()
    assert format_created(now, now).endswith("(0s ago)")
    entry = CacheEntry(chunk_size=None, native_chunk=1, reason="", created=now)
    assert entry_age(entry, now) == "0s"


def test_a_float_in_a_signature_summary_is_written_short() -> None:
    """A float is shown as %g writes it (0.3, 100000), not as its repr (0.30000000000000004)."""
    assert signature_summary({"kind": "k", "a": 0.1 + 0.2, "b": 1e5}) == "k a=0.3 b=100000"


def test_a_summary_value_cut_short_never_ends_inside_an_escape() -> None:
    """A long value holding ESC is cut before its escape, not through it (no bare backslash-u)."""
    summary = signature_summary({"kind": "k", "a": "abcdefgh\x1bzzzz"})
    assert summary == 'k a="abcdefgh…'
    assert signature_summary({"kind": "k", "a": "abc\x1bzzzzzzzzzz"}) == 'k a="abc\\u001Bz…'
