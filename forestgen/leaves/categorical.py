"""Smoothed categorical leaves over the levels a leaf's cell allows (ARF spec §2.3, pitfall 9).

``p(v) = (c_v + m_v) / (N + sum of m_u over the allowed levels u)`` for allowed levels, 0 for
excluded ones, with pseudo-counts ``m_v = alpha + prior * g_v``: ``alpha`` is additive (Laplace)
smoothing and ``prior`` the strength of a Dirichlet prior centred on the column's marginal pmf
``g`` (the level shares of all fitting pairs). The prior shrinks a leaf's pmf toward the
marginal with weight ``prior / (N + prior)`` in a leaf of ``N`` rows (restricted to the levels
the cell allows): a 2-row leaf of an ARF no longer gives a level seen elsewhere the floor
probability, while large leaves keep their empirical shares (Cestnik's m-estimate; issue 11).
A leaf with no rows and no pseudo-counts falls back to uniform over its allowed levels.

Storage is proportional to what the leaves hold, not to leaves × levels: each leaf keeps the
probabilities of the levels seen in it (a ragged CSR list ``offset_``/``code_``/``prob_``), a
shared scale ``rest_`` for its other allowed levels, which get ``rest_[leaf] * base_[v]``
(``base_ = m / max m``, ``rest_ = max m / (N + sum m)``; ``base_ = 1`` and ``rest_ = 0``
without smoothing),
and its allowed-level set as packed bits ``allowed_`` (``k/8`` bytes); in memory it also keeps
each leaf's level total ``total_`` for sampling (derived at fit, not saved). A model with ``L``
leaves and ``P`` distinct (leaf, level) pairs in its fitting data takes
``12 P + L (32 + ceil(k / 8)) + 8 k + 24`` bytes per discrete column instead of ``8 L k``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from forestgen.leaves.base import LeafModel, torch_tensor
from forestgen.leaves.stats import LevelStats
from forestgen.parallel import parallel_kernel, sized
from forestgen.registry import register

#: arrays of the dense layout written by model-file formats 1 and 2 (still loaded)
LEGACY_ARRAYS = ("count_", "pmf_")


@register("leaf", "categorical")
class CategoricalLeaf(LeafModel):
    """Per-leaf pmf over level codes ``0..k-1`` (sparse: see the module docstring).

    Parameters
    ----------
    alpha : additive (Laplace) smoothing over the allowed levels (R arf default 0).
    prior : pseudo-count strength of the Dirichlet prior centred on the column's marginal pmf
        (default 0: none), or ``"auto"``: the value of :data:`PRIOR_GRID` with the largest
        leave-one-out log-likelihood of the fitting pairs in their own leaves (empirical
        Bayes; kept as ``prior_``, not saved); see the module docstring.
    floor : probability reported by :meth:`log_prob` for a level of the column with zero mass
        in the leaf (R arf's ``1e-20``, about -46 nats), so a level unseen in one leaf does not
        make a test row -inf; set ``floor=0`` for the honest ``-inf``. A value that is no level
        of the column (a code outside ``0..k-1``, a fraction) or a level the leaf's cell
        excludes (a declared level without training rows is in no cell) is outside the
        support: ``-inf`` whatever the floor (the learners' ``density_floor`` then scores the
        row). Sampling and conditioning use the exact pmf.
    """

    packed_form = "categorical"  # the fused walks read its arrays (LeafModel)
    packed_factors = frozenset({"point", "levels"})

    discrete = True
    fitted_arrays = ("shape_", "offset_", "code_", "prob_", "rest_", "allowed_", "count_",
                     "base_")
    #: fitted arrays that files written before they existed lack (defaults in set_param_arrays)
    optional_arrays = ("base_",)

    def __init__(self, *, alpha: float = 0.0, floor: float = 1e-20, prior: float = 0.0):
        self.alpha = alpha
        self.floor = floor
        self.prior = prior

    def _check_params(self) -> None:
        """``alpha >= 0``, ``prior >= 0`` or ``"auto"``, ``floor`` in ``[0, 1)`` (at fit, and
        on load: a model file's parameters are data)."""
        def number(v) -> bool:
            return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
                v, (bool, np.bool_)) and math.isfinite(v)
        if not (number(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be >= 0, got {self.alpha!r}")
        if not (self.prior == "auto" if isinstance(self.prior, str)
                else number(self.prior) and self.prior >= 0):
            raise ValueError(f"prior must be >= 0 or 'auto', got {self.prior!r}")
        if not (number(self.floor) and 0 <= self.floor < 1):
            raise ValueError(f"floor must be in [0, 1), got {self.floor!r}")

    def fit(self, x, leaf, cell, weight=None):
        self._check_params()
        auto = isinstance(self.prior, str)
        L, k = len(cell.lower), max(int(cell.n_levels), 1)
        allowed = None if cell.allowed is None else np.asarray(cell.allowed, bool)
        # distinct (leaf, level) pairs, sorted by leaf then level: the explicit entries
        e_leaf, e_code, cnt, count, off, marg = level_entries(x, leaf, k, allowed, weight, L)
        bits = np.ones((L, k), bool) if allowed is None else allowed.copy()
        n_allowed = _allowed_counts(bits)  # (a cell allowing no level: all levels, as before)
        self.count_ = count
        g = marg / marg.sum() if marg.sum() > 0 else marg
        prior = (loo_prior(cnt, e_leaf, e_code, count, self.alpha, g, k_allowed=n_allowed,
                           g_allowed=_allowed_sum(bits, g)) if auto else float(self.prior))
        self.prior_ = prior
        if self.alpha == 0 and prior == 0:
            empty = count <= 0  # no rows and no smoothing: uniform over the allowed levels
            rest = np.where(empty, 1.0 / n_allowed, 0.0)
            prob = cnt / np.where(empty, 1.0, count)[e_leaf]
            self._set(off, e_code, prob, rest, bits)
            return self
        m = float(self.alpha) + prior * g  # pseudo-counts (g: marginal pmf of the pairs)
        tot = count + _allowed_sum(bits, m)
        empty = tot <= 0
        # unlisted levels get rest_ * base_ with base_ = m / max(m): with alpha alone base_ = 1
        # and rest_ = alpha / tot, the layout of files written before the prior
        top = m.max() if m.max() > 0 else 1.0
        rest = top / np.where(empty, 1.0, tot)
        prob = (cnt + m[e_code]) / np.where(empty, 1.0, tot)[e_leaf]
        if empty.any():  # no rows and no pseudo-count on the allowed levels: uniform over them
            el, ec = np.nonzero(bits & empty[:, None])
            ep = 1.0 / n_allowed[el]
            rest = np.where(empty, 0.0, rest)
            order = np.lexsort((np.r_[e_code, ec], np.r_[e_leaf, el]))
            e_leaf, e_code, prob = (np.r_[e_leaf, el][order], np.r_[e_code, ec][order],
                                    np.r_[prob, ep][order])
        self._set(leaf_offsets(e_leaf, L), e_code, prob, rest, bits, m / top)
        return self

    def fit_column(self, x, leaves, cell, weight=None):
        """:meth:`fit` of the pairs tree by tree (see
        :meth:`~forestgen.leaves.base.LeafModel.fit_column`), the values read in place
        (:func:`level_entries` of ``leaves [B, n]``): the same fit, bit for bit."""
        if type(self).fit is not CategoricalLeaf.fit:
            return super().fit_column(x, leaves, cell, weight)
        return self.fit(x, leaves, cell, weight)

    def _set(self, offset, code, prob, rest, allowed_bool, base=None):
        self.base_ = (np.ones(allowed_bool.shape[1]) if base is None
                      else np.asarray(base, np.float64))
        self.offset_ = np.asarray(offset, np.int64)
        self.code_ = np.asarray(code, np.int32)
        self.prob_ = np.asarray(prob, np.float64)
        self.rest_ = np.asarray(rest, np.float64)
        self.allowed_ = _pack_rows(np.asarray(allowed_bool, np.bool_))
        self.shape_ = np.asarray(allowed_bool.shape, np.int64)  # (leaves, levels)
        self._finish()

    def _finish(self) -> None:
        """Derived per-leaf array (not saved): ``total_``, each leaf's level probabilities
        summed in code order (the sum :meth:`sample_uniform`'s inverse CDF scales its uniform
        by), so a draw walks the levels once."""
        self.total_ = _level_totals.serial(*self._tables(), self.n_levels)

    @classmethod
    def from_pmf(cls, pmf: np.ndarray, count: np.ndarray, **params) -> CategoricalLeaf:
        """A fitted leaf holding the dense ``[L, k]`` table ``pmf`` (its positive entries)."""
        lm = cls(**params)
        lm.count_ = np.asarray(count, np.float64)
        lm._set_dense(pmf)
        return lm

    def _set_dense(self, pmf: np.ndarray) -> None:
        """Hold the dense table ``pmf [L, k]`` (its positive entries, listed per leaf)."""
        pmf = np.asarray(pmf, np.float64)
        e_leaf, e_code = np.nonzero(pmf)
        self._set(leaf_offsets(e_leaf, len(pmf)), e_code,
                  pmf[e_leaf, e_code], np.zeros(len(pmf)), pmf > 0)

    def fit_stats(self, stats: LevelStats, cell) -> CategoricalLeaf:
        """Fit from merged :class:`LevelStats` (see :meth:`LeafModel.fit_stats`): each
        (leaf, level) count is one weighted pair, so the fit equals :meth:`fit` on the pairs."""
        k = max(int(cell.n_levels), 1)
        if stats.counts.shape != (len(cell.lower), k):
            raise ValueError(f"LevelStats of shape {stats.counts.shape}, the cells need "
                             f"{(len(cell.lower), k)}")
        leaf, code = np.nonzero(stats.counts)
        return self.fit(code.astype(np.float64), leaf, cell, stats.counts[leaf, code])

    def param_arrays(self):
        return {k: getattr(self, k) for k in self.fitted_arrays}

    def set_param_arrays(self, arrays):
        if set(arrays) == set(LEGACY_ARRAYS):  # dense layout of format 1-2 files
            src = type(self).from_pmf(arrays["pmf_"], arrays["count_"])
            arrays = src.param_arrays()
        for k, v in arrays.items():
            setattr(self, k, np.asarray(v))
        if "base_" not in arrays:  # files written before the marginal prior: uniform rest
            self.base_ = np.ones(int(self.shape_[1]))
        self._finish()
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        self._check_params()
        name = type(self).__name__
        k = max(int(n_levels), 1)
        if set(arrays) == set(LEGACY_ARRAYS):
            pmf, count = arrays["pmf_"], arrays["count_"]
            if pmf.ndim != 2 or pmf.shape != (n_leaves, k) or pmf.dtype.kind != "f":
                raise ValueError(f"{name}.pmf_ must be a float [{n_leaves}, {k}] table for a "
                                 f"column with {k} levels, got {pmf.dtype} {pmf.shape}")
            if not (np.isfinite(pmf).all() and (pmf >= 0).all()):
                raise ValueError(f"{name}.pmf_ must be finite and >= 0")
            _check_rows(name, "count_", count, n_leaves)
            return
        if not (set(self.fitted_arrays) - set(self.optional_arrays) <= set(arrays)
                <= set(self.fitted_arrays)):
            raise ValueError(f"{name} needs arrays {sorted(self.fitted_arrays)} (or the legacy "
                             f"{sorted(LEGACY_ARRAYS)}), got {sorted(arrays)}")
        shape = arrays["shape_"]
        if shape.dtype.kind != "i" or shape.tolist() != [n_leaves, k]:
            raise ValueError(f"{name}.shape_ must be [{n_leaves}, {k}] (leaves, levels) for a "
                             f"column with {k} levels, got {shape.tolist()}")
        base = arrays.get("base_")
        if base is not None and (base.dtype.kind != "f" or base.shape != (k,) or not (
                np.isfinite(base).all() and (base >= 0).all())):
            raise ValueError(f"{name}.base_ must be {k} finite floats >= 0 (one per level)")
        off, code, prob = arrays["offset_"], arrays["code_"], arrays["prob_"]
        rest, bits = arrays["rest_"], arrays["allowed_"]
        for nm, v in (("count_", arrays["count_"]), ("rest_", rest)):
            _check_rows(name, nm, v, n_leaves)
            if v.dtype.kind != "f" or not (np.isfinite(v).all() and (v >= 0).all()):
                raise ValueError(f"{name}.{nm} must be finite floats >= 0")
        if (off.dtype.kind != "i" or off.shape != (n_leaves + 1,) or (off.size and off[0] != 0)
                or np.any(np.diff(off) < 0) or off[-1] != len(code)):
            raise ValueError(f"{name}.offset_ must be {n_leaves + 1} non-decreasing offsets "
                             f"from 0 to the number of entries")
        if code.dtype.kind != "i" or code.ndim != 1 or np.any(code < 0) or np.any(code >= k):
            raise ValueError(f"{name}.code_ must hold level codes in 0..{k - 1}")
        starts = np.zeros(len(code), bool)
        starts[off[:-1][np.diff(off) > 0]] = True
        if np.any((np.diff(code) <= 0) & ~starts[1:]):
            raise ValueError(f"{name}.code_ must be increasing within each leaf")
        if (prob.dtype.kind != "f" or prob.shape != code.shape
                or not (np.isfinite(prob).all() and (prob >= 0).all())):
            raise ValueError(f"{name}.prob_ must be finite and >= 0, one per code_")
        if bits.dtype != np.uint8 or bits.shape != (n_leaves, (k + 7) // 8):
            raise ValueError(f"{name}.allowed_ must be uint8 [{n_leaves}, {(k + 7) // 8}] "
                             f"packed level bits, got {bits.dtype} {bits.shape}")

    @property
    def n_levels(self) -> int:
        return int(self.shape_[1])

    def _tables(self):
        return self.offset_, self.code_, self.prob_, self.rest_, self.allowed_, self.base_

    def log_prob(self, leaf, x):
        leaf = np.asarray(leaf, np.int64)
        return sized(_categorical_log_prob, len(leaf))(
            *self._tables(), leaf, np.asarray(x, np.float64), self.n_levels, float(self.floor))

    def log_prob_levels(self, leaf, levels):
        levels = np.asarray(levels, bool)
        lv2 = levels[None, :] if levels.ndim == 1 else levels
        p = _level_mass(*self._tables(), np.asarray(leaf, np.int64),
                        np.ascontiguousarray(lv2), levels.ndim == 1)
        with np.errstate(divide="ignore"):
            return np.log(p)

    def probs(self, leaf):
        return _dense_rows(*self._tables(), np.asarray(leaf, np.int64), self.n_levels)

    def support_size(self) -> np.ndarray:
        """Number of levels with positive probability in each leaf, ``[L]``."""
        allowed = np.unpackbits(self.allowed_, axis=1, count=self.n_levels, bitorder="little")
        seg = np.repeat(np.arange(len(self.rest_)), np.diff(self.offset_))
        pos = np.bincount(seg, weights=self.prob_ > 0, minlength=len(self.rest_))
        based = (allowed.astype(bool) & (self.base_ > 0)[None, :]).sum(1)
        listed = np.bincount(seg, weights=self.base_[self.code_] > 0,
                             minlength=len(self.rest_))
        return (pos + np.where(self.rest_ > 0, based - listed, 0)).astype(np.int64)

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        m = len(leaf)
        if levels is None:
            return self.sample_uniform(leaf, rng.random(m))
        u = rng.random(m)
        k = self.n_levels
        lv = np.asarray(levels, bool)
        shared = lv.ndim == 1
        lv = np.ascontiguousarray(lv[None, :] if shared else lv)
        return _categorical_sample(*self._tables(), np.asarray(leaf, np.int64), u, lv, shared,
                                   k)

    def sample_uniform(self, leaf, u):
        """:meth:`sample` (no level set) from the uniforms ``u``: the first level whose
        cumulative mass reaches ``u`` times the leaf's (``total_``, summed once)."""
        if getattr(self, "total_", None) is None:  # (a model unpickled from before total_)
            self._finish()
        leaf = np.asarray(leaf, np.int64)
        return sized(_categorical_sample_all, len(leaf))(
            *self._tables(), leaf, np.asarray(u, np.float64), self.n_levels, self.total_)

    def mean(self, leaf):
        return _categorical_mean(*self._tables(), np.asarray(leaf, np.int64), self.n_levels)

    def torch_params(self, dtype, device):
        # the torch hook gathers from a dense [L, k] log table (built here, once per call)
        pmf = self.probs(np.arange(len(self.rest_)))
        with np.errstate(divide="ignore"):
            tab = np.log(np.maximum(pmf, self.floor)) if self.floor > 0 else np.log(pmf)
        allowed = np.unpackbits(self.allowed_, axis=1, count=self.n_levels, bitorder="little")
        tab[allowed == 0] = -np.inf  # outside the leaf's cell, as log_prob
        return {"table": torch_tensor(tab, dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        tab = params["table"]
        k = tab.shape[1]
        x = x.detach()
        valid = (x >= 0) & (x < k) & (x == torch.floor(x))
        code = torch.where(valid, x, torch.zeros_like(x)).long()
        t = tab[leaf, code]
        return torch.where(valid, t, torch.full_like(t, -torch.inf))


#: candidate strengths of ``prior="auto"`` (0 is not one: a level seen once in its leaf would
#: score 0 out of its own leaf)
PRIOR_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


def loo_prior(cnt: np.ndarray, e_leaf: np.ndarray, e_code: np.ndarray, count: np.ndarray,
              alpha: float, g: np.ndarray, k_allowed: np.ndarray,
              g_allowed: np.ndarray) -> float:
    """The strength ``a`` in :data:`PRIOR_GRID` maximising the leave-one-out log-likelihood
    ``sum c log((c - 1 + alpha + a g_v) / (N - 1 + alpha K + a G))`` over the (leaf, level)
    entries ``c`` of leaves of ``N`` pairs, ``K`` allowed levels of marginal mass ``G``."""
    if cnt.size == 0:
        return PRIOR_GRID[0]
    num0 = np.maximum(cnt - 1.0, 0.0) + alpha
    den0 = np.maximum(count[e_leaf] - 1.0, 0.0) + alpha * k_allowed[e_leaf]
    best, best_ll = PRIOR_GRID[0], -np.inf
    for a in PRIOR_GRID:
        with np.errstate(divide="ignore"):
            ll = float(np.sum(cnt * (np.log(num0 + a * g[e_code])
                                     - np.log(den0 + a * g_allowed[e_leaf]))))
        if ll > best_ll:
            best, best_ll = a, ll
    return best


def _allowed_sum(bits: np.ndarray, m: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """``bits @ m`` for a bool ``[L, k]`` mask, in row chunks (no float copy of the mask)."""
    return np.concatenate([bits[i:i + chunk] @ m for i in range(0, len(bits), chunk)]
                          or [np.zeros(0)])


def _check_rows(name: str, nm: str, v: np.ndarray, n_leaves: int) -> None:
    if not isinstance(v, np.ndarray) or v.shape != (n_leaves,):
        raise ValueError(f"{name}.{nm} must have {n_leaves} rows (one per leaf), got shape "
                         f"{getattr(v, 'shape', None)}")
    if v.dtype.kind == "f" and np.isnan(v).any():
        raise ValueError(f"{name}.{nm} holds NaN")


# ------------------------------------------------------------------------------- kernels
@njit(cache=True, inline="always")
def level_allowed(bits, leaf, c):
    """Whether level ``c`` is in leaf ``leaf``'s allowed set (bit ``c`` of its mask row)."""
    return (bits[leaf, c >> 3] >> (c & 7)) & 1


@njit(cache=True, inline="always")
def level_prob(offset, code, prob, rest, bits, base, leaf, c):
    """p(level c | leaf) from the sparse tables (binary search among the leaf's listed
    levels); used by Numba kernels of other modules too (rounded normal, leaf search)."""
    lo, hi = offset[leaf], offset[leaf + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if code[mid] < c:
            lo = mid + 1
        else:
            hi = mid
    if lo < offset[leaf + 1] and code[lo] == c:
        return prob[lo]
    return rest[leaf] * base[c] if level_allowed(bits, leaf, c) else 0.0


@parallel_kernel
def _categorical_log_prob(offset, code, prob, rest, bits, base, leaf, x, k, floor):
    """log p(x | leaf); NaN -> 0 (marginalised); an allowed level of mass at most ``floor``
    -> log floor; a level the leaf's cell excludes (outside the cell, e.g. a declared level
    without training rows, :func:`~forestgen.data.support.restrict_levels`) and codes outside
    0..k-1 or non-integer (no level: outside the support) -> -inf."""
    out = np.empty(x.shape[0])
    log_floor = np.log(floor) if floor > 0 else -np.inf
    for i in prange(x.shape[0]):
        v = x[i]
        if np.isnan(v):
            out[i] = 0.0
        else:
            c = int(v)
            if c == v and 0 <= c < k and level_allowed(bits, leaf[i], c):
                p = level_prob(offset, code, prob, rest, bits, base, leaf[i], c)
                out[i] = np.log(p) if p > floor else log_floor
            else:
                out[i] = -np.inf
    return out


@parallel_kernel
def _level_mass(offset, code, prob, rest, bits, base, leaf, levels, shared):
    """P(X in levels[i] | leaf[i]) (``levels`` is ``[1, k]`` when ``shared``)."""
    m = leaf.shape[0]
    k = levels.shape[1]
    out = np.empty(m)
    for i in prange(m):
        r = np.int64(0) if shared else np.int64(i)
        lf = leaf[i]
        s = 0.0
        if rest[lf] > 0:
            for c in range(k):
                if levels[r, c]:
                    s += level_prob(offset, code, prob, rest, bits, base, lf, c)
        else:
            for e in range(offset[lf], offset[lf + 1]):
                if levels[r, code[e]]:
                    s += prob[e]
        out[i] = s
    return out


@parallel_kernel
def _dense_rows(offset, code, prob, rest, bits, base, leaf, k):
    """The pmf of each queried leaf as dense rows ``[m, k]``."""
    m = leaf.shape[0]
    out = np.zeros((m, k))
    for i in prange(m):
        lf = leaf[i]
        if rest[lf] > 0:
            for c in range(k):
                if level_allowed(bits, lf, c):
                    out[i, c] = rest[lf] * base[c]
        for e in range(offset[lf], offset[lf + 1]):
            out[i, code[e]] = prob[e]
    return out


@parallel_kernel
def _categorical_mean(offset, code, prob, rest, bits, base, leaf, k):
    m = leaf.shape[0]
    out = np.empty(m)
    for i in prange(m):
        lf = leaf[i]
        s = 0.0
        for c in range(k):
            s += c * level_prob(offset, code, prob, rest, bits, base, lf, c)
        out[i] = s
    return out


@njit(cache=True, inline="always")
def _next_level_prob(offset, code, prob, rest, bits, base, leaf, c, e):
    """``(p(level c | leaf), e')`` for levels visited in increasing code order: ``e`` points
    at the leaf's first listed level not below ``c`` (its listed codes are sorted), so a walk
    over all levels costs one pass instead of a binary search per level (same values as
    :func:`level_prob`)."""
    end = offset[leaf + 1]
    while e < end and code[e] < c:
        e += 1
    if e < end and code[e] == c:
        return prob[e], e + 1
    return (rest[leaf] * base[c] if level_allowed(bits, leaf, c) else 0.0), e


@parallel_kernel
def _categorical_sample(offset, code, prob, rest, bits, base, leaf, u, levels, shared, k):
    """Inverse-CDF draw over the levels in code order: the first level whose cumulative mass
    (restricted to ``levels``) reaches ``u * total``."""
    m = leaf.shape[0]
    out = np.empty(m)
    for i in prange(m):
        r = np.int64(0) if shared else np.int64(i)
        lf = leaf[i]
        tot = 0.0
        e = offset[lf]
        for c in range(k):
            p, e = _next_level_prob(offset, code, prob, rest, bits, base, lf, c, e)
            if levels[r, c]:
                tot += p
        target = u[i] * tot
        cdf = 0.0
        pick = k - 1
        e = offset[lf]
        for c in range(k):
            p, e = _next_level_prob(offset, code, prob, rest, bits, base, lf, c, e)
            if levels[r, c]:
                cdf += p
            if cdf >= target:
                pick = c
                break
        out[i] = pick
    return out


@parallel_kernel
def _level_totals(offset, code, prob, rest, bits, base, k):
    """Each leaf's level probabilities summed in code order (:func:`_categorical_sample`'s
    total over all levels, the same sums in the same order). Run as its serial twin: a few
    ms at 200k leaves, less than loading the parallel kernel on its first use in a process."""
    L = offset.shape[0] - 1
    out = np.empty(L)
    for lf in prange(L):
        tot = 0.0
        e = offset[lf]
        for c in range(k):
            p, e = _next_level_prob(offset, code, prob, rest, bits, base, lf, c, e)
            tot += p
        out[lf] = tot
    return out


@parallel_kernel
def _categorical_sample_all(offset, code, prob, rest, bits, base, leaf, u, k, total):
    """:func:`_categorical_sample` over all levels (the same sums in the same order), the
    leaves' totals read from ``total`` (:func:`_level_totals`): one walk over the levels,
    up to the one drawn."""
    m = leaf.shape[0]
    out = np.empty(m)
    step = 4096
    for ch in prange((m + step - 1) // step):
        for i in range(ch * step, min(m, (ch + 1) * step)):
            lf = leaf[i]
            target = u[i] * total[lf]
            cdf = 0.0
            pick = k - 1
            e = offset[lf]
            for c in range(k):
                p, e = _next_level_prob(offset, code, prob, rest, bits, base, lf, c, e)
                cdf += p
                if cdf >= target:
                    pick = c
                    break
            out[i] = pick
    return out


@njit(cache=True, nogil=True)
def _level_keys(x, leaf, k, allowed, use_allowed, w, weighted):
    """Keys ``leaf * k + code`` of the pairs ``(x[i], leaf[t, i])`` (order ``t`` then ``i``)
    whose value ``x`` is not NaN, whose code (``x`` truncated, as ``astype(int64)``) is in
    ``0..k-1`` and, with ``use_allowed``, whose level ``allowed[leaf]`` admits; in pair
    order, with their weights ``w[t, i]`` when ``weighted``."""
    B, n = leaf.shape
    keys = np.empty(B * n, np.int64)
    ws = np.empty(B * n if weighted else 0)
    m = 0
    for t in range(B):
        for i in range(n):
            v = x[i]
            if np.isnan(v):
                continue
            c = np.int64(v)
            if c < 0 or c >= k:
                continue
            lf = np.int64(leaf[t, i])
            if use_allowed and not allowed[lf, c]:
                continue
            keys[m] = lf * k + c
            if weighted:
                ws[m] = w[t, i]
            m += 1
    return keys[:m], ws[:m]


def level_entries(x, leaf, k: int, allowed: np.ndarray | None, weight: np.ndarray | None,
                  L: int, dense: bool | None = None) -> tuple:
    """The distinct (leaf, level) pairs of the values ``x`` (level codes) in leaves ``leaf``,
    sorted by leaf then level, skipping NaN values, codes outside ``0..k-1`` and levels
    outside the leaf's ``allowed [L, k]`` set (those carry no mass): ``e_leaf, e_code``
    (int64), their (weighted) counts, each leaf's total, :func:`leaf_offsets` and the level
    totals, every sum in pair order then key order. ``dense`` (default: when the ``[L, k]``
    table is at most a few times the pairs): in one pass into a dense table
    (:func:`_dense_level_counts`), else from the keys sorted (:func:`pair_counts`); both give
    the same arrays, bit for bit. ``leaf [B, n]`` with ``x [n]`` (weights ``[B, n]``): the
    pairs ``(x[i], leaf[t, i])`` tree by tree, a column's values in the leaves of ``B``
    trees read in place (the same arrays as ``np.tile(x, B)``, ``leaf.ravel()``)."""
    x = np.asarray(x, np.float64)
    leaf = np.asarray(leaf)
    if leaf.ndim == 1:  # a list of pairs: one row of pairs
        leaf = leaf.reshape(1, -1)
        if weight is not None:
            weight = np.asarray(weight, float).reshape(1, -1)
    if leaf.shape[1] != len(x) or (weight is not None and np.shape(weight) != leaf.shape):
        raise ValueError(f"level_entries: leaves [B, {len(x)}] and weights of their shape "
                         f"expected, got {leaf.shape} and {np.shape(weight)}")
    args = (x, leaf, k,
            np.ones((1, 1), bool) if allowed is None else allowed, allowed is not None,
            np.empty((0, 0)) if weight is None else np.asarray(weight, float),
            weight is not None)
    if dense is None:
        dense = L * k <= max(4 * leaf.size, 1 << 16)
    if dense:
        return _dense_level_counts(*args, L)
    flat, w = _level_keys(*args)
    key, cnt = pair_counts(flat, L * k, None if weight is None else w)
    e_leaf, e_code = key // k, key % k
    return (e_leaf, e_code, cnt,
            np.bincount(e_leaf, weights=cnt, minlength=L).astype(np.float64),
            leaf_offsets(e_leaf, L), np.bincount(e_code, weights=cnt, minlength=k))


@njit(cache=True, nogil=True)
def _dense_level_counts(x, leaf, k, allowed, use_allowed, w, weighted, L):
    """:func:`_level_keys` and the dense branch of :func:`pair_counts` in one pass (the
    weights of each key summed in pair order into a dense ``[L * k]`` table), then the
    table's positive entries in key order: ``e_leaf, e_code`` (int64), their counts, each
    leaf's total (the entries' counts summed in key order, as ``np.bincount(e_leaf,
    weights=cnt)``), :func:`leaf_offsets` and the level totals (``np.bincount(e_code,
    weights=cnt)``: summed in key order) -- the same numbers, bit for bit."""
    dense = np.zeros(L * k)
    for t in range(leaf.shape[0]):
        for i in range(leaf.shape[1]):
            v = x[i]
            if np.isnan(v):
                continue
            c = np.int64(v)
            if c < 0 or c >= k:
                continue
            lf = np.int64(leaf[t, i])
            if use_allowed and not allowed[lf, c]:
                continue
            dense[lf * k + c] += w[t, i] if weighted else 1.0
    m = 0
    for q in range(L * k):
        m += np.int64(dense[q] > 0.0)
    e_leaf = np.empty(m, np.int64)
    e_code = np.empty(m, np.int64)
    cnt = np.empty(m)
    count = np.zeros(L)
    off = np.zeros(L + 1, np.int64)
    marg = np.zeros(k)
    e = 0
    for lf in range(L):
        for c in range(k):
            v = dense[lf * k + c]
            if v > 0.0:
                e_leaf[e] = lf
                e_code[e] = c
                cnt[e] = v
                count[lf] += v
                marg[c] += v
                e += 1
        off[lf + 1] = e
    return e_leaf, e_code, cnt, count, off, marg


@njit(cache=True, nogil=True)
def _allowed_counts(bits):
    """The number of allowed levels of each row of the bool ``bits [L, k]`` (int64), after
    a row allowing none is set to allow all (in place)."""
    L, k = bits.shape
    out = np.empty(L, np.int64)
    for i in range(L):
        t = 0
        for c in range(k):
            t += np.int64(bits[i, c])
        if t == 0:
            for c in range(k):
                bits[i, c] = True
            t = k
        out[i] = t
    return out


@njit(cache=True, nogil=True)
def _pack_rows(bits):
    """``np.packbits(bits, axis=1, bitorder="little")`` of a bool ``[L, k]`` array."""
    L, k = bits.shape
    nb = (k + 7) // 8
    out = np.zeros((L, nb), np.uint8)
    for i in range(L):
        for c in range(k):
            out[i, c >> 3] |= np.uint8(bits[i, c]) << np.uint8(c & 7)
    return out


def leaf_offsets(e_leaf: np.ndarray, n_leaves: int) -> np.ndarray:
    """Where each leaf's entries start in the sorted leaf ids ``e_leaf`` (in ``0..L-1``),
    ``[L + 1]`` int64: ``np.searchsorted(e_leaf, np.arange(L + 1))``, from the counts per
    leaf (linear, no binary search per leaf)."""
    out = np.zeros(n_leaves + 1, np.int64)
    np.cumsum(np.bincount(e_leaf, minlength=n_leaves), out=out[1:])
    return out


def pair_counts(flat: np.ndarray, size: int, weight: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys ``flat`` (in ``0..size-1``) holding positive (weighted) counts, in
    increasing order, and those counts (float64): zero-weight keys (out-of-bag rows) are left
    out. Counted in a dense table when ``size`` is at most a few times the number of keys
    (linear time), else by sorting; both sum each key's weights in input order (same bits)."""
    if size <= max(4 * len(flat), 1 << 16):
        dense = np.bincount(flat, weights=weight, minlength=size)
        key = np.flatnonzero(dense > 0)
        return key, dense[key].astype(np.float64)
    key, inv = np.unique(flat, return_inverse=True)
    cnt = np.bincount(inv, weights=weight, minlength=len(key)).astype(np.float64)
    if weight is not None:
        nz = cnt > 0
        key, cnt = key[nz], cnt[nz]
    return key, cnt
