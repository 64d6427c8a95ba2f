"""MarginalMixLeaf: a numeric leaf mixed with the column's histogram on its cell, weight
``a / (N + a)`` (ARF's ``numeric_prior``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from forestgen.leaves import ColumnCell, MarginalMixLeaf, TruncNormalLeaf
from forestgen.testing import check_leaf_model

EDGES = [-4.0, -1.0, -0.5, 0.5, 1.0, 4.0]
CDF = [0.0, 0.1, 0.2, 0.8, 0.9, 1.0]  # a spike of 60% on (-0.5, 0.5]


CELL = ColumnCell(lower=np.array([-3.0, 0.0, 5.0]), upper=np.array([0.0, 3.0, 6.0]),
                  allowed=None, data_min=-3.0, data_max=6.0)


def _fit(strength=2.0, n=(2, 30, 3)):
    rng = np.random.default_rng(0)
    leaf = np.repeat(np.arange(len(n)), n)
    x = rng.uniform(CELL.lower[leaf], CELL.upper[leaf])
    return MarginalMixLeaf(edges=EDGES, cdf=CDF, strength=strength).fit(x, leaf, CELL), x, leaf


@pytest.mark.parametrize("strength", [0.0, 2.0, 50.0])
def test_conforms(strength):
    check_leaf_model(MarginalMixLeaf(edges=EDGES, cdf=CDF, strength=strength))


def test_weights_are_pseudo_counts_and_zero_outside_the_histogram():
    m, x, leaf = _fit(strength=2.0)
    # leaves of 2 and 30 rows; the third cell (5, 6] lies outside the histogram's edges
    np.testing.assert_allclose(m.weight_, [2 / 4, 2 / 32, 0.0])
    base = TruncNormalLeaf().fit(x, leaf, CELL)
    q = np.array([5.5])
    np.testing.assert_allclose(m.log_prob(np.array([2]), q), base.log_prob(np.array([2]), q))
    # elsewhere the mixture: (1 - w) f + w h / H(cell)
    q = np.array([-0.25])
    h = 0.6 / (0.1 * 2 / 3 + 0.1 + 0.3)  # the spike's density over the cell's mass
    want = (1 - 0.5) * np.exp(base.log_prob(np.array([0]), q)) + 0.5 * h
    np.testing.assert_allclose(np.exp(m.log_prob(np.array([0]), q)), want, rtol=1e-12)


def test_density_is_the_mixture_and_integrates_to_one_per_cell():
    m, _, _ = _fit(strength=3.0)
    for leaf, (lo, hi) in enumerate([(-3.0, 0.0), (0.0, 3.0), (5.0, 6.0)]):
        f = lambda v, leaf=leaf: float(np.exp(m.log_prob(np.array([leaf]), np.array([v])))[0])  # noqa: E731
        total = sum(integrate.quad(f, a, b, limit=200)[0]
                    for a, b in zip(*[np.unique(np.clip([lo, *EDGES, hi], lo, hi))[k:]
                                      for k in (0, 1)]) if b > a)
        assert total == pytest.approx(1.0, abs=1e-6)


def test_draws_follow_the_density():
    m, _, _ = _fit(strength=4.0)
    rng = np.random.default_rng(1)
    leaf = np.zeros(40000, np.int64)
    s = m.sample(leaf, rng)
    assert np.all((s > -3.0) & (s <= 0.0))
    edges = np.linspace(-3.0, 0.0, 13)
    freq = np.histogram(s, edges)[0] / len(s)
    prob = np.exp([m.log_prob_interval(np.array([0]), np.array([a]), np.array([b]))[0]
                   for a, b in zip(edges[:-1], edges[1:])])
    assert prob.sum() == pytest.approx(1.0, abs=1e-9)
    se = np.sqrt(prob * (1 - prob) / len(s))
    assert np.all(np.abs(freq - prob) <= 4.5 * se + 1e-4), (freq, prob)
    # an interval draw stays inside the interval
    sub = m.sample(leaf[:500], rng, lo=np.full(500, -0.4), hi=np.full(500, -0.1))
    assert np.all((sub > -0.4) & (sub <= -0.1))


def test_set_strength_equals_a_fit_at_that_strength():
    a, x, leaf = _fit(strength=1.0)
    b, _, _ = _fit(strength=7.0)
    a.set_strength(7.0)
    np.testing.assert_array_equal(a.weight_, b.weight_)
    q = np.array([-0.3, 1.0, 5.5])
    np.testing.assert_array_equal(a.log_prob(np.arange(3), q), b.log_prob(np.arange(3), q))


def test_bad_strength_names_the_parameter():
    with pytest.raises(ValueError, match="strength"):
        _fit(strength=-1.0)
    with pytest.raises(ValueError, match="strength"):
        _fit(strength=float("nan"))
