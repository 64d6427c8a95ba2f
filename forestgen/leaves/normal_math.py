"""Numerically stable standard-normal helpers for truncated normals (log space throughout), in
numpy and (the ``torch_`` functions, for on-device sampling) in torch."""

from __future__ import annotations

import ctypes
import math

import numpy as np
from numba import njit
from numba.extending import get_cython_function_address
from scipy.special import log_ndtr, ndtri_exp

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def _scipy_scalar(name: str):
    """scipy's compiled scalar ``double name(double)`` (``scipy.special.cython_special``) as a
    function Numba kernels take as an argument and call (the same code as the ufunc)."""
    return ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double)(
        get_cython_function_address("scipy.special.cython_special", name))


#: ``Phi^-1`` and ``Phi^-1(exp(.))`` for Numba kernels (:func:`std_truncnorm_draw` and its log form)
NDTRI, NDTRI_EXP = _scipy_scalar("ndtri"), _scipy_scalar("ndtri_exp")


def log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x <= 0 (Mächler 2012)."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -np.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _lower_tail(a: np.ndarray, b: np.ndarray):
    """``(a, b]`` mirrored onto the lower tail where ``a > 0``: ``flip, lo, hi, log Phi(lo),
    log Phi(hi)`` (so CDF differences keep their precision far in the upper tail)."""
    flip = a > 0
    lo = np.where(flip, -b, a)
    hi = np.where(flip, -a, b)
    return flip, lo, hi, log_ndtr(lo), log_ndtr(hi)


def log_ndtr_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(Phi(b) - Phi(a)) for a <= b, accurate in both tails (-inf when a == b)."""
    return log_ndtr_diff_tails(a, b)[0]


def log_ndtr_diff_tails(a: np.ndarray, b: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log_ndtr_diff(a, b), log Phi(lo), log Phi(hi))``, the last two those of
    :func:`_lower_tail`: what :func:`std_truncnorm_from_tails` reads of ``(a, b]``."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    _, _, _, llo, lhi = _lower_tail(a, b)
    with np.errstate(invalid="ignore"):
        out = lhi + log1mexp(np.minimum(llo - lhi, 0.0))
    return np.where(b > a, out, -np.inf), llo, lhi


def sample_std_truncnorm(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw from N(0,1) truncated to (a, b] given uniforms ``u``; stable in tails."""
    flip, lo, hi, llo, lhi = _lower_tail(a, b)
    return std_truncnorm_from_tails(flip, lo, hi, llo, lhi, u)


def std_truncnorm_from_tails(flip, lo, hi, llo, lhi, u) -> np.ndarray:
    """:func:`sample_std_truncnorm` from ``(a, b]``'s :func:`_lower_tail` (so a table of
    leaves can keep ``log Phi`` of its cells' ends instead of evaluating them per draw)."""
    with np.errstate(divide="ignore"):
        logp = np.logaddexp(llo + np.log1p(-u), lhi + np.log(u))
    z = ndtri_exp(np.minimum(logp, 0.0))
    z = np.clip(z, lo, hi)
    return np.where(flip, -z, z)


def cdf_ends(logz: np.ndarray, lhi: np.ndarray, llo: np.ndarray) -> np.ndarray:
    """``[3, L]``: ``Phi(lo)``, the mass ``Phi(hi) - Phi(lo)`` and ``1 - Phi(hi)`` of cells
    ``(lo, hi]`` (as :func:`_lower_tail` mirrors them) from their logarithms ``llo``,
    ``logz`` (:func:`log_ndtr_diff_tails`) and ``lhi``; each to a few ulp (exp of an accurate
    logarithm; ``1 - Phi(hi)`` as ``-expm1``), a mass too small to draw from linearly
    (:data:`LINEAR_MASS`) included."""
    with np.errstate(invalid="ignore"):
        return np.stack([np.exp(llo), np.exp(logz), -np.expm1(lhi)])


#: the least cell mass :func:`std_truncnorm_draw` draws in linear probabilities; the
#: few cells of less mass (far in a tail) are drawn in log space
LINEAR_MASS = 1e-280


