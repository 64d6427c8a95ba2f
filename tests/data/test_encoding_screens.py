"""Encoding screens that skip work without changing an answer: the identifier warning
(``warn_identifiers``) counted from a categorical column's codes as from its values, the binary
column test and the affine rules' distinct-value screen without a sort of every value."""

import warnings

import numpy as np
import pandas as pd
import pytest

from forestgen.data.column_kinds import warn_identifiers
from forestgen.data.encoder import TableEncoder


def _caught(df):
    specs = TableEncoder().fit(df).schema.columns
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        warn_identifiers(df, specs)
    return [str(w.message) for w in rec if "looks like an identifier" in str(w.message)]


@pytest.mark.parametrize("as_category", [False, True])
def test_identifier_counted_alike_from_codes_and_values(as_category):
    rng = np.random.default_rng(0)
    n = 60
    ids = np.array([f"id{i}" for i in range(n)], dtype=object)
    ids[:20] = "shared"  # 40 of 59 observed rows hold a level no other row has
    ids[rng.choice(np.arange(20, n), 1, replace=False)] = None  # one missing: not counted
    common = np.array(list("ab"), dtype=object)[rng.integers(0, 2, n)]
    df = pd.DataFrame({"name": ids, "g": common, "x": rng.normal(size=n)})
    if as_category:
        df["name"] = df["name"].astype("category")
        df["g"] = df["g"].astype("category")
    msgs = _caught(df)
    assert len(msgs) == 1 and "'name'" in msgs[0]
    assert "39 of its 59 rows" in msgs[0]
    # below half of the rows seen once: no warning (nor for too few rows)
    df2 = df.copy()
    df2.loc[20:35, "name"] = df2.loc[20, "name"]
    assert _caught(df2) == []
    assert _caught(df.head(20)) == []


def test_binary_inference_and_distinct_screen_without_a_full_sort():
    """``infer_kind`` calls a numeric column binary exactly when its observed values are all
    0 or 1 (one pass, no sort); ``find_affine``'s screen of at least ``k`` distinct values
    agrees with ``np.unique`` whether its first values settle it or not."""
    from forestgen.data.column_kinds import infer_kind
    from forestgen.data.rules import _distinct_at_least

    for vals, kind in (([0, 1, 1, np.nan], "binary"), ([1.0, 1.0], "binary"),
                       ([-0.0, 1.0], "binary"), ([0, 1, 2], "continuous"),
                       ([0.5, 1.0], "continuous"), ([np.nan, np.nan], "continuous"),
                       ([0, 1, np.inf], "continuous")):
        assert infer_kind(pd.Series(np.asarray(vals, float))) == kind, vals
    rng = np.random.default_rng(1)
    for v in (rng.normal(size=500), np.r_[np.zeros(100), 1.0, 2.0], np.r_[np.ones(50), 3.0],
              np.zeros(3), rng.integers(0, 3, 200).astype(float)):
        for k in (1, 2, 3, 4):
            assert _distinct_at_least(v, k) == (np.unique(v).size >= k)
