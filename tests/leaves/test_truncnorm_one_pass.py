"""The truncated-normal leaf's parameters and derived tables in one pass per leaf
(``_normal_params``, ``_standardised``, ``_log_mass_and_table``) give the numpy steps they
replace (the parameters, standardised cells and tails bit for bit; the log mass, normaliser
and draw table, which take the C library's logarithms and exponentials instead of numpy's, to
a few ulp of their inputs): empty leaves, one-row and fractional-count leaves, leaves of
equal values, unbounded cells, cells whose standardised ends cross (``a_ > b_``), with and
without truncation."""

import numpy as np
import pytest
from scipy.special import log_ndtr

from forestgen.leaves.base import ColumnCell
from forestgen.leaves.normal_math import _lower_tail, cdf_ends, log_ndtr_diff_tails
from forestgen.leaves.stats import MomentStats
from forestgen.leaves.truncnorm import Z975, TruncNormalLeaf


def _reference_params(stats, cell, truncate):
    """TruncNormalLeaf._fit_moments with finite_bounds="no", step by step in numpy."""
    L = len(cell.lower)
    cnt, mu, var = stats.count, stats.mean, stats.var
    lo, hi = cell.lower.copy(), cell.upper.copy()
    if not truncate:
        lo, hi = np.full(L, -np.inf), np.full(L, np.inf)
    glo, ghi = cell.data_min, cell.data_max
    clo = np.where(np.isfinite(lo), lo, glo)
    chi = np.where(np.isfinite(hi), hi, ghi)
    centre = np.clip(0.5 * (np.maximum(clo, glo) + np.minimum(chi, ghi)), glo, ghi)
    mu = np.where(cnt > 0, mu, centre)
    with np.errstate(invalid="ignore"):
        sd = np.sqrt(np.where(np.isfinite(var), np.maximum(var, 0.0), 0.0))
    half = 0.5 * (np.minimum(chi, ghi) - np.maximum(clo, glo))
    sigma0 = np.maximum(half, 0.0) / Z975
    prior = np.sqrt(2.0 / np.maximum(cnt, 1.0)) * sigma0
    floor = max(1e-9 * max(abs(ghi - glo), 1.0), 4.0 * np.spacing(max(abs(glo), abs(ghi))))
    sd = np.maximum(np.where((cnt >= 2) & (sd > 0), sd, prior), floor)
    return mu, sd, lo, hi


def _reference_tables(lm):
    """TruncNormalLeaf._finish step by step in numpy."""
    a = (lm.lo_ - lm.mu_) / lm.sigma_
    b = (lm.hi_ - lm.mu_) / lm.sigma_
    logz, llo, lhi = log_ndtr_diff_tails(a, b)
    lognorm = np.log(lm.sigma_) + 0.5 * np.log(2.0 * np.pi) + logz
    bb = np.maximum(a, b)
    if not np.array_equal(bb, b, equal_nan=True):
        llo, lhi = _lower_tail(a, bb)[3:]
    table = np.concatenate([cdf_ends(logz, lhi, llo), [np.where(a > 0, -lm.sigma_, lm.sigma_)]])
    return {"a_": a, "b_": b, "logz_": logz, "lognorm_": lognorm,
            "tails_": np.stack([llo, lhi]), "draw_table_": table}


EXACT = ("a_", "b_", "tails_")  # the same operations as the numpy steps


def _check_tables(lm):
    """The derived tables against :func:`_reference_tables`: bit for bit where the same
    operations give them, else the same infinities and NaNs and values within a few ulp
    (``logz_``), or within the rounding of their inputs: ``lognorm_`` to 1e-15 of its terms'
    size, the draw table's exponentials to ``|logz_|`` ulp."""
    for k, ref in _reference_tables(lm).items():
        got = getattr(lm, k)
        assert got.shape == ref.shape, k
        if k in EXACT:
            assert got.tobytes() == ref.tobytes(), k
            continue
        same = (got == ref) | (np.isnan(got) & np.isnan(ref))
        assert (same | (np.isfinite(got) & np.isfinite(ref))).all(), k  # (inf / NaN alike)
        gap = np.where(same, 0.0, np.abs(got - ref))
        if k == "logz_":
            tol = 4 * np.spacing(np.abs(ref))
        elif k == "lognorm_":
            tol = 1e-15 * (np.abs(np.log(lm.sigma_)) + 1.0 + np.abs(lm.logz_))
        else:
            tol = 1e-15 * np.abs(ref) * (1.0 + np.abs(np.where(np.isfinite(lm.logz_),
                                                               lm.logz_, 0.0)))
        assert (gap <= np.where(same, 0.0, tol)).all(), k


