"""Best-first energy trees: a data mass ``P`` against a model mass ``Q`` on grid codes.

NRGBoost (Bravo, ICLR 2025, Sec. 3 and App. A; spec ``nrgboost_def.md`` §3.2-3.6). A candidate
split is scored by a criterion of the ``[P, Q]`` masses of its two children
(:mod:`forestgen.tree.criteria`: NRGBoost's ``energy`` gain ``½ Σ P²/Q`` by default, ``kl`` for
greedy multiplicative boosting (App. C), or a user ``@njit`` gain through
:func:`grow_energy_tree_with`). A split is rejected when a child has ``P/Q > max_ratio`` or
``Q = 0`` (spec §3.3), or when it gains no more than ``1e-12`` (§8.8) — except at the root, which
takes its most balanced valid split even at zero gain: with quantile bins the base measure
``q0`` already matches every single-column marginal, so no first split gains anything and only
the splits below it can show a dependence between columns (without this, boosting stops at
round one on such tables). Gains within ``1e-12`` of each other are ties, broken towards the
more balanced split (the larger smaller-child data mass).

``P`` comes from data rows, ``Q`` either from model-sample rows or, in round one, analytically
from a product measure ``q0`` (``Q(box) = prod_j q0_j(S_j)``). Ordered columns split at a code
threshold (``code <= thr`` left; a column's missing code goes to the side in ``nan_left``, or
alone against every value, ``thr = -1``); nominal columns by a level subset found by sorting
codes by ``P_k/Q_k`` and scanning prefixes (§3.6). Candidate columns per node: ``mtry`` drawn
from the tree's Generator (:func:`~forestgen.tree.node_ops.draw_candidates` from the identity).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.tree import node_ops
from forestgen.tree.criteria import criterion_gain, density_gain, specialise

MIN_GAIN = 1e-12
MIN_MASS = 1e-12  # smallest model mass of a child (masses are normalised to 1)


class CodedRows(NamedTuple):
    """One side's rows: grid codes ``X [d, n]``, weights ``w`` (summing to 1) and the row
    order ``idx`` the grower partitions node by node."""

    X: np.ndarray
    w: np.ndarray
    idx: np.ndarray


class ColumnGrid(NamedTuple):
    """The columns' codes: ``n_codes`` per column (value codes plus a missing code where
    ``has_miss``), ``n_values`` value codes, ``ordered`` (else nominal), flat offsets ``off``
    into per-code arrays, and ``analytic``: the model mass is the product measure with flat
    marginals ``q0`` instead of model-sample rows."""

    n_codes: np.ndarray
    n_values: np.ndarray
    has_miss: np.ndarray
    ordered: np.ndarray
    off: np.ndarray
    q0: np.ndarray
    analytic: bool


class SplitRule(NamedTuple):
    """Built-in criterion code ``crit``, the ratio bound ``max_ratio`` and ``mtry`` candidate
    columns per node."""

    crit: int
    max_ratio: float
    mtry: int


class NodeSpan(NamedTuple):
    """A node's rows: ``data.idx[ds:de]`` and ``model.idx[qs:qe]``, with masses ``P``, ``Q``."""

    ds: int
    de: int
    qs: int
    qe: int
    P: float
    Q: float


class SplitScratch(NamedTuple):
    """Per-tree buffers of the split search: candidate columns, per-code masses, the nominal
    sort, and the user-gain buffers."""

    feats: np.ndarray
    hP: np.ndarray
    hQ: np.ndarray
    order: np.ndarray
    keys: np.ndarray
    lbuf: np.ndarray
    rbuf: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _valid(cP, cQ, Pn, Qn, max_ratio):
    """Both children keep model mass and ``P <= max_ratio · Q`` (``Q`` is often a difference
    of sums: a tiny positive rounding residue means an empty child)."""
    PR = Pn - cP
    QR = Qn - cQ
    return cQ > MIN_MASS and cP <= max_ratio * cQ and QR > MIN_MASS and PR <= max_ratio * QR


@njit(cache=True, nogil=True)
def _split_gain(cP, cQ, Pn, Qn, max_ratio, crit, lbuf, rbuf):
    """Gain of sending masses ``cP, cQ`` left in a node of masses ``Pn, Qn`` under built-in
    criterion ``crit``; ``-inf`` for an invalid split."""
    if not _valid(cP, cQ, Pn, Qn, max_ratio):
        return -np.inf
    return density_gain(crit, cP, cQ, Pn - cP, Qn - cQ)


@njit(cache=True, nogil=True)
def _user_split_gain(cP, cQ, Pn, Qn, max_ratio, crit, lbuf, rbuf):
    """:func:`_split_gain` for a user gain, which reads ``[P, Q]`` of each child from the
    buffers ``lbuf``, ``rbuf`` (bound in its place by :func:`grow_energy_tree_with`)."""
    if not _valid(cP, cQ, Pn, Qn, max_ratio):
        return -np.inf
    lbuf[0], lbuf[1] = cP, cQ
    rbuf[0], rbuf[1] = Pn - cP, Qn - cQ
    return criterion_gain(crit, lbuf, rbuf)


