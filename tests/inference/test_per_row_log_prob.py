"""``log_prob(X, conditions=<DataFrame>)``: each row given its own evidence, in every learner;
a row of zero probability (a level unseen at fit, a value past the range) is NaN with one
warning and does not fail the others (evidence.md: ``"nan"`` is a per-row frame's default)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.inference import ZeroProbabilityError

LEARNERS = ["ARF", "Chain", "Anchored", "GFBoost", "EOGT", "NRGBoost"]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(2)
    n = 400
    kind = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n) + (kind == "b") * 2.0
    return pd.DataFrame({"kind": kind, "x": x, "y": x + rng.normal(size=n),
                         "z": rng.gamma(2.0, 1.0, n)})


@pytest.fixture(scope="module")
def models(table):
    out = {}
    for name in LEARNERS:
        kw = {"n_trees": 10} if name in ("GFBoost", "EOGT", "NRGBoost", "ARF") else {}
        out[name] = getattr(fg, name)(random_state=0, **kw).fit(table)
    return out


@pytest.mark.parametrize("learner", LEARNERS)
def test_per_row_evidence_scores_each_row_and_nan_for_an_impossible_one(learner, models,
                                                                       table):
    model = models[learner]
    X = table.head(4)[["y", "z"]].reset_index(drop=True)
    ev = pd.DataFrame({"kind": ["a", "unicorn", None, "b"], "x": [0.5, None, 1.0, None]})
    with pytest.warns(RuntimeWarning, match="1 row\\(s\\) have zero-probability evidence"):
        got = model.log_prob(X, conditions=ev)
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2, 3]]).all()
    for i in (0, 2, 3):  # the same as the row alone with its evidence as a dict
        cond = {c: v for c, v in ev.iloc[i].items() if v is not None and not pd.isna(v)}
        alone = model.log_prob(X.iloc[[i]], conditions=cond)
        np.testing.assert_allclose(got[i], alone[0], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("learner", ["ARF", "Chain", "EOGT"])
def test_a_value_past_the_range_is_one_nan_row_and_a_dict_names_its_column(learner, models,
                                                                          table):
    model = models[learner]
    X = table.head(3)[["y", "z"]].reset_index(drop=True)
    ev = pd.DataFrame({"x": [0.0, 500.0, 1.0]})
    with pytest.warns(RuntimeWarning, match="\\['x'\\]"):
        got = model.log_prob(X, conditions=ev)
    assert np.isnan(got[1]) and np.isfinite(got[[0, 2]]).all()
    with pytest.raises(ZeroProbabilityError, match="\\['x'\\]"):
        model.log_prob(X, conditions={"x": (400.0, 500.0)})
    with pytest.raises(ZeroProbabilityError, match="\\['x'\\]"):
        model.sample(3, conditions={"x": (400.0, 500.0)})
