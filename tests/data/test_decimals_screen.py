"""``_decimals`` settles a full-precision column from its first values: the same answer as
the pass over every value (``_fewest_decimals``) on every kind of column."""

import numpy as np
import pandas as pd
import pytest

from forestgen.data.column_kinds import DECIMALS_SCREEN, _decimals, _fewest_decimals


def _columns():
    r = np.random.default_rng(0)
    n = 4 * DECIMALS_SCREEN
    full = r.normal(size=n)
    yield full, None
    yield full.round(3), 3
    yield np.rint(full * 100), 0
    late = full.round(2)
    late[DECIMALS_SCREEN + 7] = full[0]  # one full-precision value after the screened ones
    yield late, None
    late5 = full.round(2)
    late5[-1] = 0.12345  # the most decimals after the screened ones
    yield late5, 5
    early = full.round(1)
    early[3] = np.pi
    yield early, None
    yield np.full(n, 2.5), 1
    yield full[:DECIMALS_SCREEN].round(4), 4  # (no screen at or below its size)
    yield np.r_[full.round(8)[:10], full[:1]], None


@pytest.mark.parametrize("k", range(9))
def test_screened_decimals_equal_the_full_pass(k):
    values, want = list(_columns())[k]
    assert _fewest_decimals(values) == want
    assert _decimals(values) == want


@pytest.mark.parametrize("series, levels", [
    (pd.Series(["b", "a", None, "b"]), ["a", "b"]),
    (pd.Series(["b", "a", None, "b"], dtype="string"), ["a", "b"]),
    (pd.Series(pd.Categorical(["y", "x", None], categories=["x", "y", "z"])), ["x", "y"]),
    (pd.Series([True, False, True]), [False, True]),
    (pd.Series(pd.array([3, None, 1, 3], dtype="Int64")), [1, 3]),
    (pd.Series([2.5, np.nan, 1.5, 2.5]), [1.5, 2.5]),
])
def test_observed_levels_are_the_distinct_values_as_python_objects(series, levels):
    """Levels come from the distinct values (not from every row as Python objects): the same
    sorted Python scalars for each dtype, missing entries left out."""
    from forestgen.data.column_kinds import _observed_levels

    got = _observed_levels(series)
    assert got == levels
    assert all(type(g) is type(v) for g, v in zip(got, levels))