@njit(cache=True, nogil=True)
def _better(g, bal, best, best_bal):
    """A valid candidate beats the best so far by more than :data:`MIN_GAIN`, or ties it
    (within ``MIN_GAIN``) and is more balanced."""
    return g > -np.inf and (g > best + MIN_GAIN or (g >= best - MIN_GAIN and bal > best_bal))


@njit(cache=True, nogil=True)
def _node_hist(f, data, model, node, mask, grid, hP, hQ):
    """Data and model masses of each code of column ``f`` among the node's rows (``Q`` from
    the product measure restricted to the node's codes ``mask`` when analytic)."""
    nc = grid.n_codes[f]
    o = grid.off[f]
    for k in range(nc):
        hP[k] = 0.0
        hQ[k] = 0.0
    for r in range(node.ds, node.de):
        i = data.idx[r]
        hP[data.X[f, i]] += data.w[i]
    if grid.analytic:
        tot = 0.0
        for k in range(nc):
            if mask[o + k]:
                tot += grid.q0[o + k]
        for k in range(nc):
            if mask[o + k]:
                hQ[k] = node.Q * grid.q0[o + k] / tot
    else:
        for r in range(node.qs, node.qe):
            i = model.idx[r]
            hQ[model.X[f, i]] += model.w[i]


@njit(cache=True, nogil=True)
def _best_split(data, model, node, mask, grid, rule, rng, scratch, out_left):
    """Best split of one node: (gain, feature, thr, nan_left); nominal left sets -> out_left."""
    feats, hP, hQ, order, keys = scratch.feats, scratch.hP, scratch.hQ, scratch.order, \
        scratch.keys
    lbuf, rbuf = scratch.lbuf, scratch.rbuf
    crit, max_ratio, mtry = rule.crit, rule.max_ratio, rule.mtry
    n_codes, n_values, has_miss, ordered = grid.n_codes, grid.n_values, grid.has_miss, \
        grid.ordered
    Pn, Qn = node.P, node.Q
    for s in range(feats.shape[0]):
        feats[s] = s
    best = -np.inf
    best_bal = -1.0
    bf = -1
    bt = -1
    bnl = 0
    if Qn <= MIN_MASS:
        return best, bf, bt, bnl
    node_ops.draw_candidates(feats, mtry, rng)
    for s in range(mtry):
        f = feats[s]
        nc = n_codes[f]
        if nc < 2:
            continue
        _node_hist(f, data, model, node, mask, grid, hP, hQ)
        if ordered[f]:
            nv = n_values[f]
            mP = hP[nv] if has_miss[f] else 0.0
            mQ = hQ[nv] if has_miss[f] else 0.0
            # prefixes of the value codes with the missing code left (side 0) or right
            # (side 1); side 2: the missing code alone against every value (thr = -1)
            for side in range(3 if has_miss[f] else 1):
                nl = 0 if side == 1 else 1
                cP = mP if nl == 1 else 0.0
                cQ = mQ if nl == 1 else 0.0
                for k in range(1 if side == 2 else nv - 1):
                    if side < 2:
                        cP += hP[k]
                        cQ += hQ[k]
                    g = _split_gain(cP, cQ, Pn, Qn, max_ratio, crit, lbuf, rbuf)
                    if _better(g, min(cP, Pn - cP), best, best_bal):
                        best, best_bal, bf, bt, bnl = g, min(cP, Pn - cP), f, k, nl
                        if side == 2:
                            bt = -1
        else:
            m = 0
            for k in range(nc):
                if hP[k] > 0.0 or hQ[k] > 0.0:
                    order[m] = k
                    keys[m] = hP[k] / hQ[k] if hQ[k] > 0.0 else np.inf
                    m += 1
            if m < 2:
                continue
            srt = np.argsort(keys[:m], kind="mergesort")
            cP = 0.0
            cQ = 0.0
            for q in range(m - 1):
                k = order[srt[q]]
                cP += hP[k]
                cQ += hQ[k]
                g = _split_gain(cP, cQ, Pn, Qn, max_ratio, crit, lbuf, rbuf)
                if _better(g, min(cP, Pn - cP), best, best_bal):
                    best, best_bal, bf, bt = g, min(cP, Pn - cP), f, q
                    for k2 in range(nc):
                        out_left[k2] = 0
                    for q2 in range(q + 1):
                        out_left[order[srt[q2]]] = 1
    return best, bf, bt, bnl


@njit(cache=True, nogil=True)
def _child_mass(w, idx, s, e):
    out = 0.0
    for r in range(s, e):
        out += w[idx[r]]
    return out


