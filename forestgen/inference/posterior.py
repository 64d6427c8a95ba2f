"""Leaf posteriors under evidence, pooled over all leaves of all trees (ARF spec §3).

For evidence ``e`` on columns ``E`` the posterior of leaf ``k`` is
``w_k(e) ∝ pi_k * prod_{j in E} g_{k,j}`` with ``g`` a density (numeric equality), a truncated
CDF difference (interval) or a summed pmf (level set). Only leaves whose cell meets the
evidence can have ``w_k > 0``; :meth:`ForestArrays.reach` enumerates them, so each row's
posterior is a CSR segment ``(ptr, leaf, logw)`` that is usually far smaller than the forest.
Rows are processed in chunks so the number of (row, leaf) pairs stays within ``budget``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numba import prange

from forestgen.inference.conditions import Evidence
from forestgen.logsumexp import segment_logsumexp
from forestgen.parallel import parallel_kernel
from forestgen.tree.arrays import in_leaf_order

PAIR_BUDGET = 2_000_000  # (row, leaf) pairs per chunk


@dataclass
class Chunk:
    """Posterior of a chunk of evidence rows ``rows`` (indices into the evidence)."""

    rows: np.ndarray  # int64 [c]
    ptr: np.ndarray  # int64 [c+1]
    leaf: np.ndarray  # int64 [P]
    prow: np.ndarray  # int64 [P], local row of each pair
    logw: np.ndarray  # float64 [P], unnormalised log posterior
    lognorm: np.ndarray  # float64 [c], log p(evidence) (density x probability)

    def weights(self) -> np.ndarray:
        """Normalised posterior weights per pair (rows with zero evidence probability get 0)."""
        norm = np.where(np.isfinite(self.lognorm), self.lognorm, 0.0)
        with np.errstate(invalid="ignore"):
            w = np.exp(self.logw - norm[self.prow])
        return np.where(np.isfinite(self.lognorm)[self.prow], w, 0.0)


def evidence_log_factor(model, ev: Evidence, prow: np.ndarray, leaf: np.ndarray,
                        rows: np.ndarray, skip: int | None = None) -> np.ndarray:
    """``sum_{j in E} log g_{leaf, j}`` for each (row, leaf) pair (``rows[prow]`` = evidence row).

    ``skip``: a column whose evidence is left out of the product.
    """
    out = np.zeros(len(leaf))
    erow = rows[prow]
    for j, lm in enumerate(model.leaf_models_):
        if j == skip:
            continue
        pt = ev.point[rows, j]
        if not np.isnan(pt).all():
            out += lm.log_prob(leaf, pt[prow])
        act = ~np.isnan(ev.lo[rows, j])
        if act.any():
            sel = np.flatnonzero(act[prow])
            out[sel] += lm.log_prob_interval(leaf[sel], ev.lo[erow[sel], j], ev.hi[erow[sel], j])
        if j in ev.sets:
            a, mk = ev.sets[j]
            if a[rows].any():
                sel = np.flatnonzero(a[erow])
                out[sel] += level_factor(lm, leaf[sel], mk, erow[sel])
    return out


def level_factor(lm, leaf: np.ndarray, mask: np.ndarray, erow: np.ndarray) -> np.ndarray:
    """``log P(X in mask[erow] | leaf)`` in sub-chunks (the masks are ``[pairs, k]``)."""
    out = np.empty(len(leaf))
    if len(leaf) == 0:
        return out
    u = np.unique(erow)
    if (mask[u] == mask[u[0]]).all():  # one shared set (dict conditions)
        return lm.log_prob_levels(leaf, mask[erow[0]])
    step = max(1, PAIR_BUDGET // max(mask.shape[1], 1))
    for s in range(0, len(leaf), step):
        sl = slice(s, s + step)
        out[sl] = lm.log_prob_levels(leaf[sl], mask[erow[sl]])
    return out


def iter_posterior(model, ev: Evidence, rows: np.ndarray | None = None,
                   budget: int | None = None, skip: int | None = None) -> Iterator[Chunk]:
    """Yield :class:`Chunk` posteriors covering ``rows`` (default: all evidence rows).

    Rows are visited in order of decreasing amount of evidence (fewest reachable leaves first)
    and the chunk size adapts to the observed number of pairs per row. ``skip``: a column whose
    evidence neither routes nor weighs (e.g. a prediction target).
    """
    model.require_normalised("leaf posterior")
    budget = PAIR_BUDGET if budget is None else budget
    rows = np.arange(ev.m) if rows is None else np.asarray(rows, np.int64)
    if len(rows) == 0:
        return
    count = ev.active()[rows].sum(1)
    order = rows[np.argsort(-count, kind="stable")]
    route, lo = ev.point, ev.lo
    sets = {j: s for j, s in ev.sets.items() if j != skip}
    if skip is not None:
        route, lo = route.copy(), lo.copy()
        route[:, skip] = np.nan
        lo[:, skip] = np.nan
    for idx, ptr, leaf in model.forest_.reach_chunks(route, budget, order, lo, ev.hi, sets):
        leaf = leaf.astype(np.int64)
        prow = np.repeat(np.arange(len(idx)), np.diff(ptr))
        logw = pair_log_weights(model, ev, idx, leaf, prow, skip)
        yield Chunk(idx, ptr, leaf, prow, logw, segment_logsumexp(ptr, logw))


def pair_log_weights(model, ev: Evidence, rows: np.ndarray, leaf: np.ndarray, prow: np.ndarray,
                     skip: int | None = None) -> np.ndarray:
    """Unnormalised log posterior ``log pi_k + sum_{j in E} log g_kj`` of each (row, leaf) pair
    (``rows[prow]`` = evidence row), scored in leaf order: the one pair scorer of the
    enumerating path, for ``log_prob`` of rows with missing entries (point evidence) and for
    every conditional query."""
    lw = model.leaf_log_weight_

    def score(lf, pr):
        return lw[lf] + evidence_log_factor(model, ev, pr, lf, rows, skip=skip)

    return in_leaf_order(score, leaf, prow) if model.pairs_in_leaf_order else score(leaf, prow)


def segment_gumbel_argmax(ptr: np.ndarray, logw: np.ndarray,
                          rng: np.random.Generator) -> np.ndarray:
    """One draw per CSR segment with probabilities ∝ ``exp(logw)`` (Gumbel-max trick).

    Returns the pair index chosen in each segment (the first of tied maxima); every segment
    must be non-empty.
    """
    g = logw + rng.gumbel(size=len(logw))
    return _segment_argmax(np.asarray(ptr, np.int64), g)


@parallel_kernel
def _segment_argmax(ptr, v):
    """Index of the first maximum of ``v`` in each CSR segment."""
    m = len(ptr) - 1
    out = np.empty(m, np.int64)
    for i in prange(m):
        best = ptr[i]
        for p in range(ptr[i] + 1, ptr[i + 1]):
            if v[p] > v[best]:
                best = p
        out[i] = best
    return out
