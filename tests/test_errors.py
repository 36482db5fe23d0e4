"""The exceptions survive crossing processes (pickling), as Ray tasks' errors do."""

from __future__ import annotations

import pickle

import pytest

import chunktune


def test_config_error_pickles_with_its_problems() -> None:
    """A ConfigError read back from pickle has the same message, problems and source."""
    error = chunktune.ConfigError(["a: bad", "b: worse"], source="x.toml")
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, chunktune.ConfigError)
    assert (str(back), back.problems, back.source) == (str(error), error.problems, "x.toml")


def test_config_error_of_a_file_not_read_pickles_as_such() -> None:
    """A ConfigError of a file never read (missing) reads back naming the file, not its settings."""
    error = chunktune.ConfigError("it does not exist", source="x.toml", unread=True)
    back = pickle.loads(pickle.dumps(error))
    assert str(back) == str(error) == "settings file x.toml: it does not exist"


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        pytest.param(chunktune.ConfigError, ValueError, id="ConfigError"),
        pytest.param(chunktune.WorkloadError, TypeError, id="WorkloadError"),
        pytest.param(chunktune.InvalidArgumentError, ValueError, id="InvalidArgumentError"),
        pytest.param(chunktune.CacheError, OSError, id="CacheError"),
        pytest.param(chunktune.TraceError, ValueError, id="TraceError"),
        pytest.param(chunktune.OutputError, OSError, id="OutputError"),
        pytest.param(chunktune.UsageError, RuntimeError, id="UsageError"),
        pytest.param(chunktune.MissingExtraError, ImportError, id="MissingExtraError"),
    ],
)
def test_each_error_is_caught_as_chunktunes_and_as_its_builtin(
    error: type[chunktune.ChunktuneError], builtin: type[Exception]
) -> None:
    """Each error is caught as a ChunktuneError and as the built-in of its meaning, no other."""
    for catch in (chunktune.ChunktuneError, builtin):
        with pytest.raises(catch):
            raise error("x")
    others = {ValueError, TypeError, OSError, RuntimeError, ImportError} - {builtin}
    assert not any(issubclass(error, other) for other in others)


def test_config_error_counts_its_problems_and_lists_each() -> None:
    """Several problems read as a count, then one line each, under the file that holds them."""
    error = chunktune.ConfigError(["a: bad", "b: worse", "c: worst"], source="x.toml")
    assert str(error) == (
        "invalid settings in x.toml (3 problems):\n  - a: bad\n  - b: worse\n  - c: worst"
    )


def test_a_name_asked_for_among_several_problems_still_lists_them_all() -> None:
    """asked= with several problems lists them all; only a lone one stands bare."""
    lone = chunktune.ConfigError("unknown policy 'x'", asked=True)
    several = chunktune.ConfigError(["a: bad", "b: worse"], asked=True)
    assert str(lone) == "unknown policy 'x'"
    assert str(several) == "invalid settings (2 problems):\n  - a: bad\n  - b: worse"
    back = pickle.loads(pickle.dumps(lone))
    assert (str(back), back.asked) == ("unknown policy 'x'", True)


def test_a_policy_error_reads_the_same_after_crossing_processes() -> None:
    """A Policy built in code with a bad field says "invalid policy" pickled and back too."""
    with pytest.raises(chunktune.ConfigError) as caught:
        chunktune.Policy(margin=-1)
    back = pickle.loads(pickle.dumps(caught.value))
    assert str(back) == str(caught.value)
    assert str(back).startswith("invalid policy: -1.0 is not valid for margin")
