"""Numerically stable standard-normal helpers for truncated normals (log space throughout), in
numpy and (the ``torch_`` functions, for on-device sampling) in torch."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtri_exp

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


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