def _cell_and_stats(seed):
    rng = np.random.default_rng(seed)
    L, n = 1500, 4000
    leaf = rng.integers(0, L - 20, n)  # the last 20 leaves: no rows
    x = rng.normal(0.0, 2.0, n)
    x[leaf < 100] = 0.75  # leaves of equal values
    lower = np.sort(rng.normal(0.0, 3.0, L))
    upper = lower + rng.exponential(1.0, L)
    lower[:10], upper[10:20] = -np.inf, np.inf  # unbounded sides
    upper[20:30] = lower[20:30]  # zero-width cells
    w = rng.uniform(0.3, 1.7, n)  # fractional counts: some leaves between 1 and 2
    cell = ColumnCell(lower=lower, upper=upper, allowed=None, data_min=-6.0, data_max=7.0,
                      n_levels=0)
    return MomentStats.from_pairs(x, leaf, L, weight=w), cell, (x, leaf, w)


@pytest.mark.parametrize("truncate", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_one_pass_params_and_tables_match_the_numpy_steps(truncate, seed):
    stats, cell, _ = _cell_and_stats(seed)
    assert ((stats.count > 1) & (stats.count < 2)).any() and (stats.count == 0).any()
    lm = TruncNormalLeaf(truncate=truncate)
    lm._fit_moments(stats, cell)
    for got, ref in zip((lm.mu_, lm.sigma_, lm.lo_, lm.hi_),
                        _reference_params(stats, cell, truncate)):
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, ref)
        assert np.array_equal(np.signbit(got), np.signbit(ref))
    lm._finish()
    _check_tables(lm)


def test_crossed_cells_take_the_draw_cell_tails():
    """Where a cell's standardised ends cross (``a_ > b_``, a cell given by hand), the
    tails are those of ``(a_, max(a_, b_)]`` as before."""
    rng = np.random.default_rng(3)
    L = 50
    lm = TruncNormalLeaf()
    lm.mu_ = rng.normal(size=L)
    lm.sigma_ = rng.uniform(0.5, 2.0, L)
    lm.lo_ = lm.mu_ + rng.normal(size=L)
    lm.hi_ = lm.lo_ + rng.exponential(1.0, L)
    lm.hi_[::7] = lm.lo_[::7] - 0.5  # crossed
    lm._finish()
    assert (lm.a_ > lm.b_).any()
    _check_tables(lm)
    assert np.array_equal(lm.tails_[0][::7], log_ndtr(np.where(lm.a_ > 0, -lm.a_, lm.a_))[::7])


def test_tables_over_many_scales_and_tails():
    """Means and scales over twelve orders of magnitude, cells far in both tails, wide and
    narrow, unbounded on either side: the tables agree with the numpy steps as above."""
    rng = np.random.default_rng(7)
    L = 20000
    lm = TruncNormalLeaf()
    lm.mu_ = rng.normal(size=L) * 10 ** rng.uniform(-3, 3, L)
    lm.sigma_ = 10 ** rng.uniform(-4, 2, L)
    lm.lo_ = lm.mu_ + lm.sigma_ * rng.normal(0.0, 5.0, L)
    lm.hi_ = lm.lo_ + lm.sigma_ * 10 ** rng.uniform(-3, 1.7, L)
    lm.lo_[::50], lm.hi_[::77] = -np.inf, np.inf
    lm._finish()
    assert (lm.a_ > 8).any() and (lm.b_ < -8).any()  # both far tails
    _check_tables(lm)


def test_derived_groups_are_built_on_first_read_with_the_same_bits():
    """A fit holds its fitted arrays only; reading a derived array builds its group (the
    cells; the log mass and normaliser; the draw tables, with the log mass), and every
    array has the bits of the all-at-once build whichever group built it first."""
    stats, cell, _ = _cell_and_stats(2)
    ref = TruncNormalLeaf()
    ref._fit_moments(stats, cell)
    assert not set(TruncNormalLeaf.derived_arrays) & set(vars(ref))
    ref._finish()
    orders = [("lognorm_", "a_", "draw_table_"), ("tails_", "b_"), ("a_", "logz_", "tails_")]
    groups = {"a_": {"a_", "b_"}, "b_": {"a_", "b_"}, "logz_": {"logz_", "lognorm_"},
              "lognorm_": {"logz_", "lognorm_"},
              "tails_": {"logz_", "lognorm_", "tails_", "draw_table_"},
              "draw_table_": {"logz_", "lognorm_", "tails_", "draw_table_"}}
    for order in orders:
        lm = TruncNormalLeaf()
        lm._fit_moments(stats, cell)
        built: set = set()
        for name in order:
            getattr(lm, name)
            built |= groups[name]
            assert set(TruncNormalLeaf.derived_arrays) & set(vars(lm)) == built, order
        for k in TruncNormalLeaf.derived_arrays:
            assert getattr(lm, k).tobytes() == getattr(ref, k).tobytes(), (order, k)
    lm.set_param_arrays(lm.param_arrays())  # new fitted arrays: the derived ones are dropped
    assert not set(TruncNormalLeaf.derived_arrays) & set(vars(lm))
