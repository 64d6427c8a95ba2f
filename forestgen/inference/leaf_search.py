"""Exact per-row conditional leaf draws that do not list every consistent leaf (issue 15).

Under point evidence ``x_E`` (one value per evidence column) the leaf posterior pooled over all
trees is ``w_k ∝ pi_k prod_{j in E} g_kj(x_j)`` (:mod:`forestgen.inference.posterior`: ``pi``
= ``model.leaf_log_weight_``, ``g`` the leaf models' densities / pmfs). With few evidence
columns a row is consistent with tens of thousands of leaves, so listing them all (the walk of
:meth:`ForestArrays.reach`) is what costs. :func:`draw_leaves_bounded` draws one leaf per row
exactly by rejection from an envelope that descends the trees:

* every internal node ``n`` has a static upper bound ``U_E(n)`` on the summed weight of its
  subtree's leaves under any point values on the row's columns ``E`` (:class:`NodeBounds`):
  each leaf counts ``pi_k`` times its largest density on each numeric column of ``E`` (a pmf is
  at most 1); a split on a column of ``E`` sends the row one way, so it takes the larger child
  bound, any other split the sum; a leaf's bound in a trial is its exact weight;
* interval and level-set evidence (:mod:`.interval_factors`) multiplies a leaf's weight by a
  probability ``<= 1``, so the bounds of the row's point columns still hold; such a column
  sends the row to each child its interval or level set meets (a child it misses has bound 0);
* a trial picks a tree by its root's bound, then at each node moves to a child with probability
  ``bound(child) / bound(node)`` (a child the evidence excludes has bound 0) and stops
  (rejects) with the remaining probability; reaching leaf ``k`` has probability
  ``w_k / sum_b bound(root_b)``, so an accepted leaf is an exact posterior draw;
* each visit replaces the node's bound by the sum of its children's, and a rejected trial
  passes the tightened values up its path to the root (adaptive rejection as in Gilks & Wild
  1992: the envelope only tightens, so later trials of the row reject less).

A row whose trials exceed ``budget`` node visits, or whose evidence has zero or non-finite
weight, is left to the enumerating path (``leaf = -1``). Random numbers come from a
counter-based generator keyed by ``(key, row id)``, so the draws do not depend on the thread
count or on how rows are batched.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from forestgen.inference.interval_factors import (
    evidence_arrays,
    kernel_rows,
    row_columns,
    row_log_weight,
)
from forestgen.inference.leaf_factors import (
    BASE,
    CATEGORICAL,
    UNIFORM,
    add_pmf,
    cached_for,
    leaf_kind,
    leaf_pack,
)
from forestgen.leaves.normal_math import LOG_SQRT_2PI
from forestgen.parallel import parallel_kernel
from forestgen.tree.kernels import EvidenceRows, evidence_sides

#: node visits per row before the row is handed to the enumerating path
VISIT_BUDGET = 16_384
ROW_BLOCK = 64  # rows per parallel block (each block owns one hash table)
PATTERNS_KEPT = 4  # evidence patterns whose node bounds a model keeps
SMALL_TABLE = 4096  # hash-table slots a row starts with (doubled as its trials need)
LEVEL_BOUND_MAX = 16  # levels of a categorical column given per-level node bounds

def log_sup_density(lm) -> np.ndarray:
    """``log sup_x g_k(x)`` per leaf of a truncated-normal or uniform leaf model (``-inf`` for
    an empty cell, ``+inf`` where the parameters give no finite bound)."""
    if leaf_kind(lm) == UNIFORM:
        with np.errstate(divide="ignore"):
            return -np.log(lm.hi_ - lm.lo_)
    lognorm = np.log(lm.sigma_) + LOG_SQRT_2PI + lm.logz_
    a, b = lm.a_, lm.b_
    dist = np.where(a > 0, a, np.where(b < 0, -b, 0.0))  # the mode's distance to the cell
    out = -lognorm - 0.5 * dist * dist
    out = np.where(np.isnan(out), np.inf, out)
    return np.where(lm.lo_ >= lm.hi_, -np.inf, out)


class NodeBounds:
    """Per-internal-node upper bounds on a forest's subtree posterior weights (float32, rounded
    up so they stay upper bounds), one array per evidence pattern (the set of given columns
    ``E``), built on first use and kept for the last :data:`PATTERNS_KEPT` patterns.

    ``inner [N]`` int32: index of each node among the ``I`` internal nodes (-1 at leaves).
    ``pattern(E) [I]``: ``log U_E(n)`` with, bottom-up, ``U_E(leaf k) = pi_k prod_{j in E}
    sup g_kj`` (numeric columns; a pmf is at most 1), ``U_E(n) = max`` of the children's at a
    split on a column of ``E`` (a value goes to one side) and their sum at any other split.
    Memory: ``4 N`` bytes plus ``4 I`` per pattern kept.

    ``levels(cols)`` ``[I, K]``: for level-set evidence on categorical columns ``cols`` (at
    most :data:`LEVEL_BOUND_MAX` levels each, ``K`` levels in all), ``sum_{k in n} pi_k
    p_kj(c) / max(pi)`` per node and level ``c``, so a subtree's weight under a level set
    ``S`` on ``j`` is at most ``max(pi) sum_{c in S}`` of its row (where the row's other
    factors are at most 1: no numeric point values). Memory: ``4 I K`` bytes per column set
    kept (the last two).
    """

    def __init__(self, model):
        f = model.forest_
        internal = f.feature >= 0
        self.inner = np.full(len(f.feature), -1, np.int32)
        self.inner[internal] = np.arange(int(internal.sum()), dtype=np.int32)
        self.lw = np.asarray(model.leaf_log_weight_, np.float64)
        self._f = f
        self._models = model.leaf_models_
        self.max_depth = int(_max_depth(self._order(), f.feature, f.left, f.right))
        self.patterns: dict[tuple[int, ...], np.ndarray] = {}
        self.level_sets: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._model = weakref.ref(model)

    def _order(self) -> np.ndarray:
        f = self._f
        return _bfs_order(f.feature, f.left, f.right, f.roots)

    def pattern(self, cols) -> np.ndarray:
        """``log U_E`` per internal node for the given columns ``cols`` (see the class)."""
        key = tuple(sorted(int(j) for j in cols))
        if key in self.patterns:
            self.patterns[key] = self.patterns.pop(key)  # most recently used last
            return self.patterns[key]
        leaf_val = self.lw.copy()
        for j in key:
            kd = leaf_kind(self._models[j])
            if kd == 0:
                raise ValueError(f"column {j}: {type(self._models[j]).__name__} has no bound "
                                 f"for the bounded leaf search")
            if kd != CATEGORICAL:
                leaf_val += log_sup_density(self._models[j])
        given = np.zeros(len(self._models), np.bool_)
        given[list(key)] = True
        f = self._f
        out = _subtree_bound(self._order(), f.feature, f.left, f.right, f.node_leaf,
                             self.inner, leaf_val, given)
        while len(self.patterns) >= PATTERNS_KEPT:
            self.patterns.pop(next(iter(self.patterns)))
        self.patterns[key] = out
        return out

    def levels(self, cols) -> tuple[np.ndarray, np.ndarray, float]:
        """``(V [I, K] float32, offset [d] of each column's levels in V (-1: none), log
        max(pi))`` for the categorical columns among ``cols`` with at most
        :data:`LEVEL_BOUND_MAX` levels (see the class)."""
        d = len(self._models)
        key = tuple(sorted(int(j) for j in cols if leaf_kind(self._models[j]) == CATEGORICAL
                           and self._models[j].n_levels <= LEVEL_BOUND_MAX))
        top = float(self.lw.max())
        if not key:
            return np.zeros((0, 0), np.float32), np.full(d, -1, np.int64), top
        if key not in self.level_sets:
            pack = leaf_pack(self._model())
            f = self._f
            w = np.exp(self.lw - top)
            parts = [_level_bound(self._order(), f.feature, f.left, f.right, f.node_leaf,
                                  self.inner, w, pack.row, pack.args, j,
                                  self._models[j].n_levels) for j in key]
            off = np.full(d, -1, np.int64)
            acc = 0
            for j in key:
                off[j] = acc
                acc += self._models[j].n_levels
            while len(self.level_sets) >= 2:
                self.level_sets.pop(next(iter(self.level_sets)))
            self.level_sets[key] = (np.ascontiguousarray(np.concatenate(parts, axis=1)), off)
        return (*self.level_sets[key], top)

    @property
    def nbytes(self) -> int:
        return int(self.inner.nbytes + sum(a.nbytes for a in self.patterns.values())
                   + sum(v.nbytes for v, _ in self.level_sets.values()))


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def node_bounds(model) -> NodeBounds:
    """The model's :class:`NodeBounds` (built on first use, kept while the model lives and its
    forest and leaf weights are the same objects)."""
    return cached_for(_CACHE, model, (model.forest_, model.leaf_log_weight_), NodeBounds)


# ----------------------------------------------------------------------------- build kernels


@njit(cache=True, nogil=True)
def _bfs_order(feature, left, right, roots):
    """Every node of every tree in breadth-first order (parents before children)."""
    order = np.empty(feature.shape[0], np.int64)
    t = 0
    for r in roots:
        order[t] = r
        t += 1
    h = 0
    while h < t:
        n = order[h]
        h += 1
        if feature[n] >= 0:
            order[t] = left[n]
            order[t + 1] = right[n]
            t += 2
    return order[:t]


@njit(cache=True, nogil=True)
def _max_depth(order, feature, left, right):
    depth = np.zeros(feature.shape[0], np.int64)
    best = 0
    for n in order:
        if feature[n] >= 0:
            depth[left[n]] = depth[n] + 1
            depth[right[n]] = depth[n] + 1
            best = max(best, depth[n] + 1)
    return best


@njit(cache=True, nogil=True, inline="always")
def _round_up32(v):
    """A float32 >= ``v`` (nearest rounding of ``v`` plus a margin above its error)."""
    if not np.isfinite(v):
        return np.float32(v)
    return np.float32(v + abs(v) * 2.0 ** -22 + 1e-12)


@njit(cache=True, nogil=True)
def _subtree_bound(order, feature, left, right, node_leaf, inner, leaf_val, given):
    """``log U_E`` per internal node (:class:`NodeBounds`): the children's ``max`` at a split
    on a ``given`` column, their ``logsumexp`` elsewhere; float32 rounded up, each parent
    from its children's stored values (so ``U(parent) >= U(left) + U(right)`` in float64)."""
    n_inner = 0
    for n in range(feature.shape[0]):
        if feature[n] >= 0:
            n_inner += 1
    out = np.empty(n_inner, np.float32)
    for q in range(order.shape[0] - 1, -1, -1):
        n = order[q]
        if feature[n] < 0:
            continue
        a = _child_value(left[n], feature, node_leaf, inner, leaf_val, out)
        b = _child_value(right[n], feature, node_leaf, inner, leaf_val, out)
        if np.isnan(a) or np.isnan(b):
            v = np.inf
        elif given[feature[n]]:
            v = max(a, b)
        else:
            hi = max(a, b)
            lo = min(a, b)
            v = hi if (hi == -np.inf or hi == np.inf) else hi + np.log1p(np.exp(lo - hi))
        out[inner[n]] = _round_up32(v)
    return out


