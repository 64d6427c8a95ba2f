"""Per-tree row weights: bootstrap, subsample or all rows, optionally stratified by class."""

from __future__ import annotations

import numpy as np
from numba import njit

from forestgen.tree.node_ops import bounded_int_bits


@njit(cache=True, nogil=True)
def _bootstrap_counts(rng, n, m):
    """``np.bincount(rng.integers(0, n, m), minlength=n)`` as float64 for ``1 <= n <= 2**32``:
    the same draws from the same stream (:func:`~forestgen.tree.node_ops.bounded_int_bits`),
    counted as they are drawn, without the ``[m]`` array of draws."""
    # counted in bytes (an 8x smaller table for the random increments: at 2M rows 2 MB, not
    # 16 MB of float64); each count that wraps past 255 is listed (at most m // 256 of
    # them, without a branch) and adds 256 back
    c = np.zeros(n, np.uint8)
    wraps = np.empty(m // 256 + 1, np.int64)
    k = 0
    bitgen = rng.bit_generator  # (read once, not per draw)
    for _ in range(m):
        i = bounded_int_bits(bitgen, n)
        v = np.uint8(c[i] + 1)  # (wraps at 256)
        c[i] = v
        wraps[k] = i
        k += np.int64(v == 0)
    w = np.empty(n)
    for i in range(n):
        w[i] = np.float64(c[i])
    for q in range(k):
        w[wraps[q]] += 256.0
    return w


def draw_weights(
    n: int,
    rng: np.random.Generator,
    *,
    mode: str = "bootstrap",
    fraction: float = 1.0,
    strata: np.ndarray | None = None,
) -> np.ndarray:
    """Row weights (float64 [n]) for one tree; weight 0 means out of bag.

    ``bootstrap`` draws ``round(fraction * n)`` rows with replacement (weights are counts),
    ``subsample`` without replacement, ``none`` keeps every row once. With ``strata``, each
    stratum is resampled separately so class proportions are preserved exactly.
    """
    if mode not in ("bootstrap", "subsample", "none"):
        raise ValueError(f"sampling must be 'bootstrap', 'subsample' or 'none', got {mode!r}")
    if not 0.0 < fraction <= (10.0 if mode == "bootstrap" else 1.0):
        raise ValueError(f"sample fraction {fraction} out of range")
    if mode == "none":
        return np.ones(n)
    if strata is None and n and mode == "bootstrap":  # one group, all rows: the counts as is
        m = max(1, int(round(fraction * n)))
        if n <= 2**32:
            return _bootstrap_counts(rng, n, m)
        return np.bincount(rng.integers(0, n, m), minlength=n).astype(np.float64)
    groups = [np.arange(n)] if strata is None else [np.nonzero(strata == s)[0]
                                                      for s in np.unique(strata)]
    w = np.zeros(n)
    for g in groups:
        m = max(1, int(round(fraction * len(g))))
        if mode == "bootstrap":
            w[g] = np.bincount(rng.integers(0, len(g), m), minlength=len(g)) if len(g) else 0
        else:
            w[rng.choice(g, size=min(m, len(g)), replace=False)] = 1.0
    return w
