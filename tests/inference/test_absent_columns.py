"""A column absent from a query DataFrame is marginalised by every learner and query, as
``log_prob`` documents (newcomer check: ``GeF.predict_proba`` and NRGBoost's ``log_prob`` /
``predict_proba`` of a frame holding some of the columns raised ``input is missing column``)."""

import numpy as np
import pandas as pd
import pytest

import forestgen as fg

LEARNERS = ["ARF", "GeF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost", "Chain"]


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "c": np.where(x + rng.normal(0, 0.5, n) > 0, "a", "b"),
                         "y": np.round(x + rng.normal(size=n), 2),
                         "k": rng.choice(["u", "v", "w"], n)})


def _fit(learner, df):
    if learner == "GeF":
        return fg.GeF(n_trees=20, random_state=0).fit(df, target="c")
    if learner == "NRGBoost":
        return fg.NRGBoost(n_trees=5, random_state=0).fit(df)
    return getattr(fg, learner)(random_state=0).fit(df)


@pytest.mark.parametrize("learner", LEARNERS)
def test_absent_columns_are_marginalised(table, learner):
    m = _fit(learner, table)
    head = table.head(6)
    gone = head.assign(y=np.nan, k=np.nan)
    np.testing.assert_allclose(m.log_prob(head[["x", "c"]]), m.log_prob(gone), atol=1e-12)
    np.testing.assert_allclose(np.asarray(m.predict_proba(head[["x"]], target="c"), float),
                               np.asarray(m.predict_proba(gone, target="c"), float), atol=1e-12)
    # the marginal sums the absent column out: p(x, y) = sum over c of p(x, c, y)
    rows = head[["x", "y"]]
    joint = [m.log_prob(rows.assign(c=v)) for v in ("a", "b")]
    np.testing.assert_allclose(m.log_prob(rows), np.logaddexp(*joint), rtol=1e-9, atol=1e-9)
    if learner != "NRGBoost":  # NRGBoost's conditionals are exact only for point evidence
        lc = m.log_prob(head[["x", "y"]], conditions={"c": "a"})
        assert np.isfinite(lc).all() or learner == "EOGT"