@njit(cache=True, nogil=True)
def _level_bound(order, feature, left, right, node_leaf, inner, w, lrow, tabs, j, k):
    """``[I, k]`` float32: per internal node, ``sum`` over its leaves of ``w_leaf p(c |
    leaf)`` on categorical column ``j`` (rounded up, parents from their children's stored
    values)."""
    n_inner = 0
    for n in range(feature.shape[0]):
        if feature[n] >= 0:
            n_inner += 1
    out = np.zeros((n_inner, k), np.float32)
    scratch = np.zeros((1, tabs[BASE].shape[1]))
    acc = np.zeros(k)
    for q in range(order.shape[0] - 1, -1, -1):
        n = order[q]
        if feature[n] < 0:
            continue
        for side in range(2):
            c = left[n] if side == 0 else right[n]
            if feature[c] < 0:
                add_pmf(scratch, 0, 0, w[node_leaf[c]], tabs, lrow[node_leaf[c]], j)
                for lv in range(k):
                    acc[lv] += scratch[0, lv]
                    scratch[0, lv] = 0.0
            else:
                for lv in range(k):
                    acc[lv] += np.float64(out[inner[c], lv])
        for lv in range(k):
            out[inner[n], lv] = _round_up32(acc[lv])
            acc[lv] = 0.0
    return out


