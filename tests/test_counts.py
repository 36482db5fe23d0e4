"""The counts a pool is given, checked, and the arithmetic of its chunking (``_counts``)."""

from __future__ import annotations

import numpy as np
import pytest

from chunktune import InvalidArgumentError
from chunktune._counts import MAX_COUNT, check_chunk_size, check_count, check_seed, native_chunk
from chunktune._shown import unprinted


@pytest.mark.parametrize(
    ("num_envs", "nthread", "native"),
    [
        pytest.param(1, 1, 1, id="one-env"),
        pytest.param(19, 2, 1, id="under-ten-a-worker"),
        pytest.param(39, 2, 1, id="just-under-two"),
        pytest.param(40, 2, 2, id="two"),
        pytest.param(256, 2, 12, id="design-doc"),
    ],
)
def test_native_chunk_is_n_over_ten_t_and_never_below_one(
    num_envs: int, nthread: int, native: int
) -> None:
    """native_chunk is N // (10*T), floored, and 1 where a worker gets fewer than ten envs."""
    assert native_chunk(num_envs, nthread) == native


def test_a_count_of_the_most_envs_is_kept_and_one_more_refused_naming_the_bound() -> None:
    """check_count keeps 2**31 - 1 (a C int's most) and refuses 2**31, naming the range."""
    assert check_count(2**31 - 1, what="num_envs") == MAX_COUNT == 2**31 - 1
    with pytest.raises(
        InvalidArgumentError,
        match=r"^num_envs must be an integer from 1 to 2147483647, got 2147483648$",
    ):
        check_count(2**31, what="num_envs")


def test_a_chunk_of_the_whole_batch_is_kept_and_one_env_more_refused() -> None:
    """check_chunk_size's bound is the batch: N itself is a chunk, N + 1 is refused as such."""
    assert check_chunk_size(8, num_envs=8) == 8
    with pytest.raises(
        InvalidArgumentError, match=r"^chunk_size must be an integer from 1 to 8, got 9$"
    ):
        check_chunk_size(9, num_envs=8)
    with pytest.raises(InvalidArgumentError, match=r"^chunk_size must be an integer >= 1, got 0$"):
        check_chunk_size(0)


def test_a_count_whose_type_has_a_hostile_name_is_told_on_one_line() -> None:
    """A count of a class named with a newline and an escape sequence: the type's name escaped."""
    hostile = type("Count\n\x1b[2J", (), {})()
    with pytest.raises(InvalidArgumentError) as caught:
        check_count(hostile, what="nthread")
    assert unprinted(str(caught.value)) is None
    assert "Count" in str(caught.value)


@pytest.mark.parametrize("seed", [True, False, -1, 1.0, "3"])
def test_a_seed_that_is_no_integer_or_below_zero_is_refused(seed: object) -> None:
    """check_seed refuses a bool (no seed, though an int), a negative int, a float, a str."""
    with pytest.raises(InvalidArgumentError, match=r"^seed must be an integer >= 0, got "):
        check_seed(seed)


@pytest.mark.parametrize("seed", [0, 7, np.int64(7), np.uint8(7)])
def test_a_seed_is_given_back_as_a_python_int(seed: object) -> None:
    """check_seed gives numpy's integers back as the plain int they hold."""
    kept = check_seed(seed)
    assert type(kept) is int and kept == int(seed)  # type: ignore[call-overload]
