"""Column labels: every label a model accepts survives save/load and can be queried by name;
the others (tuples, MultiIndex, NaN) are refused at fit with a message saying what to do (old
main: they fit, then could not be saved or found after load)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF
from forestgen.base import GenerativeForest


def _frame(columns) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=80), "b": rng.choice(["u", "v"], 80)})
    df.columns = columns
    return df


@pytest.mark.parametrize("columns,message", [
    (pd.MultiIndex.from_tuples([("g", "a"), ("g", "b")]), "MultiIndex.*flatten"),
    ([("g", "a"), ("g", "b")], r"label \('g', 'a'\) \(tuple\)"),
    ([np.nan, "b"], "label nan"),
])
def test_unsupported_labels_are_refused_at_fit(columns, message):
    with pytest.raises(ValueError, match=message):
        ARF(n_trees=2, random_state=0).fit(_frame(columns))


@pytest.mark.parametrize("columns", [["a", "b"], [0, 1], [1.5, "b"], [True, "b"],
                                     [np.int64(3), "x y"]])
def test_supported_labels_round_trip(tmp_path, columns):
    df = _frame(columns)
    m = ARF(n_trees=2, random_state=0).fit(df)
    back = GenerativeForest.load(m.save(tmp_path / "m.forestgen"))
    assert back.schema_.names == m.schema_.names
    s = back.sample(20, random_state=0)
    assert list(s.columns) == list(df.columns)
    first = df.columns[1]
    p = back.predict_proba(df.head(3), target=first)
    np.testing.assert_allclose(p.to_numpy().sum(1), 1.0)
    np.testing.assert_array_equal(back.log_prob(df), m.log_prob(df))
