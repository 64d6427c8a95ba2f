"""What a leaf model's declared packed form computes (:attr:`LeafModel.packed_form`), in
NumPy: the formulas the fused walks of :mod:`forestgen.inference` apply to the form's arrays
(:mod:`~forestgen.inference.leaf_factors`, :mod:`~forestgen.inference.interval_factors`), so
``check_leaf_model`` can hold a declaration against the model's own methods."""

from __future__ import annotations

import numpy as np

from forestgen.leaves.base import LeafModel
from forestgen.leaves.normal_math import LOG_SQRT_2PI, log_ndtr_diff
from forestgen.testing.fixtures import check_that, fail

FORM_ARRAYS = {"truncnorm": ("lo_", "hi_", "mu_", "sigma_", "lognorm_"),
               "uniform": ("lo_", "hi_"),
               "categorical": ("offset_", "code_", "prob_", "rest_", "allowed_", "base_")}
FORM_FACTORS = {"truncnorm": {"point", "interval"}, "uniform": {"point", "interval"},
                "categorical": {"point", "levels"}}


def _pmf(lm, leaf: np.ndarray) -> np.ndarray:
    """``[m, k]``: listed levels' ``prob_``, ``rest_ * base_`` on the other allowed levels."""
    k = len(lm.base_)
    allowed = np.unpackbits(lm.allowed_[leaf], axis=1, bitorder="little")[:, :k].astype(bool)
    out = np.where(allowed, lm.rest_[leaf][:, None] * lm.base_[None, :], 0.0)
    for i, lf in enumerate(leaf):
        s = slice(lm.offset_[lf], lm.offset_[lf + 1])
        out[i, lm.code_[s]] = lm.prob_[s]
    return out


def packed_log_prob(lm, leaf: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The point factor ``log g(x)`` of the declared form (``x`` without NaN)."""
    form = lm.packed_form
    with np.errstate(divide="ignore", invalid="ignore"):
        if form == "truncnorm":
            z = (x - lm.mu_[leaf]) / lm.sigma_[leaf]
            inside = (x > lm.lo_[leaf]) & (x <= lm.hi_[leaf])
            return np.where(inside, -0.5 * z * z - lm.lognorm_[leaf], -np.inf)
        if form == "uniform":
            lo, hi = lm.lo_[leaf], lm.hi_[leaf]
            return np.where((x > lo) & (x <= hi), -np.log(hi - lo), -np.inf)
        pmf = _pmf(lm, leaf)
        k = pmf.shape[1]
        c = x.astype(np.int64)
        ok = (c == x) & (c >= 0) & (c < k)
        cc = np.clip(c, 0, k - 1)
        allowed = np.unpackbits(lm.allowed_[leaf], axis=1, bitorder="little")[:, :k]
        ok &= allowed[np.arange(len(leaf)), cc].astype(bool)  # outside the cell: no support
        p = np.where(ok, pmf[np.arange(len(leaf)), cc], 0.0)
        fl = np.log(float(lm.floor)) if getattr(lm, "floor", 0) > 0 else -np.inf
        return np.where(ok, np.maximum(np.log(p), fl), -np.inf)  # no level: no support


def packed_log_prob_interval(lm, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """The interval factor ``log P(lo < X <= hi)`` of the declared (numeric) form."""
    a, b = np.maximum(lo, lm.lo_[leaf]), np.minimum(hi, lm.hi_[leaf])
    with np.errstate(divide="ignore", invalid="ignore"):
        if lm.packed_form == "uniform":
            return np.log(np.maximum(b - a, 0.0)) - np.log(lm.hi_[leaf] - lm.lo_[leaf])
        mu, sd = lm.mu_[leaf], lm.sigma_[leaf]
        logz = lm.lognorm_[leaf] - (np.log(sd) + LOG_SQRT_2PI)
        za, zb = (a - mu) / sd, (np.maximum(a, b) - mu) / sd
        out = log_ndtr_diff(za, zb) - logz
        covers = (lo <= lm.lo_[leaf]) & (hi >= lm.hi_[leaf])
        return np.where(~np.isfinite(logz), -np.inf, np.where(covers, 0.0, out))


def packed_log_prob_levels(lm, leaf: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """The level-set factor ``log P(X in levels)`` of the declared categorical form."""
    with np.errstate(divide="ignore"):
        return np.log((_pmf(lm, leaf) * levels[None, :]).sum(1))


def check_packed_form(fitted: LeafModel, leaves: np.ndarray, x: np.ndarray, name: str,
                      lo: np.ndarray | None = None, hi: np.ndarray | None = None,
                      levels: np.ndarray | None = None) -> None:
    """A fitted model's declared packed form: a known form for its kind of column, its
    arrays present, and each declared factor equal to the method's (to 1e-10 relative) at
    the probes ``(leaves, x)``, intervals ``(lo, hi]`` and level set ``levels``."""
    form, facs = type(fitted).packed_form, set(type(fitted).packed_factors)
    if form is None:
        return check_that(not facs, f"{name}.packed_factors",
                          f"declares factors {sorted(facs)} without a packed_form")
    if form not in FORM_ARRAYS:
        fail(f"{name}.packed_form", f"unknown form {form!r}; known: {sorted(FORM_ARRAYS)}")
    check_that((form == "categorical") == bool(fitted.discrete), f"{name}.packed_form",
               f"form {form!r} does not fit a {'discrete' if fitted.discrete else 'numeric'} "
               f"column")
    check_that(facs <= FORM_FACTORS[form] and "point" in facs, f"{name}.packed_factors",
               f"{sorted(facs)}: form {form!r} needs 'point' and offers "
               f"{sorted(FORM_FACTORS[form])}")
    if form == "truncnorm" and not hasattr(fitted, "lognorm_"):
        fitted.log_prob(np.zeros(0, np.int64), np.zeros(0))  # (built on first use)
    missing = [a for a in FORM_ARRAYS[form] if not hasattr(fitted, a)]
    check_that(not missing, f"{name}.packed_form",
               f"form {form!r} needs the fitted arrays {missing}")

    def same(a, b, what):
        with np.errstate(invalid="ignore"):
            gap = np.nanmax(np.abs(np.where(a == b, 0.0, a - b)), initial=0.0)
        check_that(np.allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True),
                   f"{name}.{what}", f"differs from the declared packed form {form!r} (max "
                   f"difference {gap:.3g})")

    ok = ~np.isnan(x)
    same(packed_log_prob(fitted, leaves[ok], x[ok]), fitted.log_prob(leaves[ok], x[ok]),
         "log_prob")
    if "interval" in facs and lo is not None:
        same(packed_log_prob_interval(fitted, leaves, lo, hi),
             fitted.log_prob_interval(leaves, lo, hi), "log_prob_interval")
    if "levels" in facs and levels is not None:
        same(packed_log_prob_levels(fitted, leaves, levels),
             fitted.log_prob_levels(leaves, levels), "log_prob_levels")
