"""Fused marginal walks: every leaf a row reaches, scored and summed in one pass (issue 15).

A row with missing entries reaches every leaf whose cell meets its observed values (the
missing columns' splits go both ways; ARF spec §3's marginalisation). The enumerating path
lists those (row, leaf) pairs (:meth:`ForestArrays.reach`), scores them column by column and
combines them. :func:`_batch_walk` instead walks a block of rows through each tree together
(a node splits the rows that reach it into those going left and right, a missing value going
both ways), scores each reached leaf on the row's observed columns as it gets there from the
packed leaf records of :mod:`.leaf_factors`, and folds it into running per-row sums: the
logsumexp of the scores and, for query columns missing in the row, the posterior-weighted
leaf pmfs or means. No list of pairs is built; memory is the output plus a row list per open
node of a block.

* :func:`marginal_log_prob`: the mixture's log density of rows with missing entries;
* :func:`marginal_moments`: the moments behind ``predict_proba``, ``predict`` and
  ``impute(method="expectation")``.

Each row meets its leaves in the enumerating path's order (tree by tree, right subtrees
first) whatever the blocks and threads, so results do not depend on the thread count or on
how rows are batched; they equal the enumerating path's up to rounding (the running
logsumexp rescales where the two-pass one does not).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from forestgen.inference.leaf_factors import (
    CATEGORICAL,
    leaf_kind,
    leaf_log_weight,
    leaf_pack,
    leaf_pmf,
    route,
    supported_columns,
)
from forestgen.parallel import parallel_kernel

BLOCK = 8192  # rows that walk the trees together (at most; one block per thread)


def block_size(m: int, threads: int) -> int:
    """Rows per block for ``m`` rows: at most :data:`BLOCK` (and at least 16), in a number of
    blocks that is a multiple of ``threads`` and of nearly equal sizes, so every thread gets
    the same share of the rows."""
    n = -(-m // max(BLOCK, 1))
    n = -(-n // threads) * threads
    return int(max(16, min(BLOCK, -(-m // n))))


@njit(cache=True, nogil=True, inline="always")
def _lse_add(st, i, v):
    """Adds score ``v`` to row ``i``'s running logsumexp ``st[i] = (max, sum of exp(score -
    max))``: ``(w, scale)``, the leaf's weight relative to the new max and the factor the
    row's earlier weighted sums take (``w`` -1: the leaf adds nothing; a NaN or ``+inf`` score
    makes the row's log sum that value, as a logsumexp would)."""
    mx = st[i, 0]
    if np.isnan(mx) or mx == np.inf or v == -np.inf:
        return -1.0, 1.0
    if np.isnan(v) or v == np.inf:
        st[i, 0] = v
        return -1.0, 1.0
    if v > mx:
        scale = np.exp(mx - v)
        st[i, 1] = st[i, 1] * scale + 1.0
        st[i, 0] = v
        return 1.0, scale
    w = np.exp(v - mx)
    st[i, 1] += w
    return w, 1.0


