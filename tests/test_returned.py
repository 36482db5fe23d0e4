"""What a workload's methods return, checked (``_returned``): the cases no other file pins."""

from __future__ import annotations

import types

import pytest

from chunktune import WorkloadError
from chunktune._returned import as_seconds, check_signature


class _ShapedNoItem:
    """An array-like of shape ``()`` whose ``item`` is no method: not a numpy scalar."""

    shape = ()
    item = 0.5

    def __repr__(self) -> str:
        return "ShapedNoItem()"


def test_a_value_of_shape_nothing_without_an_item_method_is_refused_not_called() -> None:
    """A 0-d look-alike whose item is not callable: refused as a value, never called."""
    with pytest.raises(WorkloadError, match=r"^signature\(\)\['k'\] is ShapedNoItem\(\)"):
        check_signature({"k": _ShapedNoItem()})
    assert as_seconds(_ShapedNoItem()) is None


def test_a_signature_of_any_mapping_is_read_as_a_plain_dict() -> None:
    """signature() may return any Mapping (a read-only proxy): it is read as a plain dict."""
    plain = check_signature(types.MappingProxyType({"model": "a", "nstep": 3}))
    assert type(plain) is dict and plain == {"model": "a", "nstep": 3}
