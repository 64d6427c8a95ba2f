"""``log p(e)`` per evidence row by one fused walk, without listing leaves (issue 15).

``p(e) = sum_k pi_k prod_{j in E} g_kj(e_j)`` over the leaves of all trees (ARF spec §3). The
enumerating path (:func:`~.posterior.iter_posterior`) lists every leaf the evidence reaches as
(row, leaf) pairs and scores them column by column; with interval or level-set evidence a row
reaches ~10^5 leaves of a 1M-row forest, so listing them is what costs. :func:`evidence_log_mass`
walks each tree depth-first over the packed nodes of :class:`~.leaf_factors.LeafPack`
(:func:`~.interval_factors.packed_sides`: the leaves the enumeration lists), scores each leaf
on all of the row's evidence as it reaches it (:func:`~.interval_factors.row_log_weight`) and
accumulates a running ``logsumexp``. Each row is summed in a fixed order (trees in order, each
depth-first), so the result does not depend on the thread count or on how rows are batched.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from forestgen.inference.conditions import Evidence
from forestgen.inference.interval_factors import (
    evidence_arrays,
    kernel_rows,
    packed_sides,
    row_columns,
    row_log_weight,
)
from forestgen.inference.leaf_factors import BASE, leaf_pack
from forestgen.parallel import parallel_kernel

ROW_BLOCK = 8  # rows per parallel block (tree-major inside a block)


@parallel_kernel
def _mass_kernel(X, lo, hi, sact, smask, soff, sk, nodes, cat_left, n_levels, tabs, depth,
                 block):
    """``log sum_k w_k(e_i)`` per row (``-inf``: no leaf has positive weight), walking the
    packed nodes of :class:`~.leaf_factors.LeafPack` (a right child follows its parent)."""
    m, d = X.shape
    node, _, roots = nodes
    B = roots.shape[0]
    mx = np.full(m, -np.inf)
    acc = np.zeros(m)
    n_blocks = (m + block - 1) // block
    kmax = tabs[BASE].shape[1]
    for blk in prange(n_blocks):
        stack = np.empty(depth + 2, np.int64)
        ecols = np.empty(d, np.int64)
        icols = np.empty(d, np.int64)
        scols = np.empty(d, np.int64)
        scratch = np.zeros((1, kmax))
        r0 = blk * block
        r1 = min(m, r0 + block)
        for b in range(B):  # tree-major inside a block: one tree's nodes stay in cache
            for i in range(r0, r1):
                ne, ni, ns = row_columns(i, X, lo, sact, ecols, icols, scols)
                stack[0] = roots[b]
                sp = 1
                while sp > 0:
                    sp -= 1
                    n = stack[sp]
                    meta = node[n, 1]
                    if (meta >> 2) & 1:
                        v = row_log_weight(i, meta >> 24, X, ecols, ne, lo, hi, icols, ni,
                                           smask, soff, scols, ns, tabs, scratch)
                        if v > mx[i]:  # running logsumexp, rescaled to the largest term
                            acc[i] = acc[i] * np.exp(mx[i] - v) + 1.0
                            mx[i] = v
                        elif v > -np.inf:
                            acc[i] += np.exp(v - mx[i])
                        continue
                    s = packed_sides(i, n, X, lo, hi, sact, smask, soff, sk, nodes, cat_left,
                                     n_levels)
                    if s & 1:
                        stack[sp] = meta >> 24
                        sp += 1
                    if s & 2:
                        stack[sp] = n + 1
                        sp += 1
    out = np.empty(m)
    for i in range(m):
        out[i] = mx[i] + np.log(acc[i]) if mx[i] > -np.inf else -np.inf
    return out


def evidence_log_mass(model, ev: Evidence, rows: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``(done, log p(e))`` for the evidence rows ``rows`` (default all): ``done`` marks the
    rows whose evidence has in-kernel factors (:func:`~.interval_factors.kernel_rows`) and
    were summed here; the others (NaN in the result) are left to the enumerating path."""
    rows = np.arange(ev.m) if rows is None else np.asarray(rows, np.int64)
    out = np.full(len(rows), np.nan)
    done = kernel_rows(model, ev, rows) if len(rows) else np.zeros(0, bool)
    sel = rows[done]
    if len(sel) == 0:
        return done, out
    model.require_normalised("leaf posterior")
    f = model.forest_
    pack = leaf_pack(model)
    lo, hi, sact, smask, soff, sk = evidence_arrays(ev, sel)
    out[done] = _mass_kernel(np.ascontiguousarray(ev.point[sel]), lo, hi, sact, smask, soff,
                             sk, pack.nodes, f.cat_left, f.n_levels, pack.args, pack.depth,
                             max(1, min(ROW_BLOCK, -(-len(sel) // 16))))
    return done, out
