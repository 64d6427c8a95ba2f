"""Exact evidence queries of a chain of conditional trees: the compatible *branches*.

A chain's density is ``p(x) = prod_t p_t(x_{o_t} | leaf_t(x_{o_<t}))``: tree ``t`` routes a row by
the columns before ``o_t`` in the order and its leaf holds the law of column ``o_t``. A row
whose evidence leaves some columns open (missing, or given as an interval or a level set) is
routed down *both* sides of every split on an open column whose constraint straddles it. Each
path through the trees (a *branch*) fixes one leaf per tree and narrows every open column to an
interval ``(lo, hi]`` (numeric and ordinal columns) or a level set (discrete columns); inside a
branch the open columns are independent, each following its own leaf's law restricted to its
constraint. So

    p(evidence) = sum_branches  prod_{point columns} p_j(x_j | leaf)
                                prod_{open columns}  P_j(constraint | leaf),

exactly, and the conditional law of the open columns given the evidence is the mixture of
these truncated product laws, weighted by the branch terms. Trees after the last evidence
column integrate to one and are not walked. The number of branches grows with the open columns
that later trees split on; a row past ``max_branches`` raises :class:`TooManyBranches`, or with
``drop=True`` is flagged (``Branches.over``) for the caller's estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forestgen.inference.conditions import Evidence


class TooManyBranches(ValueError):
    """A row's evidence is compatible with more branches than the learner enumerates."""

    def __init__(self, row: int, limit: int):
        super().__init__(row, limit)
        self.row = row
        self.limit = limit


@dataclass
class Branches:
    """The compatible branches of ``m`` evidence rows (``S`` branches in all).

    ``row [S]``: the evidence row; ``logw [S]``: the branch term (point densities times the
    constraint probabilities of the open columns); ``leaf [S, d]``: the global leaf of each
    column's tree (-1 past the row's last walked tree); ``lo, hi [S, d]``: the interval of each
    open non-nominal column (``-inf, inf`` where unconstrained); ``mask[j] [S, k]``: the levels
    left to discrete column ``j``; ``point [m, d]``: the rows' point values (NaN = open).
    """

    row: np.ndarray
    logw: np.ndarray
    leaf: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mask: dict
    point: np.ndarray
    over: np.ndarray | None = None  # rows past max_branches (with drop=True), no branches

    def take(self, idx: np.ndarray) -> Branches:
        return Branches(self.row[idx], self.logw[idx], self.leaf[idx], self.lo[idx],
                        self.hi[idx], {j: mk[idx] for j, mk in self.mask.items()}, self.point)

    def log_mass(self, m: int) -> np.ndarray:
        """``log p(evidence)`` per evidence row (``-inf`` where no branch has mass)."""
        out = np.full(m, -np.inf)
        if len(self.row):
            top = np.full(m, -np.inf)
            np.maximum.at(top, self.row, self.logw)
            safe = np.where(np.isfinite(top), top, 0.0)
            acc = np.zeros(m)
            np.add.at(acc, self.row, np.exp(self.logw - safe[self.row]))
            with np.errstate(divide="ignore"):
                out = np.log(acc) + safe
        return out

    def weights(self, m: int) -> np.ndarray:
        """Each branch's share of its row's mass (0 in rows without mass)."""
        lm = self.log_mass(m)
        with np.errstate(invalid="ignore"):
            w = np.exp(self.logw - lm[self.row])
        return np.where(np.isfinite(lm[self.row]), w, 0.0)