@parallel_kernel(error_model="numpy")
def _batch_walk(X, order, block, depth, nodes, cat_left, n_levels, tabs, st, acc, queries):
    """Every row ``order[q]`` adds each leaf it reaches to its running sums (:func:`_lse_add`,
    and the weighted leaf pmfs or means of the query columns ``queries`` it misses).
    A block of rows walks each tree together: a node splits the block's rows that reach it
    into those going left and right (a missing value goes both ways), so each node and leaf
    record is read once per block; every row still meets its leaves tree by tree, right
    subtrees first, whatever the blocks and threads."""
    m, d = X.shape
    node, fnode, roots = nodes
    qcol, qoff, qlev, qrow, qmean = queries
    nq = qcol.shape[0]
    width = acc.shape[1]
    n_blocks = (m + block - 1) // block
    for blk in prange(n_blocks):
        r0 = blk * block
        nb = min(m, r0 + block) - r0
        ws = np.empty((2 * depth + 3) * nb, np.int64)  # row lists of the open nodes
        sn = np.empty(2 * depth + 4, np.int64)  # stack of (node, first, end) in ws
        slo = np.empty(2 * depth + 4, np.int64)
        shi = np.empty(2 * depth + 4, np.int64)
        xb = np.empty((nb, d))  # the block's rows, their sums and observed columns
        xt = np.empty((d, nb))  # (column-major, for the splits)
        rs = np.empty(nb, np.int64)  # rows going right at a split
        sb = np.empty((nb, 2))
        ab = np.zeros((nb, width))
        pv = np.empty(width)  # the pmfs of the query columns at the leaf being scored
        seen = np.full(nq, -1, np.int64)  # the leaf visit pv[query t] belongs to
        visit = 0
        ecols = np.empty((nb, d), np.int64)
        ne = np.zeros(nb, np.int64)
        for q in range(nb):
            i = order[r0 + q]
            sb[q, 0] = st[i, 0]
            sb[q, 1] = st[i, 1]
            for j in range(d):
                xb[q, j] = X[i, j]
                xt[j, q] = X[i, j]
                if not np.isnan(X[i, j]):
                    ecols[q, ne[q]] = j
                    ne[q] += 1
        for b in range(roots.shape[0]):
            for q in range(nb):
                ws[q] = q
            sn[0], slo[0], shi[0] = roots[b], 0, nb
            sp = 1
            while sp > 0:
                sp -= 1
                nd, lo, hi = sn[sp], slo[sp], shi[sp]
                meta = node[nd, 1]
                if (meta >> 2) & 1:
                    r = meta >> 24
                    visit += 1
                    for k in range(lo, hi):
                        q = ws[k]
                        v = leaf_log_weight(q, r, xb, ecols[q], ne[q], tabs)
                        w, scale = _lse_add(sb, q, v)
                        if w < 0.0 or nq == 0:
                            continue
                        if scale != 1.0:
                            for c in range(width):
                                ab[q, c] *= scale
                        for t in range(nq):  # query columns missing in the row
                            j = qcol[t]
                            if np.isnan(xb[q, j]):
                                o = qoff[t]
                                if qlev[t] > 0:
                                    if seen[t] != visit:  # the leaf's pmf, once per visit
                                        leaf_pmf(pv, o, tabs, r, j)
                                        seen[t] = visit
                                    for c in range(qlev[t]):
                                        ab[q, o + c] += w * pv[o + c]
                                else:
                                    ab[q, o] += w * qmean[qrow[t], r]
                    continue
                xf = xt[(meta >> 3) & 0x1FFFFF]
                top = hi  # the rows going left follow the node's rows, then those going right
                nr = 0
                if (meta >> 1) & 1:
                    for k in range(lo, hi):
                        q = ws[k]
                        side = route(xf[q], nd, nodes, cat_left, n_levels)
                        ws[top] = q
                        top += side & 1
                        rs[nr] = q
                        nr += side >> 1
                else:
                    thr = fnode[nd, 0]
                    for k in range(lo, hi):
                        q = ws[k]
                        x = xf[q]
                        ws[top] = q
                        top += np.int64(not x > thr)  # x <= thr, or x missing
                        rs[nr] = q
                        nr += np.int64(not x <= thr)  # x > thr, or x missing
                mid = top
                for k in range(nr):
                    ws[top + k] = rs[k]
                top += nr
                if mid > hi:  # left below right: the right subtree is walked first
                    sn[sp], slo[sp], shi[sp] = meta >> 24, hi, mid
                    sp += 1
                if top > mid:
                    sn[sp], slo[sp], shi[sp] = nd + 1, mid, top
                    sp += 1
        for q in range(nb):
            i = order[r0 + q]
            st[i, 0] = sb[q, 0]
            st[i, 1] = sb[q, 1]
            for c in range(width):
                acc[i, c] = ab[q, c]


