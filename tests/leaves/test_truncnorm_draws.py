"""Truncated-normal draws from linear probabilities (``TruncNormalLeaf.sample_uniform``) follow
the same quantile function as the log-space draws of ``sample_std_truncnorm`` (to a few ulp),
stay in their cells, and follow the truncated normal law (Kolmogorov-Smirnov)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from forestgen.leaves.normal_math import LINEAR_MASS
from forestgen.leaves.truncnorm import TruncNormalLeaf

# standardised cells (a, b]: central, straddling, both tails, unbounded, narrow, far in a tail
# (linear down to ~1e-280 of mass, log space below), empty (a >= b)
CELLS = [(-np.inf, np.inf), (-1, 1), (0.5, 3), (-3, -0.5), (2, 9), (-9, -2), (5, np.inf),
         (-np.inf, -5), (-40, -39), (39, 40), (-39, np.inf), (-np.inf, 39), (0.1, 0.1 + 1e-9),
         (-1e-12, 1e-12), (30, 30.5), (-30.5, -30), (8, 8.001), (-38.5, -37), (37, 38.5),
         (0, np.inf), (-np.inf, 0), (-2, 40), (-40, 2), (36, 60), (-1, -1), (2, 1)]
MU, SIGMA = 3.0, 2.0


class _Uniforms:
    """A generator stand-in whose ``random(m)`` returns given uniforms."""

    def __init__(self, u):
        self.u = u

    def random(self, m):
        return self.u[:m]


@pytest.fixture(scope="module")
def leaf_model():
    a = np.array([c[0] for c in CELLS], float)
    b = np.array([c[1] for c in CELLS], float)
    L = len(CELLS)
    return TruncNormalLeaf().set_param_arrays({
        "mu_": np.full(L, MU), "sigma_": np.full(L, SIGMA), "lo_": MU + SIGMA * a,
        "hi_": MU + SIGMA * b, "count_": np.ones(L)})


def test_both_ways_of_drawing_are_used(leaf_model):
    mass = leaf_model.draw_table_[1]
    assert (mass >= LINEAR_MASS).sum() >= 18 and 0 < (mass < LINEAR_MASS).sum() <= 8


@pytest.mark.parametrize("k", range(len(CELLS)))
def test_same_quantile_as_the_log_space_draw(leaf_model, k):
    m = 20_000
    u = np.random.default_rng(k).random(m)
    u[:6] = [0.0, 2.0**-53, 0.5, 1 - 2.0**-53, 1e-300, 0.25]
    leaf = np.full(m, k)
    new = leaf_model.sample_uniform(leaf, u)
    # sample() with an unbounded interval: the log-space path (sample_std_truncnorm), same u
    ref = leaf_model.sample(leaf, _Uniforms(u), lo=np.full(m, -np.inf), hi=np.full(m, np.inf))
    fin = ~(np.isinf(new) & (new == ref))  # (u = 0 in a cell unbounded on that side)
    z_new, z_ref = (new[fin] - MU) / SIGMA, (ref[fin] - MU) / SIGMA
    assert np.all(np.abs(z_new - z_ref) <= 1e-14 * np.maximum(1.0, np.abs(z_ref)))
    lo, hi = leaf_model.lo_[k], leaf_model.hi_[k]
    if lo < hi:  # inside the cell (lo, hi]
        assert np.all((new > lo) & (new <= hi))


@pytest.mark.parametrize("cell", [(-np.inf, np.inf), (-1, 1), (0.5, 3), (-0.2, 4), (2, 9),
                                  (-9, -2), (5, np.inf), (-np.inf, -5), (8, 8.5), (-2, 40)])
def test_draws_follow_the_truncated_normal(cell):
    a, b = cell
    lm = TruncNormalLeaf().set_param_arrays({
        "mu_": np.array([MU]), "sigma_": np.array([SIGMA]), "lo_": np.array([MU + SIGMA * a]),
        "hi_": np.array([MU + SIGMA * b]), "count_": np.ones(1)})
    x = lm.sample(np.zeros(50_000, np.int64), np.random.default_rng(7))
    assert np.all((x > lm.lo_[0]) & (x <= lm.hi_[0]))
    p = stats.kstest(x, stats.truncnorm(a, b, loc=MU, scale=SIGMA).cdf).pvalue
    assert p > 1e-3