@njit(cache=True, nogil=True)
def grow_energy_tree(Xd, wd, Xq, wq, grid, rule, max_leaves, rng):
    """Grow one tree best-first. ``Xd [d, N]`` data codes with weights ``wd`` (summing to 1;
    rows of weight 0 take no part);
    ``Xq [d, M]`` model-sample codes with weights ``wq`` (summing to 1), or ``grid.analytic``
    with the flat product-measure marginals ``grid.q0``.

    Returns tree-local ``feature, thr, nan_left, left, right, cat_rows [n_nodes, max codes]``
    (``cat_rows[node, code] = 1``: that code goes left, for every split) and per node ``P, Q``.
    """
    d = Xd.shape[0]
    M = Xq.shape[1]
    n_codes, n_values, ordered, off, q0 = grid.n_codes, grid.n_values, grid.ordered, grid.off, \
        grid.q0
    analytic = grid.analytic
    cmax = 1
    for j in range(d):
        cmax = max(cmax, n_codes[j])
    total = off[d]
    max_nodes = 2 * max_leaves - 1
    feature, left, right, cat_rows = node_ops.new_tree(max_nodes, cmax)
    g_best, f_best, t_best, set_best, is_open = node_ops.new_frontier(max_nodes, cmax)
    thr = np.full(max_nodes, -1, np.int32)
    nan_left = np.zeros(max_nodes, np.uint8)
    nl_best = np.zeros(max_nodes, np.int64)
    Pm = np.zeros(max_nodes)
    Qm = np.zeros(max_nodes)
    ds_ = np.zeros(max_nodes, np.int64)
    de_ = np.zeros(max_nodes, np.int64)
    qs_ = np.zeros(max_nodes, np.int64)
    qe_ = np.zeros(max_nodes, np.int64)
    nmask = np.ones((max_nodes if analytic else 1, total), np.uint8)
    di = node_ops.in_bag(wd)
    n_in = len(di)
    qi = np.arange(M)
    data = CodedRows(Xd, wd, di)
    model = CodedRows(Xq, wq, qi)
    scratch = SplitScratch(np.empty(d, np.int64), np.zeros(cmax), np.zeros(cmax),
                           np.empty(cmax, np.int64), np.empty(cmax), np.zeros(2), np.zeros(2))
    Pm[0] = _child_mass(wd, di, 0, n_in)
    Qm[0] = 1.0 if analytic else _child_mass(wq, qi, 0, M)
    de_[0] = n_in
    qe_[0] = M
    n_nodes = 1
    n_leaves = 1
    while True:
        # best splits of the nodes created last (the root, then two children)
        first = 0 if n_nodes == 1 else n_nodes - 2
        for c in range(first, n_nodes):
            mask = nmask[c] if analytic else nmask[0]
            span = NodeSpan(ds_[c], de_[c], qs_[c], qe_[c], Pm[c], Qm[c])
            g, f, t, nl = _best_split(data, model, span, mask, grid, rule, rng, scratch,
                                      set_best[c])
            g_best[c], f_best[c], t_best[c], nl_best[c] = g, f, t, nl
            is_open[c] = True
        if n_leaves >= max_leaves:
            break
        # the root splits even without gain (its most balanced valid split)
        node = node_ops.pop_best(is_open, g_best, n_nodes, -MIN_GAIN if n_nodes == 1 else MIN_GAIN)
        if node < 0:
            break
        f = f_best[node]
        feature[node] = f
        thr[node] = t_best[node]
        nan_left[node] = nl_best[node]
        for k in range(n_codes[f]):
            if not ordered[f]:
                cat_rows[node, k] = set_best[node, k]
            elif k >= n_values[f]:
                cat_rows[node, k] = nl_best[node]
            else:
                cat_rows[node, k] = 1 if k <= t_best[node] else 0
        dm = node_ops.partition(di, ds_[node], de_[node], Xd[f], cat_rows[node])
        qm = node_ops.partition(qi, qs_[node], qe_[node], Xq[f], cat_rows[node])
        for side in range(2):
            c = n_nodes
            n_nodes += 1
            if side == 0:
                left[node] = c
                ds_[c], de_[c], qs_[c], qe_[c] = ds_[node], dm, qs_[node], qm
            else:
                right[node] = c
                ds_[c], de_[c], qs_[c], qe_[c] = dm, de_[node], qm, qe_[node]
            Pm[c] = _child_mass(wd, di, ds_[c], de_[c])
            if analytic:
                for k in range(total):
                    nmask[c, k] = nmask[node, k]
                o = off[f]
                tot = 0.0
                kept = 0.0
                for k in range(n_codes[f]):
                    if nmask[node, o + k]:
                        tot += q0[o + k]
                        if (cat_rows[node, k] == 1) != (side == 1):
                            kept += q0[o + k]
                        else:
                            nmask[c, o + k] = 0
                Qm[c] = Qm[node] * kept / tot
            else:
                Qm[c] = _child_mass(wq, qi, qs_[c], qe_[c])
        n_leaves += 1
    return (feature[:n_nodes].copy(), thr[:n_nodes].copy(), nan_left[:n_nodes].copy(),
            left[:n_nodes].copy(), right[:n_nodes].copy(), cat_rows[:n_nodes].copy(),
            Pm[:n_nodes].copy(), Qm[:n_nodes].copy())


def grow_energy_tree_with(gain):
    """:func:`grow_energy_tree` compiled for the user ``@njit`` ``gain`` (once per process)."""
    return specialise(grow_energy_tree, ((_user_split_gain, "_split_gain"), _best_split), gain)
