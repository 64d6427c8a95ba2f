"""Truncated-normal leaves (ARF's FORDE, Watson et al. 2023, Alg. 2; GeF, Correia et al. 2020).

Per leaf: the mean and unbiased SD of the rows in the leaf, truncated to the leaf cell. A leaf
whose SD is zero or undefined (one row, or all values equal) gets the R arf v0.2.4 prior
instead of sd = 0: ``sigma0 = halfwidth(cell) / Phi^-1(0.975)`` with unbounded sides replaced by
the global data range, and ``sigma = sqrt(2 / N) * sigma0`` — most of its mass lies in the cell.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy.special import log_ndtr

from forestgen.leaves.base import (
    ColumnCell,
    LeafModel,
    cell_bounds_to,
    numpy_dtype,
    scaled_cell,
    torch_tensor,
)
from forestgen.leaves.normal_math import (
    LINEAR_MASS,
    LOG_SQRT_2PI,
    NDTRI,
    NDTRI_EXP,
    _lower_tail,
    log_ndtr_diff,
    sample_std_truncnorm,
    std_truncnorm_draw,
    std_truncnorm_draw_log,
    std_truncnorm_mean,
    torch_std_truncnorm,
)
from forestgen.leaves.stats import MomentStats, column_scale
from forestgen.parallel import parallel_kernel, sized
from forestgen.registry import register

Z975 = 1.959963984540054
LOG2 = math.log(2.0)


def finite_cell(cell: ColumnCell, finite_bounds: str, epsilon: float,
                local: tuple[np.ndarray, np.ndarray] | None = None):
    """Truncation bounds per leaf under R arf's ``finite_bounds`` rule.

    ``"no"``: the cell as is (unbounded sides stay infinite). ``"global"``: unbounded sides take
    the global data range. ``"local"``: the range of the leaf's own rows, ``local = (min, max)``
    per leaf (NaN where a leaf has none); a leaf without rows or whose rows share one value
    takes the global data range instead (a range of zero width would make the density at that
    value infinite). With ``epsilon`` > 0 a replaced bound is pushed out by
    ``epsilon / 2`` times the width it bounds.
    """
    lo = cell.lower.copy()
    hi = cell.upper.copy()
    if finite_bounds == "no":
        return lo, hi
    if finite_bounds == "global":
        gl, gh = np.full_like(lo, cell.data_min), np.full_like(hi, cell.data_max)
    elif finite_bounds == "local":
        if local is None:
            raise ValueError("finite_bounds='local' needs the per-leaf minima and maxima")
        gl, gh = local
        point = ~(gh > gl)  # no rows (NaN) or one value: no range of its own
        gl = np.where(point, cell.data_min, gl)
        gh = np.where(point, cell.data_max, gh)
    else:
        raise ValueError(f"finite_bounds must be 'no', 'global' or 'local', got {finite_bounds!r}")
    new_lo = np.where(np.isinf(lo), gl, np.maximum(lo, gl) if finite_bounds == "local" else lo)
    new_hi = np.where(np.isinf(hi), gh, np.minimum(hi, gh) if finite_bounds == "local" else hi)
    width = np.maximum(new_hi - new_lo, 0.0)
    slack = 0.5 * epsilon * np.where(width > 0, width, max(abs(cell.data_max - cell.data_min), 1.0))
    # cells are (lower, upper]: a replaced lower bound must sit just below the smallest value
    new_lo = np.where(new_lo != lo, np.nextafter(new_lo - slack, -np.inf), lo)
    new_hi = np.where(new_hi != hi, new_hi + slack, hi)
    # never past the cell (which ends at the column's support, forestgen.data.support)
    return np.maximum(new_lo, lo), np.minimum(new_hi, hi)


@njit(cache=True, nogil=True, inline="always")
def _max(a, b):
    """``np.maximum`` of two floats (NaN if either is)."""
    if np.isnan(a):
        return a
    if np.isnan(b):
        return b
    return a if a >= b else b


@njit(cache=True, nogil=True, inline="always")
def _min(a, b):
    """``np.minimum`` of two floats (NaN if either is)."""
    if np.isnan(a):
        return a
    if np.isnan(b):
        return b
    return a if a <= b else b


@njit(cache=True, nogil=True, error_model="numpy")
def _normal_params(cnt, mean, m2, lower, upper, glo, ghi, floor, truncate):
    """:meth:`TruncNormalLeaf._fit_moments` with ``finite_bounds="no"`` in one pass over the
    leaves, the same operations in the same order per leaf (the same bits as its numpy
    steps): ``mu, sigma, lo, hi`` from the leaves' weighted counts, means and ``m2``, their
    cells ``(lower, upper]`` (or the whole line without ``truncate``), the data range
    ``glo, ghi`` and the SD floor."""
    L = cnt.shape[0]
    mu = np.empty(L)
    sd = np.empty(L)
    lo = np.empty(L)
    hi = np.empty(L)
    for i in range(L):
        a = lower[i] if truncate else -np.inf
        b = upper[i] if truncate else np.inf
        lo[i] = a
        hi[i] = b
        clo = a if np.isfinite(a) else glo  # empty leaves: centre of the clipped cell
        chi = b if np.isfinite(b) else ghi
        left = _max(clo, glo)
        right = _min(chi, ghi)
        centre = _min(_max(0.5 * (left + right), glo), ghi)
        c = cnt[i]
        mu[i] = mean[i] if c > 0 else centre
        var = m2[i] / (c - 1.0)  # (MomentStats.var)
        s = np.sqrt(_max(var, 0.0) if np.isfinite(var) else 0.0)
        sigma0 = _max(0.5 * (right - left), 0.0) / Z975
        prior = np.sqrt(2.0 / _max(c, 1.0)) * sigma0
        sd[i] = _max(s if (c >= 2 and s > 0) else prior, floor)
    return mu, sd, lo, hi


@njit(cache=True, nogil=True, error_model="numpy")
def _standardised(lo, hi, mu, sigma, sign, ends):
    """The standardised cells ``a = (lo - mu) / sigma``, ``b = (hi - mu) / sigma``, their
    ends mirrored onto the lower tail written into ``ends [2, L]`` (``-b, -a`` where ``a >
    0``: the ``lo, hi`` of :func:`~.normal_math._lower_tail`), ``sign`` filled with
    ``sigma`` negated where mirrored, and whether ``np.maximum(a, b)`` differs from ``b``
    anywhere (``a > b``, or ``a`` NaN where ``b`` is not) -- the numpy steps of
    :meth:`TruncNormalLeaf._finish` in one pass, the same bits."""
    L = lo.shape[0]
    a = np.empty(L)
    b = np.empty(L)
    wider = False
    for i in range(L):
        ai = (lo[i] - mu[i]) / sigma[i]
        bi = (hi[i] - mu[i]) / sigma[i]
        a[i] = ai
        b[i] = bi
        flip = ai > 0
        ends[0, i] = -bi if flip else ai
        ends[1, i] = -ai if flip else bi
        sign[i] = -sigma[i] if flip else sigma[i]
        wider |= (ai > bi) or (np.isnan(ai) and not np.isnan(bi))
    return a, b, wider


@njit(cache=True, nogil=True, error_model="numpy")
def _log_mass_and_table(llo, lhi, a, b, sigma, draw, table, fill):
    """Per leaf, from ``log Phi`` of its mirrored cell's ends ``llo, lhi``: the cell's log
    mass ``logz`` (``lhi + log(1 - exp(llo - lhi))``, Mächler's two branches as
    :func:`~.normal_math.log1mexp`; ``-inf`` unless ``b > a``), the log normaliser
    ``log sigma + log sqrt(2 pi) + logz``, and rows 0-2 of ``table``:
    :func:`~.normal_math.cdf_ends` from ``draw`` (the draw cell's ``log Phi`` ends) and
    ``logz`` (with ``fill``; else ``table`` is not touched). One pass; the functions of the
    C library, so the last bit may differ from numpy's vectorised ones."""
    L = llo.shape[0]
    logz = np.empty(L)
    lognorm = np.empty(L)
    for i in range(L):
        d = llo[i] - lhi[i]
        if d > 0.0:
            d = 0.0
        if d > -LOG2:
            m = np.log(-np.expm1(d))
        else:
            m = np.log1p(-np.exp(d))
        z = lhi[i] + m if b[i] > a[i] else -np.inf
        logz[i] = z
        lognorm[i] = np.log(sigma[i]) + LOG_SQRT_2PI + z
        if fill:
            table[0, i] = np.exp(draw[0, i])
            table[1, i] = np.exp(z)
            table[2, i] = -np.expm1(draw[1, i])
    return logz, lognorm


@register("leaf", "truncnorm")
class TruncNormalLeaf(LeafModel):
    """Gaussian with the leaf's mean and SD, truncated to the leaf cell.

    Parameters
    ----------
    finite_bounds : ``"no"`` (default, as R arf), ``"global"`` or ``"local"``; see
        :func:`finite_cell`.
    epsilon : slack on replaced bounds (R arf ``epsilon``).
    truncate : ``False`` gives the untruncated normal of the ARF Table 2 pipeline
        (``generative_ranger``); its density then does not integrate to 1 per tree.
    """

    packed_form = "truncnorm"  # the fused walks read its arrays (LeafModel)
    packed_factors = frozenset({"point", "interval"})

    discrete = False
    fitted_arrays = ("mu_", "sigma_", "lo_", "hi_", "count_")
    #: per-leaf arrays derived from the fitted ones (:meth:`_finish`; not saved), so a fit
    #: holds only :attr:`fitted_arrays`: built when a query first reads one, by group: the
    #: standardised cell ``a_, b_`` (intervals, means); the log mass and normaliser
    #: ``logz_, lognorm_`` (densities); the draw tables ``tails_, draw_table_`` (sampling;
    #: with the log mass and normaliser, which they take)
    derived_arrays = ("a_", "b_", "logz_", "lognorm_", "tails_", "draw_table_")

    def __init__(self, *, finite_bounds: str = "no", epsilon: float = 0.0, truncate: bool = True):
        self.finite_bounds = finite_bounds
        self.epsilon = epsilon
        self.truncate = truncate

    def fit(self, x, leaf, cell, weight=None):
        """Fit in units of :func:`column_scale` (exact rescaling), then convert back."""
        s = column_scale(cell.data_min, cell.data_max)
        if self.fits_from_stats and self.finite_bounds != "local":  # (scaled as they are read)
            self._fit_moments(MomentStats.from_pairs(x, leaf, len(cell.lower), scale=s,
                                                     weight=weight), scaled_cell(cell, s))
        else:
            self._fit_scaled(np.asarray(x, np.float64) / s, leaf, scaled_cell(cell, s), weight)
        return self._unscale(s)

    def fit_column(self, x, leaves, cell, weight=None):
        """:meth:`fit` of the pairs tree by tree (see :meth:`LeafModel.fit_column`), the
        values read in place where this model fits from moments: the same fit, bit for
        bit."""
        if not (self.fits_from_stats and self.finite_bounds != "local"
                and type(self).fit is TruncNormalLeaf.fit):
            return super().fit_column(x, leaves, cell, weight)
        s = column_scale(cell.data_min, cell.data_max)
        self._fit_moments(MomentStats.from_column(x, leaves, len(cell.lower), scale=s,
                                                  weight=weight), scaled_cell(cell, s))
        return self._unscale(s)

    def fit_stats(self, stats: MomentStats, cell: ColumnCell) -> TruncNormalLeaf:
        """Fit from merged :class:`MomentStats` (see :meth:`LeafModel.fit_stats`)."""
        if not self.fits_from_stats:  # a subclass fitting from the raw values
            return super().fit_stats(stats, cell)
        s = column_scale(cell.data_min, cell.data_max)
        if stats.scale != s:
            raise ValueError(f"MomentStats in units of {stats.scale}, the cell's column scale "
                             f"is {s}")
        self._fit_moments(stats, scaled_cell(cell, s))
        return self._unscale(s)

    @property
    def fits_from_stats(self) -> bool:
        return type(self)._fit_scaled is TruncNormalLeaf._fit_scaled

    def _unscale(self, s: float) -> TruncNormalLeaf:
        for k in ("mu_", "sigma_", "lo_", "hi_"):
            setattr(self, k, getattr(self, k) * s)
        self._forget()
        return self

    def __getattr__(self, name: str):
        """A derived array (:attr:`derived_arrays`) not yet built: its group is built
        (:meth:`_derive`), from the fitted arrays as they are now."""
        if name in TruncNormalLeaf.derived_arrays and "sigma_" in self.__dict__:
            self._derive(cells=name in ("a_", "b_"), mass=name in ("logz_", "lognorm_"),
                         draw=name in ("tails_", "draw_table_"))
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _forget(self) -> None:
        """Drop the derived arrays (the fitted ones changed); the next read rebuilds them."""
        for k in TruncNormalLeaf.derived_arrays:
            self.__dict__.pop(k, None)

    def _fit_scaled(self, x, leaf, cell, weight=None) -> None:
        """Set ``mu_, sigma_, lo_, hi_, count_`` from data in units of the column's spread."""
        self._fit_moments(MomentStats.from_pairs(x, leaf, len(cell.lower), weight=weight,
                                                 minmax=self.finite_bounds == "local"), cell)

    def _fit_moments(self, stats: MomentStats, cell: ColumnCell) -> None:
        if self.epsilon < 0:
            raise ValueError(f"epsilon must be >= 0, got {self.epsilon}")
        glo, ghi = cell.data_min, cell.data_max
        # SD floor: relative to the spread, and resolvable at the magnitude of the values
        floor = max(1e-9 * max(abs(ghi - glo), 1.0), 4.0 * np.spacing(max(abs(glo), abs(ghi))))
        if self.finite_bounds == "no":  # the cell as is: the steps below in one pass
            self.mu_, self.sigma_, self.lo_, self.hi_ = _normal_params(
                np.asarray(stats.count, np.float64), np.asarray(stats.mean, np.float64),
                np.asarray(stats.m2, np.float64), np.asarray(cell.lower, np.float64),
                np.asarray(cell.upper, np.float64), float(glo), float(ghi), float(floor),
                bool(self.truncate))
            self.count_ = stats.count
            return
        L = len(cell.lower)
        cnt, mu, var = stats.count, stats.mean, stats.var
        local = None if stats.vmin is None else (stats.vmin, stats.vmax)
        lo, hi = finite_cell(cell, self.finite_bounds, self.epsilon, local)
        if not self.truncate:
            lo, hi = np.full(L, -np.inf), np.full(L, np.inf)
        # empty leaves: centre of the (globally clipped) cell
        clo = np.where(np.isfinite(lo), lo, glo)
        chi = np.where(np.isfinite(hi), hi, ghi)
        centre = np.clip(0.5 * (np.maximum(clo, glo) + np.minimum(chi, ghi)), glo, ghi)
        mu = np.where(cnt > 0, mu, centre)
        sd = np.sqrt(np.where(np.isfinite(var), np.maximum(var, 0.0), 0.0))
        half = 0.5 * (np.minimum(chi, ghi) - np.maximum(clo, glo))
        sigma0 = np.maximum(half, 0.0) / Z975
        prior = np.sqrt(2.0 / np.maximum(cnt, 1.0)) * sigma0
        sd = np.where((cnt >= 2) & (sd > 0), sd, prior)
        sd = np.maximum(sd, floor)
        self.mu_ = mu.astype(np.float64)
        self.sigma_ = sd.astype(np.float64)
        self.lo_ = lo.astype(np.float64)
        self.hi_ = hi.astype(np.float64)
        self.count_ = cnt

    def _finish(self):
        """Every derived per-leaf array (:attr:`derived_arrays`; :meth:`_derive`)."""
        self._derive(cells=True, mass=True, draw=True)

    def _derive(self, cells: bool, mass: bool, draw: bool) -> None:
        """Build derived arrays: with ``cells`` the standardised cell ``a_, b_``; with
        ``mass`` its log mass ``logz_`` and the log normaliser ``lognorm_``; with ``draw``
        those two and ``tails_`` (``log Phi`` of the cell's ends mirrored onto the lower
        tail, :func:`~.normal_math.log_ndtr_diff_tails`, ``[2, L]``) and ``draw_table_``
        (``[4, L]``), what :meth:`sample_uniform` reads of a leaf besides ``mu_`` and its
        cell instead of evaluating it per draw: the mirrored cell's
        :func:`~.normal_math.cdf_ends` and ``sigma`` (negated where the cell is mirrored).
        Leaves read in order stream through each row. Each array has the same bits
        whichever group built it."""
        # the standardised cells in one pass (_standardised: the numpy steps' bits), the
        # cells' log Phi by scipy (in place), then the rest in one pass (_log_mass_and_table)
        sigma = np.asarray(self.sigma_, np.float64)
        L = len(sigma)
        table = np.empty((4, L if draw else 0))
        tails = np.empty((2, L))
        a, b, wider = _standardised(np.asarray(self.lo_, np.float64),
                                    np.asarray(self.hi_, np.float64),
                                    np.asarray(self.mu_, np.float64), sigma,
                                    table[3] if draw else np.empty(L), tails)
        if cells:
            self.a_, self.b_ = a, b
        if not (mass or draw):
            return
        llo, lhi = log_ndtr(tails[0], out=tails[0]), log_ndtr(tails[1], out=tails[1])
        ends = tails
        if draw and wider:  # a_ > b_ somewhere: a draw's cell is (a_, max(a_, b_)]
            ends = np.stack(_lower_tail(a, np.maximum(a, b))[3:])
        self.logz_, self.lognorm_ = _log_mass_and_table(llo, lhi, a, b, sigma, ends, table,
                                                        draw)
        if draw:
            self.tails_ = ends
            self.draw_table_ = table

    def set_param_arrays(self, arrays):
        super().set_param_arrays(arrays)
        self._forget()
        return self

    def param_arrays(self):
        return {k: getattr(self, k) for k in self.fitted_arrays}

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        super().check_param_arrays(arrays, n_leaves, n_levels)
        if not (np.isfinite(arrays["mu_"]).all() and np.isfinite(arrays["sigma_"]).all()
                and (arrays["sigma_"] > 0).all()):
            raise ValueError(f"{type(self).__name__}: mu_ must be finite and sigma_ finite > 0")
        if (arrays["lo_"] > arrays["hi_"]).any():
            raise ValueError(f"{type(self).__name__}: every cell needs lo_ <= hi_")

    def log_prob(self, leaf, x):
        leaf = np.asarray(leaf, np.int64)
        return sized(_truncnorm_log_prob, len(leaf))(
            self.mu_, self.sigma_, self.lognorm_, self.lo_, self.hi_, leaf,
            np.asarray(x, np.float64))

    def log_prob_interval(self, leaf, lo, hi):
        mu, sd = self.mu_[leaf], self.sigma_[leaf]
        za, zb = (np.asarray(lo, float) - mu) / sd, (np.asarray(hi, float) - mu) / sd
        ca, cb = self.a_[leaf], self.b_[leaf]
        logz = self.logz_[leaf]
        # an interval covering the whole cell has probability 1: only the cut cells need CDFs
        out = np.zeros(len(logz))
        cut = np.flatnonzero((za > ca) | (zb < cb))
        a = np.maximum(za[cut], ca[cut])
        b = np.minimum(zb[cut], cb[cut])
        lz = logz[cut]
        out[cut] = log_ndtr_diff(a, np.maximum(a, b)) - np.where(np.isfinite(lz), lz, 0.0)
        # a zero-width cell (only missing values of this column reached the leaf) has no mass
        return np.where(np.isfinite(logz), out, -np.inf)

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        a, b = self.a_[leaf], self.b_[leaf]
        mu, sd = self.mu_[leaf], self.sigma_[leaf]
        if lo is not None:
            a = np.maximum(a, (np.asarray(lo, float) - mu) / sd)
        if hi is not None:
            b = np.minimum(b, (np.asarray(hi, float) - mu) / sd)
        if lo is None and hi is None:
            return self.sample_uniform(leaf, rng.random(len(leaf)))
        u = rng.random(len(leaf))
        x = mu + sd * sample_std_truncnorm(a, np.maximum(a, b), u)
        # inside the cell and interval to the ulp (mu + sd z rounds): (lo, hi] as asked
        low = self.lo_[leaf] if lo is None else np.maximum(self.lo_[leaf], lo)
        high = self.hi_[leaf] if hi is None else np.minimum(self.hi_[leaf], hi)
        with np.errstate(invalid="ignore"):
            return np.clip(x, np.minimum(np.nextafter(low, np.inf), high), high)

    def sample_uniform(self, leaf, u):
        """:meth:`sample` (no interval) from the uniforms ``u``: the inverse CDF of
        :func:`~.normal_math.sample_std_truncnorm` (the same quantile function), evaluated
        from the cells' probabilities looked up in ``draw_table_``, not from their logarithms
        (:func:`~.normal_math.std_truncnorm_draw`: one normal quantile per draw), then ``mu +
        sigma z`` kept in the leaf's cell to the ulp, as :meth:`sample` keeps it."""
        return _truncnorm_draws(NDTRI, NDTRI_EXP, np.asarray(leaf, np.int64),
                                np.asarray(u, np.float64), self.draw_table_,
                                (self.mu_, self.lo_, self.hi_), self.tails_)

    def mean(self, leaf):
        """Truncated-normal mean ``mu + sigma (phi(a) - phi(b)) / Z``, in log space."""
        return self.mu_[leaf] + self.sigma_[leaf] * std_truncnorm_mean(self.a_[leaf],
                                                                       self.b_[leaf])

    def mean_interval(self, leaf, lo, hi):
        mu, sd = self.mu_[leaf], self.sigma_[leaf]
        a = np.maximum(self.a_[leaf], (np.asarray(lo, float) - mu) / sd)
        b = np.minimum(self.b_[leaf], (np.asarray(hi, float) - mu) / sd)
        return mu + sd * std_truncnorm_mean(a, np.maximum(a, b))

    def torch_params(self, dtype, device):
        """One leaf-major table ``[L, 6]`` (``mu``, ``mu_lo``, ``sigma``, log-normaliser
        constant, cell bounds), so scoring gathers one row per (entry, leaf)."""
        npdt = numpy_dtype(dtype)
        mu = self.mu_
        # float32: mu as an unevaluated sum hi + lo, so x - mu keeps ~float64 accuracy for
        # narrow leaves (x - hi is exact by Sterbenz's lemma when x is near mu)
        mu_hi = mu.astype(npdt)
        cols = [mu_hi, (mu - mu_hi.astype(np.float64)).astype(npdt), self.sigma_.astype(npdt),
                (-np.log(self.sigma_) - LOG_SQRT_2PI - self.logz_).astype(npdt),
                *cell_bounds_to(self.lo_, self.hi_, npdt)]
        return {"table": torch_tensor(np.stack(cols, axis=1), dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        mu, mu_lo, sd, const, lo, hi = params["table"][leaf].unbind(-1)
        # +-inf: density 0 in every cell; outside the cell the difference is 0, which keeps
        # the unused branch's gradient finite
        inside = (x > lo) & (x <= hi) & torch.isfinite(x)
        diff = torch.where(inside, (x - mu) - mu_lo, torch.zeros_like(mu))
        z = diff / sd
        t = const - 0.5 * z * z
        return torch.where(inside, t, torch.full_like(t, -math.inf))

    def torch_sample_params(self, n_leaves, device):
        out = {k: torch_tensor(getattr(self, k + "_"), "float64", device)
               for k in ("mu", "sigma", "a", "b")}
        low = np.minimum(np.nextafter(self.lo_, np.inf), self.hi_)
        out["lo"] = torch_tensor(low, "float64", device)
        out["hi"] = torch_tensor(self.hi_, "float64", device)
        return out

    @staticmethod
    def torch_sample(params, leaf, u):
        """Inverse CDF in log space (as :meth:`sample`): ``mu + sigma z``, ``z`` truncated,
        kept inside the cell to the ulp."""
        import torch

        z = torch_std_truncnorm(params["a"][leaf], params["b"][leaf], u)
        x = params["mu"][leaf] + params["sigma"][leaf] * z
        return torch.minimum(torch.maximum(x, params["lo"][leaf]), params["hi"][leaf])


@parallel_kernel
def _truncnorm_log_prob(mu, sigma, lognorm, lo, hi, leaf, x):
    """Log density of N(mu, sigma) truncated to (lo, hi]; NaN x -> 0 (marginalised)."""
    out = np.empty(x.shape[0])
    for i in prange(x.shape[0]):
        v = x[i]
        if np.isnan(v):
            out[i] = 0.0
        else:
            k = leaf[i]
            if v > lo[k] and v <= hi[k]:
                z = (v - mu[k]) / sigma[k]
                out[i] = -0.5 * z * z - lognorm[k]
            else:
                out[i] = -np.inf
    return out


@njit(cache=True, nogil=True, inline="always")
def _clip(x, lo, hi):
    """``np.clip`` of one value (NaN propagates)."""
    if not np.isnan(x) and not x > lo:
        x = lo
    if not np.isnan(x) and not x < hi:
        x = hi
    return x


@njit(cache=True, nogil=True)
def _truncnorm_draws(ndtri, ndtri_exp_, leaf, u, table, params, tails):
    """Per draw: the standard draw :func:`~.normal_math.std_truncnorm_draw` (or
    :func:`~.normal_math.std_truncnorm_draw_log`, by the cell's mass) in the leaf's
    mirrored standardised cell, ``mu + sigma z`` (``sigma`` signed: mirrored back), kept in
    the leaf's cell to the ulp (``table``: :meth:`TruncNormalLeaf._finish`'s
    ``draw_table_``)."""
    mu_, lo_, hi_ = params
    out = np.empty(leaf.shape[0])
    for i in range(leaf.shape[0]):
        k = leaf[i]
        mass = table[1, k]
        if mass >= LINEAR_MASS:
            t = std_truncnorm_draw(ndtri, u[i], table[0, k], mass, table[2, k])
        else:  # (a cell far in a tail)
            t = std_truncnorm_draw_log(ndtri_exp_, u[i], tails[0, k], tails[1, k])
        x = mu_[k] + table[3, k] * t
        high = hi_[k]
        low = np.nextafter(lo_[k], np.inf)
        if not (low <= high or np.isnan(low)):  # np.minimum(low, high)
            low = high
        out[i] = _clip(x, low, high)
    return out
