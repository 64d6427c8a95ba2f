"""Query inputs in the forms a user writes them: text dates in the rows ``log_prob`` scores
(as conditions already took them), a bool refused as a numeric column's evidence, an unknown
target named as a target."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg


@pytest.fixture(scope="module")
def dated():
    rng = np.random.default_rng(0)
    n = 300
    day = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 400, n), unit="D")
    return pd.DataFrame({"day": day, "wind": rng.gamma(2.0, 2.0, n),
                         "kind": rng.choice(["sun", "rain"], n)})


@pytest.mark.parametrize("learner", ["ARF", "Chain", "NRGBoost"])
def test_text_dates_in_scored_rows_read_as_times(learner, dated):
    kw = {"n_trees": 5} if learner in ("ARF", "NRGBoost") else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(dated)
    rows = dated.head(5)
    text = rows.assign(day=rows["day"].dt.strftime("%Y-%m-%d"))
    np.testing.assert_array_equal(model.log_prob(text), model.log_prob(rows))
    with pytest.raises(ValueError, match="'day' holds times; 'soon' is not a time"):
        model.log_prob(text.assign(day=["soon"] + list(text["day"][1:])))


def test_a_bool_is_no_value_of_a_numeric_column(dated):
    model = fg.ARF(n_trees=5, random_state=0).fit(dated)
    with pytest.raises(ValueError, match="'wind' is numeric.*True is not a number"):
        model.sample(2, conditions={"wind": True})


@pytest.mark.parametrize("learner", ["ARF", "Chain", "NRGBoost"])
def test_an_unknown_target_is_named_as_a_target(learner, dated):
    kw = {"n_trees": 5} if learner in ("ARF", "NRGBoost") else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(dated)
    for query in ("predict", "predict_proba"):
        with pytest.raises(KeyError, match="unknown target column 'nope'"):
            getattr(model, query)(dated.head(3), target="nope")


def test_eogt_does_not_call_a_left_out_target_marginalised(dated):
    model = fg.EOGT(n_trees=5, random_state=0).fit(dated)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = model.predict_proba(dated.head(5).drop(columns=["kind"]), target="kind")
    assert np.allclose(p.sum(axis=1), 1.0)
    with pytest.raises(KeyError, match="unknown target column 'nope'"):
        model.predict(dated.head(3), target="nope")
