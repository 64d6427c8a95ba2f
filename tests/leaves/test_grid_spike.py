"""GridSpikeLeaf: a numeric leaf mixed with the leaf's repeated grid values, each uniform on
its grid cell (ARF's ``grid_spikes``)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from forestgen.leaves import ColumnCell, GridSpikeLeaf, TruncNormalLeaf
from forestgen.testing import check_leaf_model

# three leaves: whole-number values in (0, 10], (10, 20.5] and (20.5, 30] (the last cuts the
# grid cell of 21 at 20.5, as a split between 20 and 21 would not, to test the intersection)
CELL = ColumnCell(lower=np.array([0.0, 10.0, 20.7]), upper=np.array([10.0, 20.7, 30.0]),
                  allowed=None, data_min=0.0, data_max=30.0)


def _data():
    leaf = np.r_[np.zeros(6), np.ones(5), np.full(4, 2)].astype(np.int64)
    x = np.array([4, 4, 4, 7, 7, 2.5,      # leaf 0: 4 and 7 repeated, 2.5 off the spikes
                  12, 15, 18, 19, 20,      # leaf 1: no repeated value of the column
                  21, 21, 26, 28], float)  # leaf 2: 21 (cell cut at 20.7) and 26, 28 once
    return x, leaf


VALUES = [4.0, 7.0, 21.0, 28.0]  # (28 repeated elsewhere in the column)


def _fit(weight=0.4):
    x, leaf = _data()
    return GridSpikeLeaf(step=1.0, values=VALUES, weight=weight).fit(x, leaf, CELL)


@pytest.mark.parametrize("kw", [{}, {"step": 0.1, "weight": 0.5}, {"step": 0.1, "weight": 1.0},
                                {"step": 0.05, "values": [-0.5, 0.25, 1.0], "weight": 0.3}])
def test_conforms(kw):
    check_leaf_model(GridSpikeLeaf(**kw))


def test_spikes_are_the_leafs_own_repeated_values():
    m = _fit(0.4)
    # leaf 0: 5 of its 6 rows at repeated values (4: 3 rows, 7: 2); leaf 1: none;
    # leaf 2: 21 twice and 28 once of 4 rows
    np.testing.assert_allclose(m.weight_, [0.4 * 5 / 6, 0.0, 0.4 * 3 / 4])
    base = TruncNormalLeaf().fit(*_data(), CELL)
    lf = np.array([0, 0, 0, 1, 2, 2, 2])
    q = np.array([4.2, 7.0, 5.0, 15.0, 20.8, 28.4, 26.0])
    f = np.exp(base.log_prob(lf, q))
    w = m.weight_[lf]
    spike = np.array([3 / 5 / 1.0, 2 / 5 / 1.0, 0.0, 0.0,
                      2 / 3 / 0.8,  # 21's cell (20.5, 21.5] cut at the leaf's face 20.7
                      1 / 3 / 1.0, 0.0])
    np.testing.assert_allclose(np.exp(m.log_prob(lf, q)), (1 - w) * f + w * spike,
                               rtol=1e-12)


def test_density_integrates_to_one_per_cell():
    m = _fit(0.6)
    for leaf, (lo, hi) in enumerate(zip(CELL.lower, CELL.upper)):
        f = lambda v, leaf=leaf: float(np.exp(m.log_prob(np.array([leaf]), np.array([v])))[0])  # noqa: E731
        pts = np.unique(np.clip(np.r_[lo, np.arange(0.5, 30.0, 1.0), hi], lo, hi))
        total = sum(integrate.quad(f, a, b, limit=200)[0] for a, b in zip(pts[:-1], pts[1:]))
        assert total == pytest.approx(1.0, abs=1e-6)


def test_draws_follow_the_density_and_round_to_the_repeated_values():
    m = _fit(0.5)
    rng = np.random.default_rng(1)
    leaf = np.zeros(60000, np.int64)
    s = m.sample(leaf, rng)
    assert np.all((s > 0.0) & (s <= 10.0))
    edges = np.arange(0.5, 10.0, 1.0)
    edges = np.r_[0.0, edges, 10.0]
    freq = np.histogram(s, edges)[0] / len(s)
    prob = np.exp(m.log_prob_interval(np.zeros(len(edges) - 1, np.int64), edges[:-1],
                                      edges[1:]))
    assert prob.sum() == pytest.approx(1.0, abs=1e-9)
    se = np.sqrt(prob * (1 - prob) / len(s))
    assert np.all(np.abs(freq - prob) <= 4.5 * se + 1e-4), (freq, prob)
    # rounded to the grid, the draws hit 4 and 7 with at least the spikes' shares
    r = np.rint(s)
    spike = m.weight_[0]
    assert np.mean(r == 4.0) > spike * 3 / 5 and np.mean(r == 7.0) > spike * 2 / 5
    # an interval draw stays inside the interval, spikes included
    sub = m.sample(leaf[:3000], rng, lo=np.full(3000, 3.8), hi=np.full(3000, 4.1))
    assert np.all((sub > 3.8) & (sub <= 4.1))


def test_draws_from_one_uniform_match_the_torch_sampler():
    torch = pytest.importorskip("torch")
    m = _fit(0.7)
    rng = np.random.default_rng(3)
    leaf = rng.integers(0, 3, 5000)
    u = rng.random(5000)
    want = m.sample_uniform(leaf, u)
    p = m.torch_sample_params(3, torch.device("cpu"))
    got = GridSpikeLeaf.torch_sample(p, torch.as_tensor(leaf), torch.as_tensor(u)).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    q = np.r_[np.linspace(0.1, 30.0, 300), VALUES]
    lf = np.clip(np.searchsorted(CELL.upper, q), 0, 2)
    tp = m.torch_params(torch.float64, torch.device("cpu"))
    lp = GridSpikeLeaf.torch_log_prob(tp, torch.as_tensor(lf), torch.as_tensor(q)).numpy()
    np.testing.assert_allclose(lp, m.log_prob(lf, q), rtol=1e-12)


def test_held_out_values_at_repeated_values_beat_the_plain_leaf():
    # a column on a whole-number grid whose values repeat: rows at the values seen score
    # higher under the spikes than under the leaf normal alone
    rng = np.random.default_rng(0)
    vals = rng.choice([10.0, 12.0, 15.0, 20.0], size=400, p=[0.4, 0.3, 0.2, 0.1])
    fit, test = vals[:300], vals[300:]
    cell = ColumnCell(lower=np.array([5.0]), upper=np.array([25.0]), allowed=None,
                      data_min=10.0, data_max=20.0)
    z = np.zeros(300, np.int64)
    plain = TruncNormalLeaf().fit(fit, z, cell)
    spikes = GridSpikeLeaf(step=1.0, values=None, weight=0.5).fit(fit, z, cell)
    t = np.zeros(100, np.int64)
    assert spikes.log_prob(t, test).mean() > plain.log_prob(t, test).mean() + 0.5


def test_set_weight_equals_a_fit_at_that_weight():
    a, b = _fit(0.2), _fit(0.9)
    a.set_weight(0.9)
    np.testing.assert_array_equal(a.weight_, b.weight_)
    q = np.array([4.0, 15.0, 21.0])
    np.testing.assert_array_equal(a.log_prob(np.arange(3), q), b.log_prob(np.arange(3), q))


def test_bad_parameters_name_themselves():
    x, leaf = _data()
    with pytest.raises(ValueError, match="weight"):
        GridSpikeLeaf(step=1.0, weight=1.5).fit(x, leaf, CELL)
    with pytest.raises(ValueError, match="step"):
        GridSpikeLeaf(step=0.0, weight=0.5).fit(x, leaf, CELL)
    with pytest.raises(ValueError, match="values"):
        GridSpikeLeaf(step=1.0, values=[3.0, 2.0]).fit(x, leaf, CELL)