def evidence_branches(model, ev: Evidence, upto: np.ndarray, max_branches: int,
                      densities: bool = True, drop: bool = False) -> Branches:
    """The branches of evidence rows ``ev`` through trees ``0..upto[i]`` of ``model`` (a
    fitted :class:`~forestgen.families.chain.chain.Chain`): ``order_`` (column of each tree),
    ``forest_`` (one tree per column, tree ``t`` splitting on ``order_[:t]`` only) and
    ``leaf_models_``. Raises :class:`TooManyBranches` for a row with more than
    ``max_branches`` branches. ``densities=False`` leaves the point values' densities out of
    ``logw`` (the caller adds them, :func:`routing_keys`). ``drop=True``: such rows lose
    their branches instead and are flagged in the result's ``over``."""
    schema = model.encoder_.schema
    order = model.order_
    m, d = ev.point.shape
    point = ev.point
    discrete = [j for j, c in enumerate(schema.columns) if c.is_discrete]
    row = np.arange(m)
    logw = np.zeros(m)
    leaf = np.full((m, d), -1, np.int64)
    lo = np.where(np.isnan(ev.lo), -np.inf, ev.lo)
    hi = np.where(np.isnan(ev.hi), np.inf, ev.hi)
    mask = {}
    for j in discrete:
        k = schema.columns[j].n_levels
        mk = np.ones((m, k), bool)
        if j in ev.sets:
            a, sm = ev.sets[j]
            mk[a] = np.broadcast_to(sm, (m, k))[a]
        mask[j] = mk
        # a point code outside the levels (a level unseen at fit) has probability zero
        pj = point[:, j]
        bad = ~np.isnan(pj) & ((pj < 0) | (pj >= k) | (pj != np.round(pj)))
        logw[bad] = -np.inf
    br = Branches(row, logw, leaf, lo, hi, mask, point)
    over = np.zeros(m, bool)
    upto = np.asarray(upto, np.int64)
    for t in range(int(upto.max(initial=-1)) + 1):
        br = br.take(np.flatnonzero(np.isfinite(br.logw)))
        walk = upto[br.row] >= t
        if not walk.any():
            continue
        br = _walk_tree(model, br, t, np.flatnonzero(walk))
        j = int(order[t])
        sel = (br.leaf[:, j] >= 0) & ~np.isnan(point[br.row, j])
        if densities and sel.any():
            br.logw[sel] += model.leaf_models_[j].log_prob(br.leaf[sel, j],
                                                           point[br.row[sel], j])
        counts = np.bincount(br.row, minlength=m)
        big = counts > max_branches
        if big.any():
            if not drop:
                raise TooManyBranches(int(np.argmax(big)), max_branches)
            over |= big
            br = br.take(np.flatnonzero(~big[br.row]))
    br = br.take(np.flatnonzero(np.isfinite(br.logw)))
    _close(model, br)
    br = br.take(np.flatnonzero(np.isfinite(br.logw)))
    br.over = over
    return br


def routing_keys(model, point: np.ndarray) -> np.ndarray:
    """Point values replaced by a representative of their cell between the forest's split
    thresholds on their column (the upper threshold, or ``inf`` above all): rows with equal
    keys are routed alike by every tree, so their branches are the same."""
    f = model.forest_
    out = point.copy()
    for j, spec in enumerate(model.encoder_.schema.columns):
        at = (f.feature == j) & (f.cat_off < 0)
        if spec.is_discrete and spec.is_nominal or not at.any():
            if not at.any() and not spec.is_discrete:
                out[:, j] = np.where(np.isnan(point[:, j]), np.nan, 0.0)
            continue
        thr = np.unique(f.threshold[at])
        x = point[:, j]
        k = np.searchsorted(thr, np.where(np.isnan(x), 0.0, x), side="left")
        rep = np.where(k < len(thr), thr[np.minimum(k, len(thr) - 1)], np.inf)
        if spec.is_discrete:  # ordinal codes: the least code of the cell (a code outside
            # the levels stays as it is: it has probability zero)
            below = thr[np.maximum(k - 1, 0)]
            rep = np.where(k > 0, np.floor(below) + 1.0, 0.0)
            bad = (x < 0) | (x >= spec.n_levels) | (x != np.round(x))
            rep = np.where(bad, x, rep)
        out[:, j] = np.where(np.isnan(x), np.nan, rep)
    return out