@njit(cache=True, nogil=True, inline="always")
def _static_bound(c, i, bounds, shift, ev, scols, ns):
    """Linear bound of internal node ``c`` for row ``i`` of ``ev``: its pattern bound, or the
    smaller level-set bound of :meth:`NodeBounds.levels` where the row has one
    (``bounds``: :class:`SearchBounds`)."""
    inner, bound, lvb, lvoff, lscale = bounds.inner, bounds.bound, bounds.lvb, bounds.lvoff, \
        bounds.lscale
    smask, soff, sk = ev.smask, ev.soff, ev.sk
    v = np.exp(np.float64(bound[inner[c]]) - shift)
    if lvb.shape[0] == 0:
        return v
    for q in range(ns):
        j = scols[q]
        o = lvoff[j]
        if o < 0:
            continue
        sm = 0.0
        for lv in range(sk[j]):
            if smask[i, soff[j] + lv]:
                sm += np.float64(lvb[inner[c], o + lv])
        v = min(v, sm * np.exp(lscale - shift) * (1.0 + 1e-9))
    return v


@njit(cache=True, nogil=True, inline="always")
def _child_value(c, feature, node_leaf, inner, leaf_val, out):
    if feature[c] < 0:
        return leaf_val[node_leaf[c]]
    return np.float64(out[inner[c]])


