"""The exceptions survive crossing processes (pickling), as Ray tasks' errors do."""

from __future__ import annotations

import pickle

import chunktune


def test_config_error_pickles_with_its_problems() -> None:
    """A ConfigError read back from pickle has the same message, problems and source."""
    error = chunktune.ConfigError(["a: bad", "b: worse"], source="x.toml")
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, chunktune.ConfigError)
    assert (str(back), back.problems, back.source) == (str(error), error.problems, "x.toml")
