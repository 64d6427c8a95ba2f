"""The identifier warning (``warn_identifiers``) counts a categorical column from its codes and
any other nominal column from its values: the same rows, the same count of levels seen once,
the same message, with missing values left out either way."""

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
