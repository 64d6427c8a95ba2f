"""Property-based: random mixed schemas through fit -> sample -> log_prob for every learner."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forestgen import ARF, DEF, RFDE, GeF

KINDS = ["float", "int_few", "int_many", "str", "bool", "category"]


@st.composite
def frames(draw):
    n = draw(st.integers(12, 60))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    cols = {}
    for i, kind in enumerate(kinds):
        name = f"{kind}_{i}"
        if kind == "float":
            v = pd.Series(rng.normal(size=n) * draw(st.sampled_from([1e-3, 1.0, 1e6])))
        elif kind == "int_few":
            v = pd.Series(rng.integers(0, 4, n))
        elif kind == "int_many":
            v = pd.Series(rng.integers(-500, 500, n))
        elif kind == "str":
            v = pd.Series(rng.choice(["x", "y", "z w", ""], n)).astype(object)
        elif kind == "bool":
            v = pd.Series(rng.random(n) < 0.3)
        else:
            v = pd.Series(pd.Categorical(rng.choice(["lo", "mid", "hi"], n)))
        if draw(st.booleans()) and kind in ("float", "str"):
            v = v.where(rng.random(n) > 0.2)  # missing values
        cols[name] = v
    return pd.DataFrame(cols)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames())
def test_arf_roundtrip_any_schema(df):
    m = ARF(n_trees=3, random_state=0).fit(df)
    s = m.sample(30, random_state=1)
    assert list(s.columns) == list(df.columns)
    assert (s.dtypes == df.dtypes).all()
    lp = m.log_prob(df)
    assert not np.isnan(lp).any()
    assert np.isfinite(m.log_prob(s)).all()  # own samples always have positive density


@pytest.mark.parametrize("cls", [RFDE, DEF])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames())
def test_density_learners_any_schema(cls, df):
    df = df.dropna()
    if len(df) < 5:
        return
    kw = {"depth": 3} if cls is RFDE else {"max_leaves": 8}
    m = cls(n_trees=3, random_state=0, **kw).fit(df)
    s = m.sample(20, random_state=1)
    assert list(s.columns) == list(df.columns)
    assert not np.isnan(m.log_prob(df)).any()
    assert np.isfinite(m.log_prob_encoded(m.encoder_.transform(s))).all()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames(), seed=st.integers(0, 100))
def test_gef_any_schema(df, seed):
    y = np.random.default_rng(seed).choice(["a", "b"], len(df))
    if len(set(y)) < 2:
        return
    m = GeF(n_trees=3, random_state=0).fit(df, y)
    p = m.predict_proba(df)
    np.testing.assert_allclose(np.asarray(p, float).sum(1), 1.0, atol=1e-9)