# ----------------------------------------------------------------------------- draw kernel


class SearchBounds(NamedTuple):
    """:class:`NodeBounds` of one evidence pattern as the draw kernel reads them: each node's
    row in the bound tables ``inner``, the pattern's log bounds ``bound``, the level-set
    bounds ``lvb`` at column offsets ``lvoff`` with scale ``lscale``, the forest's depth."""

    inner: np.ndarray
    bound: np.ndarray
    lvb: np.ndarray
    lvoff: np.ndarray
    lscale: float
    max_depth: int


@njit(cache=True, nogil=True, inline="always")
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def _uniform(state):
    """SplitMix64 step: a uniform double in [0, 1) from ``state[0]`` (advanced)."""
    state[0] += np.uint64(0x9E3779B97F4A7C15)
    return np.float64(_mix64(state[0]) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True, inline="always")
def _find(keys, node):
    """Slot of ``node`` in the open-addressing table, or of the empty slot where it goes."""
    mask = keys.shape[0] - 1
    h = (node * 0x9E3779B1) & mask
    while keys[h] != -1 and keys[h] != node:
        h = (h + 1) & mask
    return h


@njit(cache=True, nogil=True)
def _grown(keys, vals, used, n_used, cap):
    """The hash table's ``n_used`` entries rehashed into a table of ``cap`` slots."""
    k2 = np.full(cap, -1, np.int64)
    v2 = np.empty(cap, np.float64)
    u2 = np.empty(cap, np.int64)
    for q in range(n_used):
        node = keys[used[q]]
        h = _find(k2, node)
        k2[h] = node
        v2[h] = vals[used[q]]
        u2[q] = h
    return k2, v2, u2


