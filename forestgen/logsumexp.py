"""The one log-sum-exp of forestgen, in every form the code needs.

Every form follows one rule for the special values, a logsumexp's own:

* a NaN term makes the result NaN (it is never dropped: a NaN score is a bug upstream and must
  show);
* otherwise a ``+inf`` term makes the result ``+inf``;
* otherwise ``-inf`` terms add nothing, and no terms (or only ``-inf`` ones) give ``-inf``;
* otherwise ``m + log(sum(exp(v - m)))`` with ``m`` the largest term.

Forms:

* :func:`logsumexp` / :func:`logmeanexp` — NumPy arrays, over an axis (SciPy's);
* :func:`segment_logsumexp` — CSR segments ``v[ptr[i]:ptr[i+1]]`` (a Numba kernel over rows);
* :func:`lse_push` / :func:`lse_merge` / :func:`lse_value` — the streaming form for Numba
  kernels: a running ``(max, sum of exp(term - max))`` pair updated one term (or one other
  running pair) at a time, in the order the kernel visits them (so the result depends on that
  order only, never on threads);
* :func:`torch_logsumexp` / :func:`torch_segment_logsumexp` — torch tensors, differentiable,
  with a zero gradient where every term is ``-inf``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy.special import logsumexp as _scipy_logsumexp

from forestgen.parallel import parallel_kernel

__all__ = ["logmeanexp", "logsumexp", "lse_merge", "lse_push", "lse_value", "segment_logsumexp",
           "torch_logsumexp", "torch_segment_logsumexp"]


def logsumexp(v, axis: int | None = None) -> np.ndarray | float:
    """``log(sum(exp(v)))`` over ``axis`` (all entries when ``None``). The NumPy form is
    :func:`scipy.special.logsumexp` (which follows the rule above and separates the largest
    term for accuracy); this name is the one the package calls."""
    out = _scipy_logsumexp(np.asarray(v, np.float64), axis=axis)
    return float(out) if axis is None else out


def logmeanexp(v, axis: int | None = None) -> np.ndarray | float:
    """``log(mean(exp(v)))`` over ``axis``."""
    v = np.asarray(v, np.float64)
    n = v.size if axis is None else v.shape[axis]
    return logsumexp(v, axis) - math.log(max(n, 1))


@njit(cache=True, nogil=True, inline="always")
def lse_merge(mx, acc, v, vacc):
    """Merge the running logsumexp ``(v, vacc)`` into ``(mx, acc)`` (``mx`` the largest term so
    far, ``acc`` the sum of ``exp(term - mx)``; start from ``(-inf, 0)``). Returns the new
    ``(mx, acc)``, the weight ``w = exp(v - mx)`` of the merged sums relative to the new
    ``mx`` (``-1`` when they add nothing: ``v = -inf``, or the result is already NaN /
    ``+inf``) and the factor ``scale`` by which sums weighted like ``acc`` must be
    multiplied: a kernel keeping weighted sums ``s`` next to ``acc`` updates them as
    ``s * scale + w * s_v``."""
    if np.isnan(mx):
        return mx, acc, -1.0, 1.0
    if np.isnan(v):
        return v, acc, -1.0, 1.0
    if mx == np.inf or v == -np.inf:
        return mx, acc, -1.0, 1.0
    if v == np.inf:
        return v, acc, -1.0, 1.0
    if v > mx:
        scale = np.exp(mx - v)
        return v, acc * scale + vacc, 1.0, scale
    w = np.exp(v - mx)
    return mx, acc + w * vacc, w, 1.0


@njit(cache=True, nogil=True, inline="always")
def lse_push(mx, acc, v):
    """Add one term ``v`` to a running logsumexp ``(mx, acc)``: :func:`lse_merge` of
    ``(v, 1)``."""
    return lse_merge(mx, acc, v, 1.0)


@njit(cache=True, nogil=True, inline="always")
def lse_value(mx, acc):
    """The logsumexp of a running ``(mx, acc)`` pair (:func:`lse_push`)."""
    if np.isfinite(mx):
        return mx + np.log(acc)
    return mx


def segment_logsumexp(ptr: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Logsumexp of ``v [P]`` or ``v [P, K]`` (per column) over CSR segments
    ``v[ptr[i]:ptr[i+1]]``: ``[n]`` or ``[n, K]``, ``-inf`` for empty segments."""
    v = np.asarray(v, np.float64)
    v2 = np.ascontiguousarray(v).reshape(len(v), int(np.prod(v.shape[1:], dtype=np.int64)))
    out = _segment_logsumexp(np.asarray(ptr, np.int64), v2)
    return out.reshape((len(ptr) - 1,) + v.shape[1:])


@parallel_kernel
def _segment_logsumexp(ptr, v):
    n = len(ptr) - 1
    K = v.shape[1]
    out = np.empty((n, K))
    for i in prange(n):
        for c in range(K):
            mx = -np.inf
            for p in range(ptr[i], ptr[i + 1]):
                if v[p, c] > mx or np.isnan(v[p, c]):
                    mx = v[p, c]
                    if np.isnan(mx):
                        break
            if not np.isfinite(mx):
                out[i, c] = mx  # empty or all -inf: -inf; a NaN or +inf term: that
                continue
            s = 0.0
            for p in range(ptr[i], ptr[i + 1]):
                s += np.exp(v[p, c] - mx)
            out[i, c] = mx + np.log(s)
    return out


def torch_logsumexp(s, dim: int = -1):
    """Differentiable logsumexp of a tensor over ``dim``."""
    import torch

    if s.shape[dim] == 0:
        return torch.full(s.sum(dim).shape, -math.inf, dtype=s.dtype, device=s.device)
    m = s.detach().amax(dim, keepdim=True)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    tot = torch.exp(s - shift).sum(dim)
    ok = tot > 0
    val = torch.log(torch.where(ok, tot, torch.ones_like(tot))) + shift.squeeze(dim)
    m = m.squeeze(dim)
    return torch.where(torch.isfinite(m), val, m)


def torch_segment_logsumexp(s, rows, n: int):
    """Differentiable logsumexp of the terms ``s [P]`` of each row ``rows [P]`` (``[n]``)."""
    import torch

    m = torch.full((n,), -math.inf, dtype=s.dtype, device=s.device)
    m = m.scatter_reduce(0, rows, s.detach(), reduce="amax")
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    tot = torch.zeros(n, dtype=s.dtype, device=s.device).index_add(
        0, rows, torch.exp(s - shift[rows]))
    ok = tot > 0
    val = torch.log(torch.where(ok, tot, torch.ones_like(tot))) + shift
    nan = torch.zeros(n, dtype=s.dtype, device=s.device).index_add(
        0, rows, torch.isnan(s.detach()).to(s.dtype)) > 0
    special = torch.where(nan, torch.full_like(m, math.nan), m)
    return torch.where(torch.isfinite(special), val, special)
