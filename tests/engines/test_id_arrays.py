"""Token id lists become int32 arrays equal to numpy's conversion, at every length around the
packing chunk, writable, for ids up to the largest int32."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamtok._src.engines.id_arrays import CHUNK, SHORT, int32_ids


@pytest.mark.parametrize("n", [0, 1, SHORT - 1, SHORT, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17])
def test_every_length_converts_exactly(n):
    rng = np.random.default_rng(n)
    ids = rng.integers(0, 2**31 - 1, n, endpoint=True).tolist()
    got = int32_ids(ids)
    assert got.dtype == np.int32 and got.flags.writeable and got.flags.c_contiguous
    np.testing.assert_array_equal(got, np.asarray(ids, dtype=np.int32))
    got[:1] = 7  # the tokenizer's callers may write into it


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 1), max_size=3 * CHUNK))
def test_any_list_converts_exactly(ids):
    np.testing.assert_array_equal(int32_ids(ids), np.asarray(ids, dtype=np.int32))