@parallel_kernel
def _bounded_draw(ev, row_id, key, fv, bounds, lrow, tabs, budget, block):
    """One leaf per row of evidence ``ev`` (:class:`~forestgen.tree.kernels.EvidenceRows`),
    or -1 (left to the enumerating path); also the node visits per row. ``fv``: the forest's
    :class:`~forestgen.tree.kernels.ForestView`; ``bounds``: :class:`SearchBounds`. See the
    module docstring."""
    X, lo, hi, sact, smask, soff, sk = ev
    feature, left, right, roots, node_leaf = fv.feature, fv.left, fv.right, fv.roots, \
        fv.node_leaf
    inner, bound, lvb, lvoff, lscale, max_depth = bounds
    m, d = X.shape
    B = roots.shape[0]
    out = np.full(m, -1, np.int64)
    visits = np.zeros(m, np.int64)
    n_blocks = (m + block - 1) // block
    # a trial adds at most 3 entries per visited node and one per root; trials start only
    # while a whole one fits in half the table, so probing always finds an empty slot
    per_trial = 3 * (max_depth + 2) + B
    max_cap = 1
    while max_cap < 2 * (3 * budget + 2 * per_trial):
        max_cap *= 2
    # a row starts with a table that stays in cache and doubles it as its trials fill it
    cap0 = 1
    while cap0 < min(max_cap, max(SMALL_TABLE, 4 * per_trial)):
        cap0 *= 2
    for blk in prange(n_blocks):
        cap = cap0
        keys = np.full(cap, -1, np.int64)
        vals = np.empty(cap, np.float64)
        used = np.empty(cap, np.int64)
        ecols = np.empty(d, np.int64)
        icols = np.empty(d, np.int64)
        scols = np.empty(d, np.int64)
        scratch = np.zeros((1, tabs[BASE].shape[1]))
        rb = np.empty(B, np.float64)
        pnode = np.empty(max_depth + 2, np.int64)  # the trial's path, its nodes' values
        pval = np.empty(max_depth + 2, np.float64)  # after the visit, and their other
        psib = np.empty(max_depth + 2, np.float64)  # child's value
        state = np.zeros(1, np.uint64)
        for i in range(blk * block, min(m, (blk + 1) * block)):
            ne, ni, ns = row_columns(i, X, lo, sact, ecols, icols, scols)
            state[0] = _mix64(np.uint64(key) ^ _mix64(np.uint64(row_id[i]) + np.uint64(1)))
            # the largest static root bound sets the scale of the row's linear weights
            shift = -np.inf
            for b in range(B):
                r = roots[b]
                if feature[r] >= 0:
                    v = np.float64(bound[inner[r]])  # (level bounds only lower it)
                else:
                    v = row_log_weight(i, lrow[node_leaf[r]], ev, ecols, ne, icols, ni, scols,
                                       ns, tabs, scratch)
                if v > shift or np.isnan(v):
                    shift = v
            if not np.isfinite(shift):
                continue
            n_used = 0
            count = 0
            if cap > cap0:  # the previous row grew the table
                cap = cap0
                keys = np.full(cap, -1, np.int64)
                vals = np.empty(cap, np.float64)
                used = np.empty(cap, np.int64)
            # the budget is checked before a trial, never inside one: a trial cut short would
            # favour shallow leaves, while stopping between trials keeps the draw exact
            while count < budget:
                if n_used + per_trial > cap // 2:
                    if cap >= max_cap:
                        break
                    cap *= 2
                    keys, vals, used = _grown(keys, vals, used, n_used, cap)
                tot = 0.0
                for b in range(B):
                    r = roots[b]
                    h = _find(keys, r)
                    if keys[h] == r:
                        rb[b] = vals[h]
                    elif feature[r] >= 0:
                        rb[b] = _static_bound(r, i, bounds, shift, ev, scols, ns)
                    else:
                        rb[b] = np.exp(row_log_weight(
                            i, lrow[node_leaf[r]], ev, ecols, ne, icols, ni, scols, ns, tabs,
                            scratch) - shift)
                        keys[h] = r
                        vals[h] = rb[b]
                        used[n_used] = h
                        n_used += 1
                    tot += rb[b]
                if not (tot > 0.0 and np.isfinite(tot)):
                    break
                u = _uniform(state) * tot
                b = 0
                acc = rb[0]
                while u >= acc and b < B - 1:
                    b += 1
                    acc += rb[b]
                while rb[b] <= 0.0:  # rounding put u past the last positive root
                    b -= 1
                node = roots[b]
                bn = rb[b]
                t = 0
                while True:
                    if feature[node] < 0:
                        out[i] = node_leaf[node]
                        break
                    count += 1
                    sides = evidence_sides(i, node, ev, fv)
                    go_l = (sides & 1) != 0
                    go_r = (sides & 2) != 0
                    bc = np.zeros(2)
                    for side in range(2):
                        if (side == 0 and not go_l) or (side == 1 and not go_r):
                            continue
                        c = left[node] if side == 0 else right[node]
                        h = _find(keys, c)
                        if keys[h] == c:
                            bc[side] = vals[h]
                        elif feature[c] >= 0:
                            bc[side] = _static_bound(c, i, bounds, shift, ev, scols, ns)
                        else:
                            bc[side] = np.exp(row_log_weight(
                                i, lrow[node_leaf[c]], ev, ecols, ne, icols, ni, scols, ns,
                                tabs, scratch) - shift)
                            keys[h] = c
                            vals[h] = bc[side]
                            used[n_used] = h
                            n_used += 1
                    s = bc[0] + bc[1]
                    if s < bn:  # tighten the envelope at this node
                        h = _find(keys, node)
                        if keys[h] != node:
                            keys[h] = node
                            used[n_used] = h
                            n_used += 1
                        vals[h] = s
                    v = _uniform(state) * max(bn, s)
                    pnode[t] = node
                    pval[t] = min(bn, s)
                    if v < bc[0]:
                        node = left[node]
                        bn = bc[0]
                        psib[t] = bc[1]
                    elif v < s:
                        node = right[node]
                        bn = bc[1]
                        psib[t] = bc[0]
                    else:  # rejected: the path's ancestors learn the tightened value at once
                        cur = pval[t]
                        for q in range(t - 1, -1, -1):
                            new = cur + psib[q]
                            if new < pval[q]:
                                h = _find(keys, pnode[q])
                                if keys[h] != pnode[q]:
                                    keys[h] = pnode[q]
                                    used[n_used] = h
                                    n_used += 1
                                vals[h] = new
                                pval[q] = new
                            cur = pval[q]
                        break
                    t += 1
                if out[i] >= 0:
                    break
            visits[i] = count
            for q in range(n_used):
                keys[used[q]] = -1
    return out, visits


