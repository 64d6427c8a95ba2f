"""``log_prob(X, conditions=...)`` reports only the columns it marginalises: a column the
conditions give is conditioned on, not absent (the warning named it as integrated out)."""

import warnings

import numpy as np
import pandas as pd

import forestgen as fg
from forestgen.validation import InputWarning


def _fit():
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                       "c": rng.choice(list("xyz"), n)})
    return df, fg.ARF(n_trees=10, random_state=0).fit(df)


def _messages(call):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = call()
    return out, [str(x.message) for x in w if issubclass(x.category, InputWarning)]


def test_condition_columns_are_not_reported_absent():
    df, m = _fit()
    lp, msgs = _messages(lambda: m.log_prob(df[["a"]].head(5), conditions={"c": "x"}))
    assert len(msgs) == 1 and "'b' is absent" in msgs[0] and "'c'" not in msgs[0]
    # the answer is the conditional of a given c, b marginalised: as with c in the rows
    lp2, _ = _messages(lambda: m.log_prob(df[["a", "c"]].head(5), conditions={"c": "x"}))
    np.testing.assert_allclose(lp, lp2)
    # every column present or given: no warning at all
    _, msgs = _messages(lambda: m.log_prob(df[["a", "b"]].head(5), conditions={"c": "x"}))
    assert msgs == []
    # an unseen level in the rows is still reported
    q = df[["a", "b", "c"]].head(5).assign(c="w")
    _, msgs = _messages(lambda: m.log_prob(q, conditions={"a": 0.0}))
    assert len(msgs) == 1 and "'w' was not seen" in msgs[0]
