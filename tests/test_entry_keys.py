"""Keys typed on the command line: which cache entries they name, and what an ambiguous one says."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cache_cli import entry

from chunktune import DecisionCache, InvalidArgumentError
from chunktune._cli._entry_keys import find_entry, named_keys

# ten jobs whose keys all start with "0", each under its own 12 first characters
TEN = [f"0{i}{'x' * 20}.balanced" for i in range(10)]


def test_an_ambiguous_prefix_lists_eight_keys_and_counts_the_rest(tmp_path: Path) -> None:
    """`cache show` of a prefix that ten keys share names the first eight and says 2 more."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({key: entry() for key in TEN})
    with pytest.raises(InvalidArgumentError) as caught:
        find_entry(cache, "0")
    message = str(caught.value)
    assert "matches 10 entries" in message and "and 2 more" in message
    assert [key[:12] in message for key in TEN] == [True] * 8 + [False] * 2


def test_an_ambiguous_name_lists_its_keys_sorted_however_they_came(tmp_path: Path) -> None:
    """`cache clear` of a name that several keys share lists them in key order, not as given."""
    with pytest.raises(InvalidArgumentError) as caught:
        named_keys(reversed(TEN[:3]), ["0.balanced"])  # the start of each part
    message = str(caught.value)
    shown = [message.index(key[:12]) for key in TEN[:3]]
    assert shown == sorted(shown) and "matches 3 entries" in message


@pytest.mark.parametrize("prefix", ["", "  "], ids=["empty", "blank"])
def test_an_empty_prefix_names_no_entry_even_of_a_cache_of_one(tmp_path: Path, prefix: str) -> None:
    """`cache show ""` is refused as empty, though every key starts with it and there is one."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({TEN[0]: entry()})
    with pytest.raises(InvalidArgumentError, match="is empty; expected the start of an entry"):
        find_entry(cache, prefix)


def test_a_prefix_that_names_no_entry_is_refused_by_name(tmp_path: Path) -> None:
    """`cache show` of a prefix no key starts with: refused, naming it, never an IndexError."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({TEN[0]: entry()})
    with pytest.raises(InvalidArgumentError, match=r"no cache entry's key starts with \"9\""):
        find_entry(cache, "9")


@pytest.mark.parametrize("count", [2, 8])
def test_a_prefix_of_a_few_keys_lists_them_all_and_counts_none_more(
    tmp_path: Path, count: int
) -> None:
    """`cache show` of a prefix that 2 or 8 keys share: refused, listing each, no "more"."""
    cache = DecisionCache(tmp_path / "cache.json")
    assert cache.update({key: entry() for key in TEN[:count]})
    with pytest.raises(InvalidArgumentError) as caught:
        find_entry(cache, "0")
    message = str(caught.value)
    assert f"matches {count} entries" in message and " more)" not in message
    assert all(key[:12] in message for key in TEN[:count])
