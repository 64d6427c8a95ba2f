"""``forestgen.inference.density_columns``: the columns each row's (conditional) density is
over — the ones the density floor is relative to."""

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.inference import density_columns


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    n = 200
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "w": x + rng.normal(0, 0.5, n),
                       "y": np.where(x > 0, "p", "q")})
    return fg.ARF(n_trees=3, random_state=0).fit(df)


def test_observed_entries_less_the_evidence(model):
    """Also under the table's rules: ``y`` is a threshold of ``x`` (a detected mapping), so the
    condition ``{"y": "p"}`` is evidence ``x > 0`` to the engine, yet it is ``y`` the query
    conditions on, and ``x`` stays a column of the row's density."""
    from forestgen.inference.rules import rules_of

    assert rules_of(model).mappings[0].determined == 2
    X = pd.DataFrame({"x": [0.1, np.nan, 0.3], "w": [0.2, 0.1, np.nan],
                      "y": ["p", "q", None]})
    np.testing.assert_array_equal(density_columns(model, X),
                                  [[1, 1, 1], [0, 1, 1], [1, 0, 0]])
    # a column absent from the frame is marginalised; evidence columns drop out
    np.testing.assert_array_equal(density_columns(model, X[["x"]]), [[1, 0, 0], [0, 0, 0],
                                                                     [1, 0, 0]])
    np.testing.assert_array_equal(density_columns(model, X, {"y": "p"}),
                                  [[1, 1, 0], [0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(density_columns(model, X, {"w": (0.0, 1.0)}),
                                  [[1, 0, 1], [0, 0, 1], [1, 0, 0]])
    # per-row evidence: NaN cells are free
    per_row = pd.DataFrame({"y": ["p", None, None], "x": [np.nan, np.nan, 0.0]})
    np.testing.assert_array_equal(density_columns(model, X, per_row),
                                  [[1, 1, 0], [0, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match="per-row conditions have 2 rows but X has 3"):
        density_columns(model, X, per_row.iloc[:2])
