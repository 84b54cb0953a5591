"""`arrays.codes` (dense track codes by hash tables) against np.unique, the reference."""

from __future__ import annotations

import numpy as np
import pytest

from moetrace.trace.formats.pftrace.arrays import codes


@pytest.mark.parametrize("distinct", [1, 3, 600, 50_000])
def test_codes_equal_np_unique_inverse(distinct: int) -> None:
    rng = np.random.default_rng(distinct)
    table = rng.integers(0, 2**64 - 1, distinct, dtype=np.uint64, endpoint=True)
    values = table[rng.integers(0, distinct, 100_000)]
    values[-1] = np.uint64(2**64 - 1)  # the largest uuid too
    found, code = codes(values)
    want, inverse = np.unique(values, return_inverse=True)
    assert found.dtype == np.uint64
    assert found.tolist() == want.tolist()
    assert code.tolist() == inverse.ravel().tolist()
    assert (found[code] == values).all()


def test_codes_of_nothing() -> None:
    found, code = codes(np.zeros(0, dtype=np.uint64))
    assert len(found) == 0 and len(code) == 0