@njit(cache=True, nogil=True, inline="always")
def std_truncnorm_draw(ndtri, u, p_lo, mass, q_hi):
    """The inverse-CDF draw at ``u`` of N(0,1) truncated to a cell ``(lo, hi]`` on the lower
    tail (as :func:`_lower_tail` mirrors cells; the quantile function of
    :func:`sample_std_truncnorm`): ``z = Phi^-1(p)``, ``p = Phi(lo) + u m`` (``m`` the cell's
    mass), or where ``p > 1/2`` ``z = -Phi^-1(1 - Phi(hi) + (1 - u) m)`` (``1 - u`` is exact
    for ``rng.random``'s uniforms): sums of positive terms, from the cell's
    :func:`cdf_ends` ``p_lo, mass, q_hi``, so ``p`` keeps its relative precision down to the
    tail ends. For cells of mass at least :data:`LINEAR_MASS` (the others:
    :func:`std_truncnorm_draw_log`). ``z`` can leave the cell by rounding: the caller keeps
    its draws in their cells. ``ndtri``: :data:`NDTRI`."""
    p = p_lo + u * mass
    if p <= 0.5:
        return ndtri(p)
    return -ndtri(q_hi + (1.0 - u) * mass)


@njit(cache=True, nogil=True, inline="always")
def std_truncnorm_draw_log(ndtri_exp_, u, llo, lhi):
    """:func:`std_truncnorm_draw` in log space, from ``llo, lhi`` (``log Phi`` of the cell's
    ends), as :func:`std_truncnorm_from_tails` computes it (before its clipping), for cells of
    mass below :data:`LINEAR_MASS`. ``ndtri_exp_``: :data:`NDTRI_EXP`."""
    la = llo + np.log1p(-u)
    lb = lhi + np.log(u)
    if la == lb:  # np.logaddexp
        lp = la + 0.6931471805599453
    elif la > lb:
        lp = la + np.log1p(np.exp(lb - la))
    elif la < lb:
        lp = lb + np.log1p(np.exp(la - lb))
    else:
        lp = la - lb
    return ndtri_exp_(min(lp, 0.0))


def _torch_ndtri_log(logp):
    """``Phi^-1(exp(logp))`` for ``logp <= 0``; below ``exp(-700)`` (where ``exp`` underflows)
    by two fixed-point steps of ``z^2 = -2 logp - log(z^2) - log(2 pi)`` (Mills ratio)."""
    import torch

    z = torch.special.ndtri(torch.exp(logp))
    t = -2.0 * logp.clamp(max=-700.0)
    for _ in range(2):
        t = -2.0 * logp.clamp(max=-700.0) - torch.log(t) - math.log(2.0 * math.pi)
    return torch.where(logp < -700.0, -torch.sqrt(t.clamp(min=0.0)), z)


def torch_std_truncnorm(a, b, u):
    """:func:`sample_std_truncnorm` on float64 tensors (any device)."""
    import torch

    flip = a > 0
    lo = torch.where(flip, -b, a)
    hi = torch.where(flip, -a, b)
    llo = torch.special.log_ndtr(lo)
    lhi = torch.special.log_ndtr(hi)
    logp = torch.logaddexp(llo + torch.log1p(-u), lhi + torch.log(u))
    z = _torch_ndtri_log(logp.clamp(max=0.0))
    z = torch.minimum(torch.maximum(z, lo), hi)
    return torch.where(flip, -z, z)


def std_truncnorm_mean(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean of N(0,1) truncated to (a, b]: (phi(a) - phi(b)) / (Phi(b) - Phi(a)), log space."""
    logz = log_ndtr_diff(a, b)
    with np.errstate(over="ignore", invalid="ignore"):
        la = np.where(np.isfinite(a), -0.5 * a * a - LOG_SQRT_2PI, -np.inf)
        lb = np.where(np.isfinite(b), -0.5 * b * b - LOG_SQRT_2PI, -np.inf)
        m = np.exp(la - logz) - np.exp(lb - logz)
        return np.clip(np.where(np.isfinite(logz), m, 0.5 * (a + b)), a, b)