# ----------------------------------------------------------------------------- entry point


def draw_leaves_bounded(model, point: np.ndarray, row_id: np.ndarray, key: int,
                        budget: int = VISIT_BUDGET, evidence: tuple | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """One posterior leaf per evidence row, or -1 where the row is left to the enumerating
    path; and the node visits per row. ``point [m, d]``: encoded values (NaN = none);
    ``evidence``: the rows' intervals and level sets as
    :func:`~.interval_factors.evidence_arrays` gives them (None: none).

    Every column with evidence in some row must have in-kernel factors
    (:func:`~.interval_factors.kernel_columns`). ``row_id`` and ``key`` seed each row's random
    numbers (same ids and key, same draws)."""
    point = np.ascontiguousarray(point, np.float64)
    m, d = point.shape
    if evidence is None:
        evidence = (np.zeros((0, d)), np.zeros((0, d)), np.zeros((0, d), bool),
                    np.zeros((m, 0), bool), np.zeros(d, np.int64), np.zeros(d, np.int64))
    lo, hi, sact, smask, soff, sk = evidence
    out = np.full(m, -1, np.int64)
    visits = np.zeros(m, np.int64)
    if m == 0:
        return out, visits
    row_id = np.asarray(row_id, np.int64)
    used_cols = np.flatnonzero(~np.isnan(point).all(0))
    f = model.forest_
    nb = node_bounds(model)
    bad = [j for j in used_cols if leaf_kind(model.leaf_models_[j]) == 0]
    if bad:
        raise ValueError(f"column {bad[0]}: {type(model.leaf_models_[bad[0]]).__name__} is not "
                         f"supported by the bounded leaf search")
    pack = leaf_pack(model)
    given = ~np.isnan(point)
    pats, pat = np.unique(given, axis=0, return_inverse=True)
    pat = np.asarray(pat).ravel()
    kinds = np.array([leaf_kind(lm) for lm in model.leaf_models_])
    for p in range(len(pats)):
        sel = np.flatnonzero(pat == p)
        bound = nb.pattern(np.flatnonzero(pats[p]))
        # level-set bounds hold where the row's other factors are at most 1 (no densities)
        sets = (np.flatnonzero(sact[sel].any(0)) if sact.shape[0] and
                (kinds[pats[p]] == CATEGORICAL).all() else np.zeros(0, np.int64))
        sets = [j for j in sets if sk[j] == model.leaf_models_[j].n_levels]
        lvb, lvoff, lscale = nb.levels(sets)
        ev_sel = EvidenceRows(np.ascontiguousarray(point[sel]), _rows_of(lo, sel),
                              _rows_of(hi, sel), _rows_of(sact, sel), _rows_of(smask, sel),
                              soff, sk)
        out[sel], visits[sel] = _bounded_draw(
            ev_sel, row_id[sel], np.uint64(int(key) % 2**64), f.view(),
            SearchBounds(nb.inner, bound, lvb, lvoff, lscale, nb.max_depth), pack.row,
            pack.args, int(budget), max(1, min(ROW_BLOCK, -(-len(sel) // 16))))
    return out, visits


#: rows of each evidence pattern on which the bounded search is tried before the pattern's
#: other rows are assigned to it or to the enumerating path
PROBE_ROWS = 4
WALK_CAP = 4096  # leaves a probe row's walk counts at most
#: node visits per row when a probe's walk reaches :data:`WALK_CAP` leaves (typical of interval
#: and level-set evidence, whose walk lists ~10^5 leaves of a 1M-row forest)
CAPPED_BUDGET = 262_144


def _rows_of(a: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``a[sel]`` of a per-row kernel array (``[0, d]``: none, kept)."""
    return a if a.shape[0] == 0 else np.ascontiguousarray(a[sel])


@njit(cache=True, nogil=True)
def _count_reach(ev, cap, fv, max_nodes):
    """Leaves each evidence row reaches (the walk of :meth:`ForestArrays.reach`), at most
    ``cap``."""
    feature, left, right, roots = fv.feature, fv.left, fv.right, fv.roots
    m = ev.X.shape[0]
    out = np.zeros(m, np.int64)
    stack = np.empty(max_nodes + 2, np.int64)
    for i in range(m):
        cnt = 0
        for b in range(roots.shape[0]):
            stack[0] = roots[b]
            sp = 1
            while sp > 0 and cnt < cap:
                sp -= 1
                node = stack[sp]
                f = feature[node]
                if f < 0:
                    cnt += 1
                    continue
                s = evidence_sides(i, node, ev, fv)
                if s & 1:
                    stack[sp] = left[node]
                    sp += 1
                if s & 2:
                    stack[sp] = right[node]
                    sp += 1
        out[i] = min(cnt, cap)
    return out


def bounded_eligible(model, ev, rows: np.ndarray) -> np.ndarray:
    """bool per row of ``rows``: evidence (point values, intervals, level sets) only on
    columns whose leaf factors the search can weigh (:func:`~.interval_factors.kernel_rows`)."""
    return kernel_rows(model, ev, rows)


def bounded_draws(model, ev, rows: np.ndarray, key: int) -> tuple[np.ndarray, dict]:
    """A posterior leaf per evidence row in ``rows`` by the bounded search, -1 for rows left
    to the enumerating path; and counts ``{"rows", "searched", "fallback"}``.

    Rows are grouped by evidence pattern (which columns carry a value, an interval or a level
    set). The pattern's first
    :data:`PROBE_ROWS` rows count the leaves their walk would list (up to :data:`WALK_CAP`)
    and are searched with twice that many node visits; the pattern's other rows are searched
    (with four times the largest count; :data:`CAPPED_BUDGET` both when a walk reaches the cap)
    only when the probe's median row visited fewer nodes
    than the median walk lists leaves: the search wins with few evidence columns, where a row
    reaches thousands of leaves, and loses to the walk when routing on many columns keeps it
    short. The choice depends only on the rows and ``key``, never on threads or batching.
    """
    rows = np.asarray(rows, np.int64)
    leaf = np.full(len(rows), -1, np.int64)
    info = {"rows": len(rows), "searched": 0, "fallback": 0}
    elig = np.flatnonzero(bounded_eligible(model, ev, rows))
    if len(elig) == 0:
        return leaf, info
    f = model.forest_
    max_nodes = int(np.diff(f.node_offsets).max())
    sub = rows[elig]
    given = ~np.isnan(ev.point[sub])
    _, pat = np.unique(np.concatenate([given, ev.active()[sub]], axis=1), axis=0,
                       return_inverse=True)
    pat = np.asarray(pat).ravel()
    for p in range(int(pat.max()) + 1):
        mine = elig[pat == p]
        probe, rest = mine[:PROBE_ROWS], mine[PROBE_ROWS:]
        pts = np.ascontiguousarray(ev.point[rows[probe]])
        evp = evidence_arrays(ev, rows[probe])
        walk = _count_reach(EvidenceRows(pts, *evp), WALK_CAP, f.view(), max_nodes)
        capped = walk.max() >= WALK_CAP
        leaf[probe], vis = draw_leaves_bounded(
            model, pts, rows[probe], key, CAPPED_BUDGET if capped else int(max(2 * walk.max(), 64)),
            evp)
        info["searched"] += len(probe)
        if len(rest) and np.median(vis) < np.median(walk):
            leaf[rest], _ = draw_leaves_bounded(
                model, ev.point[rows[rest]], rows[rest], key,
                CAPPED_BUDGET if capped else int(max(4 * walk.max(), 256)),
                evidence_arrays(ev, rows[rest]))
            info["searched"] += len(rest)
    info["fallback"] = int(info["searched"] - (leaf >= 0).sum())
    return leaf, info