def _walk(model, Z: np.ndarray, queries: tuple, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs :func:`_batch_walk` over encoded ``Z``: ``(log sum, acc / sum)`` per row."""
    m = len(Z)
    f = model.forest_
    pack = leaf_pack(model)
    st = np.zeros((m, 2))
    st[:, 0] = -np.inf
    acc = np.zeros((m, width))
    if m:
        first = f.apply(Z, n_trees=2)  # rows that share paths go in one block
        order = np.lexsort(first.T[::-1]).astype(np.int64)
        block = block_size(m, numba.get_num_threads())
        _batch_walk(Z, order, block, pack.depth, pack.nodes, f.cat_left, f.n_levels,
                    pack.args, st, acc, queries)
    fin = np.isfinite(st[:, 0])
    with np.errstate(divide="ignore"):
        lognorm = np.where(fin, st[:, 0] + np.log(np.where(fin, st[:, 1], 1.0)), st[:, 0])
    return lognorm, acc / np.where(fin, st[:, 1], np.nan)[:, None]


def fused_rows(model, Z: np.ndarray) -> np.ndarray:
    """bool per row of encoded ``Z``: every observed entry has an in-kernel leaf factor."""
    bad = ~supported_columns(model)
    return ~(~np.isnan(Z) & bad[None, :]).any(1)


def marginal_log_prob(model, Z: np.ndarray) -> np.ndarray:
    """``log sum_k pi_k prod_{j observed} g_kj(z_j)`` over the leaves each row of encoded
    ``Z`` reaches (NaN entries marginalised): the mixture ensembler's log density. Every row
    must pass :func:`fused_rows`."""
    Z = np.ascontiguousarray(Z, np.float64)
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.int64), np.zeros((0, 1)))
    return _walk(model, Z, none, 0)[0]


def moment_columns(model, cols) -> bool:
    """Whether :func:`marginal_moments` can mix every column in ``cols`` (a discrete column
    needs an in-kernel categorical leaf; a numeric one any leaf model with ``mean``)."""
    schema = model.encoder_.schema
    for j in cols:
        lm = model.leaf_models_[j]
        if schema.columns[j].is_discrete:
            if leaf_kind(lm) != CATEGORICAL:
                return False
        elif not hasattr(lm, "mean"):
            return False
    return True


def marginal_moments(model, Z: np.ndarray, cols) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """``(log p(observed), moments)`` per row of encoded ``Z``: under the leaf posterior of the
    row's observed entries (NaN entries marginalised), the mixture ``sum_k w_k pmf_kj``
    (``[m, k]``) of each discrete column ``j`` in ``cols`` and ``sum_k w_k mean_kj`` (``[m]``)
    of each numeric one, for the rows where ``Z[:, j]`` is NaN (0 elsewhere; NaN where the
    row has probability zero). Every row must pass :func:`fused_rows` and ``cols``
    :func:`moment_columns`."""
    Z = np.ascontiguousarray(Z, np.float64)
    schema = model.encoder_.schema
    pack = leaf_pack(model)
    cols = list(cols)
    qoff, qlev, qrow, means = [], [], [], []
    width = 0
    for j in cols:
        qoff.append(width)
        if schema.columns[j].is_discrete:
            k = model.leaf_models_[j].n_levels
            qlev.append(k)
            qrow.append(0)
            width += k
        else:
            qlev.append(0)
            qrow.append(len(means))
            means.append(pack.leaf_means(model, j))
            width += 1
    queries = (np.asarray(cols, np.int64), np.asarray(qoff, np.int64),
               np.asarray(qlev, np.int64), np.asarray(qrow, np.int64),
               np.ascontiguousarray(means, np.float64).reshape(len(means), -1)
               if means else np.zeros((0, 1)))
    lognorm, acc = _walk(model, Z, queries, width)
    out = {}
    for t, j in enumerate(cols):
        o = qoff[t]
        out[j] = acc[:, o: o + qlev[t]] if qlev[t] else acc[:, o]
    return lognorm, out