def _walk_tree(model, br: Branches, t: int, idx: np.ndarray) -> Branches:
    """Route branches ``idx`` through tree ``t``, splitting those whose open column straddles
    a split (the left part stays, a copy takes the right part); sets ``leaf[:, order[t]]``."""
    f = model.forest_
    schema = model.encoder_.schema
    has_cat = len(f.cat_left) > 0
    node = np.full(len(br.row), -1, np.int64)
    node[idx] = f.roots[t]
    while True:
        at = np.flatnonzero(node >= 0)
        at = at[f.feature[node[at]] >= 0]
        if not len(at):
            break
        feat = f.feature[node[at]]
        go_l = np.zeros(len(at), bool)
        go_r = np.zeros(len(at), bool)
        right_parts = []  # (positions in at, column, right constraint) of straddling branches
        for c in np.unique(feat):
            sub = np.flatnonzero(feat == c)
            s = at[sub]
            nd = node[s]
            x = br.point[br.row[s], c]
            pt = ~np.isnan(x)
            nominal = f.cat_off[nd] >= 0
            kf = max(int(f.n_levels[c]), 1)
            # point values follow the trees' own rule (an unseen code follows nan_left)
            xl = np.where(pt, x, 0.0)
            code = np.where(np.isfinite(xl), xl, -1.0).astype(np.int64)
            valid = (code >= 0) & (code < kf) & (code == xl)
            cat = (f.cat_left[np.where(nominal & valid, f.cat_off[nd] + code, 0)] == 1) \
                if has_cat else np.zeros(len(s), bool)
            left_pt = np.where(nominal, np.where(valid, cat, f.nan_left[nd] == 1),
                               xl <= f.threshold[nd])
            if schema.columns[c].is_discrete:
                k = schema.columns[c].n_levels
                codes = np.arange(k)
                lvl_left = codes[None, :] <= f.threshold[nd][:, None]
                if nominal.any() and has_cat:
                    offs = f.cat_off[nd][:, None] + np.minimum(codes, kf - 1)[None, :]
                    by_set = f.cat_left[np.where(nominal[:, None], offs, 0)] == 1
                    unseen = (codes >= kf)[None, :]
                    by_set = np.where(unseen, (f.nan_left[nd] == 1)[:, None], by_set)
                    lvl_left = np.where(nominal[:, None], by_set, lvl_left)
                mk = br.mask[c][s]
                ml, mr = mk & lvl_left, mk & ~lvl_left
                l_ok, r_ok = ml.any(1), mr.any(1)
                split = ~pt & l_ok & r_ok
                if split.any():
                    br.mask[c][s[split]] = ml[split]
                    right_parts.append((sub[split], c, mr[split]))
            else:
                thr = f.threshold[nd]
                l_ok = br.lo[s, c] < thr
                r_ok = br.hi[s, c] > thr
                split = ~pt & l_ok & r_ok
                if split.any():
                    right_parts.append((sub[split], c, (thr[split],
                                                        br.hi[s[split], c].copy())))
                    br.hi[s[split], c] = thr[split]
            go_l[sub] = np.where(pt, left_pt, l_ok)
            go_r[sub] = np.where(pt, ~left_pt, r_ok)
        dead = ~go_l & ~go_r
        if dead.any():
            br.logw[at[dead]] = -np.inf
            node[at[dead]] = -1
        alive = ~dead
        both = go_l & go_r
        if both.any():
            pos = np.flatnonzero(both)
            extra = br.take(at[pos])
            extra_node = f.right[node[at[pos]]].astype(np.int64)
            where = np.full(len(at), -1, np.int64)
            where[pos] = np.arange(len(pos))
            for sub, c, part in right_parts:
                e = where[sub]
                if schema.columns[c].is_discrete:
                    extra.mask[c][e] = part
                else:
                    extra.lo[e, c], extra.hi[e, c] = part
        keep = at[alive]
        node[keep] = np.where(go_l[alive], f.left[node[keep]], f.right[node[keep]])
        if both.any():
            br = _concat(br, extra)
            node = np.concatenate([node, extra_node])
    j = int(model.order_[t])
    done = node >= 0
    br.leaf[done, j] = f.node_leaf[node[done]]
    return br


def _concat(a: Branches, b: Branches) -> Branches:
    return Branches(np.concatenate([a.row, b.row]), np.concatenate([a.logw, b.logw]),
                    np.concatenate([a.leaf, b.leaf]), np.concatenate([a.lo, b.lo]),
                    np.concatenate([a.hi, b.hi]),
                    {j: np.concatenate([a.mask[j], b.mask[j]]) for j in a.mask}, a.point)


def _close(model, br: Branches) -> None:
    """Multiply each branch by the probability of its open columns' constraints."""
    schema = model.encoder_.schema
    for j, spec in enumerate(schema.columns):
        walked = (br.leaf[:, j] >= 0) & np.isnan(br.point[br.row, j])
        if spec.is_discrete:
            narrowed = walked & ~br.mask[j].all(1)
            if narrowed.any():
                br.logw[narrowed] += model.leaf_models_[j].log_prob_levels(
                    br.leaf[narrowed, j], br.mask[j][narrowed])
        else:
            narrowed = walked & (np.isfinite(br.lo[:, j]) | np.isfinite(br.hi[:, j]))
            if narrowed.any():
                br.logw[narrowed] += model.leaf_models_[j].log_prob_interval(
                    br.leaf[narrowed, j], br.lo[narrowed, j], br.hi[narrowed, j])
