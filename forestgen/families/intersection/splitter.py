"""Bayes-risk splitter of Generative Forests (Nock & Guillame-Bert 2023, eq. (5); spec
``generative_forests.md`` §2.1-2.6, §2.11).

Real data ``R`` (positives) against the uniform measure ``U`` (negatives) with prior ``π``: a
cell ``C`` costs ``J_π(R(C), U(C)) = (πr + (1-π)u) · L(πr / (πr + (1-π)u))`` where ``L`` is the
pointwise Bayes risk of a proper loss; the forest's risk is ``Σ_C J_π``. ``J_π`` is concave and
1-homogeneous, so refining a cell never increases the risk. A split of leaf ``λ`` of one tree is
scored over **every** cell of the joint partition inside ``λ`` (one split refines many cells).

Losses (``L(0) = L(1) = 0``): ``"matusita"`` ``2·sqrt(u(1-u))`` (the reference code's),
``"log"`` ``-u ln u - (1-u) ln(1-u)``, ``"square"`` ``u(1-u)``.

Candidate thresholds on an ordered column: ``"observed"`` (default) — the values of the leaf's
rows (half-way to the next integer on integer-coded columns) and the bounds of the leaf's cells
on that column, strictly inside the leaf's interval; the score is concave between such
breakpoints (spec §2.6), and more than ``max_candidates`` are thinned evenly by rank;
``"grid100"`` — 100 evenly spaced thresholds inside the leaf's interval (the reference code).
On continuous columns no threshold comes closer than ``1e-6`` of the root range to the leaf's
bounds, so a point mass (many equal values) gets a narrow cell of finite density rather than
one of zero width.
Nominal columns: every subset of the leaf's levels when it has at most 10, otherwise the
singletons and the prefixes of the levels ordered by their empirical density in the leaf.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.registry import register
from forestgen.splitters.base import Splitter
from forestgen.validation import check_choice, check_int, check_real

LOSSES = {"matusita": 0, "log": 1, "square": 2}
CANDIDATES = {"observed": 0, "grid100": 1}
MAX_EXHAUSTIVE_LEVELS = 10


@njit(cache=True, nogil=True, inline="always")
def bayes_risk(u, loss):
    """Pointwise Bayes risk ``L(u)`` of the loss (code from :data:`LOSSES`)."""
    if u <= 0.0 or u >= 1.0:
        return 0.0
    if loss == 0:
        return 2.0 * math.sqrt(u * (1.0 - u))
    if loss == 1:
        return -u * math.log(u) - (1.0 - u) * math.log(1.0 - u)
    return u * (1.0 - u)


@njit(cache=True, nogil=True, inline="always")
def cell_risk(r, u, prior, loss):
    """``J_π(r, u)``: the cell's share of the forest's Bayes risk (0 when ``r = 0``)."""
    if r <= 0.0:
        return 0.0
    m = prior * r + (1.0 - prior) * u
    if m <= 0.0:
        return 0.0
    return m * bayes_risk(prior * r / m, loss)


@register("splitter", "bayes_risk")
class BayesRiskSplitter(Splitter):
    """Scores splits of one leaf over all cells of the joint partition inside it.

    A ``Splitter`` that grows the ``"cell table"`` (``grows``): GF.Boost / EOGT call
    :meth:`best_split` on the heaviest leaf over all trees and :meth:`risk` for the partition's
    Bayes risk; it grows no tree on its own (:meth:`grow` raises). A subclass may change the
    criterion (override :meth:`risk` / :meth:`best_split`).

    Parameters: ``loss`` (``"matusita"``, ``"log"``, ``"square"``), ``prior`` ``π`` in (0, 1),
    ``candidates`` (``"observed"`` or ``"grid100"``), ``max_candidates`` per ordered column,
    ``min_rows`` (training weight each child must receive, default 1 as in the reference code),
    ``approx``: EOGT's criterion (cell masses re-estimated from the leaf's rows and volumes,
    spec §2.11) instead of the exact per-cell counts.
    """

    labelled = False
    grows = "cell table"

    def __init__(self, *, loss: str = "matusita", prior: float = 0.5,
                 candidates: str = "observed", max_candidates: int = 255, min_rows: float = 1.0,
                 approx: bool = False):
        check_choice("loss", loss, LOSSES)
        check_real("prior", prior, 0.0, 1.0, low_open=True, high_open=True)
        check_choice("candidates", candidates, CANDIDATES)
        check_int("max_candidates", max_candidates, 2)
        check_real("min_rows", min_rows, 0.0, low_open=True)
        self.loss = loss
        self.prior = float(prior)
        self.candidates = candidates
        self.max_candidates = int(max_candidates)
        self.min_rows = float(min_rows)
        self.approx = bool(approx)

    def grow(self, data, y, w, rng, limits):
        raise NotImplementedError(f"{type(self).__name__} splits the joint cell table of all "
                                  f"trees (GF.Boost / EOGT: best_split); it grows no tree alone")

    def risk(self, r: np.ndarray, u: np.ndarray) -> float:
        """``Σ_C J_π(r_C, u_C)`` over cells (masses as fractions of the total)."""
        return float(_total_risk(np.asarray(r, float), np.asarray(u, float), self.prior,
                                 LOSSES[self.loss]))

    def best_split(self, table, node: int):
        """Best admissible split of leaf ``node`` of ``table`` (a :class:`CellTable`):
        ``(gain, column, threshold, left_levels)`` with ``column = -1`` if none exists."""
        t = table
        rule = RiskRule(self.prior, LOSSES[self.loss], CANDIDATES[self.candidates],
                        self.max_candidates, self.min_rows, self.approx, MAX_EXHAUSTIVE_LEVELS)
        return _best_split(node, *t.bundles(), t.lc_pool, t.f_row, t.f_w,
                           ColumnSteps(t.integer, t.min_width), t.m_total, rule)


@njit(cache=True, nogil=True)
def _total_risk(r, u, prior, loss):
    s = 0.0
    for c in range(r.shape[0]):
        s += cell_risk(r[c], u[c], prior, loss)
    return s


@njit(cache=True, nogil=True)
def _frac_ordered(theta, a, b):
    if b <= a:
        return 0.0
    f = (theta - a) / (b - a)
    return min(1.0, max(0.0, f))


@njit(cache=True, nogil=True)
def _candidates(vals, cells, clo, chi, j, lo, hi, integer, mode, max_cand, min_width):
    """Sorted unique thresholds at least ``min_width`` inside ``(lo, hi)``."""
    lo = lo + min_width
    hi = hi - min_width
    if mode == 1:
        if integer:
            a = math.floor(lo + 0.5) + 0.5
            n = int(math.floor(hi - 0.5) - a + 0.5) + 1
            if n <= 0:
                return np.empty(0)
            grid = a + np.arange(n).astype(np.float64)
            grid = grid[(grid > lo) & (grid < hi)]
            if grid.shape[0] > 100:
                idx = np.round(np.linspace(0, grid.shape[0] - 1, 100)).astype(np.int64)
                grid = np.unique(grid[idx])
            return grid
        return lo + (hi - lo) * np.arange(1, 101).astype(np.float64) / 101.0
    buf = np.empty(vals.shape[0] + 2 * cells.shape[0])
    k = 0
    for i in range(vals.shape[0]):
        v = vals[i] + 0.5 if integer else vals[i]
        if v > lo and v < hi:
            buf[k] = v
            k += 1
    obs = np.unique(buf[:k])
    if obs.shape[0] > max_cand:
        idx = np.round(np.linspace(0, obs.shape[0] - 1, max_cand)).astype(np.int64)
        obs = np.unique(obs[idx])
    k = obs.shape[0]
    buf2 = np.empty(k + 2 * cells.shape[0])
    buf2[:k] = obs
    for q in range(cells.shape[0]):
        c = cells[q]
        for v in (clo[c, j], chi[c, j]):
            if v > lo and v < hi:
                buf2[k] = v
                k += 1
    return np.unique(buf2[:k])


class RiskRule(NamedTuple):
    """The split search's settings: prior ``π``, loss code, candidate mode and cap, the least
    training weight per child, EOGT's approximate masses, the most levels of a nominal column
    searched exhaustively."""

    prior: float
    loss: int
    mode: int
    max_cand: int
    min_rows: float
    approx: bool
    max_exh: int


class ColumnSteps(NamedTuple):
    """Per column: integer-coded (thresholds half-way between integers) and the narrowest
    side a continuous split may leave."""

    integer: np.ndarray
    min_width: np.ndarray


class LeafFragments(NamedTuple):
    """A leaf's row fragments grouped by its cells: row, weight and local cell index."""

    row: np.ndarray
    w: np.ndarray
    cell: np.ndarray


@njit(cache=True, nogil=True)
def _best_split(node, layout, nodes, ca, leaf_cells, lc_pool, f_row, f_w, steps, m_total, rule):
    """Best split of tree node ``node`` over the cells inside it: ``(gain, column, threshold,
    left level mask)`` (the table's bundles from :meth:`CellTable.bundles`)."""
    Z, kind = layout.Z, layout.kind
    nlo, nhi, nmask = nodes.nlo, nodes.nhi, nodes.nmask
    clo, chi, cR, cU = ca.clo, ca.chi, ca.cR, ca.cU
    cf_start, cf_count = ca.cf_start, ca.cf_count
    lc_start, lc_count = leaf_cells.lc_start, leaf_cells.lc_count
    integer, min_width = steps.integer, steps.min_width
    prior, loss, mode, max_cand, min_rows, approx = rule.prior, rule.loss, rule.mode, \
        rule.max_cand, rule.min_rows, rule.approx
    d = Z.shape[1]
    cells = lc_pool[lc_start[node]: lc_start[node] + lc_count[node]].copy()
    nc = cells.shape[0]
    # fragments of the leaf, grouped by cell
    nfr = 0
    for q in range(nc):
        nfr += cf_count[cells[q]]
    fr = np.empty(nfr, np.int64)
    fw = np.empty(nfr)
    fcell = np.empty(nfr, np.int64)  # local cell index
    p = 0
    for q in range(nc):
        c = cells[q]
        for s in range(cf_start[c], cf_start[c] + cf_count[c]):
            fr[p] = f_row[s]
            fw[p] = f_w[s]
            fcell[p] = q
            p += 1
    base = np.empty(nc)
    for q in range(nc):
        base[q] = cell_risk(cR[cells[q]], cU[cells[q]], prior, loss)
    best_gain = -1.0
    best_j = -1
    best_thr = 0.0
    best_mask = np.zeros(1, np.uint8)
    for j in range(d):
        if kind[j] == 2:
            g, msk = _best_nominal(j, node, layout, nmask, ca, cells,
                                   LeafFragments(fr, fw, fcell), base, m_total, rule)
            if msk.shape[0] > 0 and g > best_gain:
                best_gain, best_j, best_thr, best_mask = g, j, 0.0, msk
            continue
        lo = nlo[node, j]
        hi = nhi[node, j]
        # observed values of the leaf's fragments, sorted
        nobs = 0
        for i in range(nfr):
            if not np.isnan(Z[fr[i], j]):
                nobs += 1
        if nobs < 2:
            continue
        ov = np.empty(nobs)
        ow = np.empty(nobs)
        oc = np.empty(nobs, np.int64)
        k = 0
        for i in range(nfr):
            v = Z[fr[i], j]
            if not np.isnan(v):
                ov[k] = v
                ow[k] = fw[i]
                oc[k] = fcell[i]
                k += 1
        order = np.argsort(ov, kind="mergesort")
        ov = ov[order]
        ow = ow[order]
        oc = oc[order]
        theta = _candidates(ov, cells, clo, chi, j, lo, hi, integer[j], mode, max_cand,
                            min_width[j])
        K = theta.shape[0]
        if K == 0:
            continue
        # leaf-level observed weight left of each threshold (admissibility, EOGT masses)
        wl = np.zeros(K)
        cum = 0.0
        i = 0
        for kk in range(K):
            while i < nobs and ov[i] <= theta[kk]:
                cum += ow[i]
                i += 1
            wl[kk] = cum
        tot_obs = cum
        while i < nobs:
            tot_obs += ow[i]
            i += 1
        # missing weight per cell and in the leaf
        miss = np.zeros(nc)
        for q in range(nfr):
            if np.isnan(Z[fr[q], j]):
                miss[fcell[q]] += fw[q]
        leaf_miss = 0.0
        for q in range(nc):
            leaf_miss += miss[q]
        gain = np.zeros(K)
        # per-cell sweep over the thresholds strictly inside the cell's interval
        cstart = np.zeros(nc + 1, np.int64)
        for q in range(nobs):
            cstart[oc[q] + 1] += 1
        for q in range(nc):
            cstart[q + 1] += cstart[q]
        pos = cstart[:nc].copy()
        cv = np.empty(nobs)
        cw = np.empty(nobs)
        for q in range(nobs):  # stable: stays sorted by value within each cell
            c = oc[q]
            cv[pos[c]] = ov[q]
            cw[pos[c]] = ow[q]
            pos[c] += 1
        for q in range(nc):
            c = cells[q]
            a = clo[c, j]
            b = chi[c, j]
            k0 = np.searchsorted(theta, a, side="right")
            k1 = np.searchsorted(theta, b, side="left")
            if k1 <= k0:
                continue
            Rc = cR[c]
            Uc = cU[c]
            s = cstart[q]
            e = cstart[q + 1]
            cum = 0.0
            for kk in range(k0, k1):
                th = theta[kk]
                while s < e and cv[s] <= th:
                    cum += cw[s]
                    s += 1
                f = _frac_ordered(th, a, b)
                ul = Uc * f
                ur = Uc - ul
                if approx:
                    fl = _frac_ordered(th, lo, hi)
                    rl_leaf = wl[kk] + leaf_miss * fl
                    rr_leaf = tot_obs + leaf_miss - rl_leaf
                    wt = rl_leaf * f / fl if fl > 0 else 0.0
                    wf = rr_leaf * (1.0 - f) / (1.0 - fl) if fl < 1 else 0.0
                    rl = Rc * wt / (wt + wf) if wt + wf > 0 else 0.0
                    rr = Rc - rl
                else:
                    rl = (cum + miss[q] * f) / m_total
                    rr = Rc - rl
                gain[kk] += base[q] - cell_risk(rl, ul, prior, loss) - cell_risk(
                    rr, ur, prior, loss)
        for kk in range(K):
            if wl[kk] < min_rows or tot_obs - wl[kk] < min_rows:
                continue
            if gain[kk] > best_gain:
                best_gain = gain[kk]
                best_j = j
                best_thr = theta[kk]
    return best_gain, best_j, best_thr, best_mask


@njit(cache=True, nogil=True)
def _best_nominal(j, node, layout, nmask, ca, cells, frag, base, m_total, rule):
    """Best left level set of nominal column ``j`` (mask over its ``k`` levels)."""
    Z, off, k = layout.Z, layout.nom_off[j], layout.nlev[j]
    fr, fw, fcell = frag.row, frag.w, frag.cell
    cmask, cR, cU = ca.cmask, ca.cR, ca.cU
    prior, loss, min_rows, approx, max_exh = rule.prior, rule.loss, rule.min_rows, \
        rule.approx, rule.max_exh
    lv = np.empty(k, np.int64)
    nl = 0
    for v in range(k):
        if nmask[node, off + v]:
            lv[nl] = v
            nl += 1
    empty = np.zeros(0, np.uint8)
    if nl < 2:
        return -1.0, empty
    lv = lv[:nl]
    nc = cells.shape[0]
    cnt = np.zeros((nc, nl))
    miss = np.zeros(nc)
    where = np.full(k, -1, np.int64)
    for q in range(nl):
        where[lv[q]] = q
    leaf_cnt = np.zeros(nl)
    for i in range(fr.shape[0]):
        x = Z[fr[i], j]
        if np.isnan(x):
            miss[fcell[i]] += fw[i]
        else:
            q = where[int(x)]
            cnt[fcell[i], q] += fw[i]
            leaf_cnt[q] += fw[i]
    leaf_miss = 0.0
    for q in range(nc):
        leaf_miss += miss[q]
    allowed = np.zeros((nc, nl), np.bool_)
    n_allowed = np.zeros(nc)
    for q in range(nc):
        c = cells[q]
        for t in range(nl):
            if cmask[c, off + lv[t]]:
                allowed[q, t] = True
                n_allowed[q] += 1
    # candidate subsets as boolean rows over the leaf's levels
    if nl <= max_exh:
        n_sub = (1 << (nl - 1)) - 1
        subs = np.zeros((n_sub, nl), np.bool_)
        for s in range(n_sub):
            code = s + 1
            for t in range(nl - 1):
                subs[s, t] = (code >> t) & 1 == 1
    else:
        dens = leaf_cnt.copy()
        order = np.argsort(-dens, kind="mergesort")
        subs = np.zeros((2 * nl - 1, nl), np.bool_)
        for t in range(nl):
            subs[t, t] = True
        for t in range(nl - 1):
            for u in range(t + 1):
                subs[nl + t, order[u]] = True
    tot = 0.0
    for t in range(nl):
        tot += leaf_cnt[t]
    best = -1.0
    best_s = -1
    for s in range(subs.shape[0]):
        wl = 0.0
        nleft = 0
        for t in range(nl):
            if subs[s, t]:
                wl += leaf_cnt[t]
                nleft += 1
        if wl < min_rows or tot - wl < min_rows:
            continue
        fl = nleft / nl
        g = 0.0
        for q in range(nc):
            if n_allowed[q] == 0:
                continue
            a = 0.0
            rl_obs = 0.0
            for t in range(nl):
                if subs[s, t] and allowed[q, t]:
                    a += 1.0
                    rl_obs += cnt[q, t]
            f = a / n_allowed[q]
            if f <= 0.0 or f >= 1.0:
                continue
            c = cells[q]
            Rc = cR[c]
            Uc = cU[c]
            if approx:
                rl_leaf = wl + leaf_miss * fl
                rr_leaf = tot + leaf_miss - rl_leaf
                wt = rl_leaf * f / fl
                wf = rr_leaf * (1.0 - f) / (1.0 - fl)
                rl = Rc * wt / (wt + wf) if wt + wf > 0 else 0.0
            else:
                rl = (rl_obs + miss[q] * f) / m_total
            g += base[q] - cell_risk(rl, Uc * f, prior, loss) - cell_risk(
                Rc - rl, Uc * (1.0 - f), prior, loss)
        if g > best:
            best = g
            best_s = s
    if best_s < 0:
        return -1.0, empty
    out = np.zeros(k, np.uint8)
    for t in range(nl):
        if subs[best_s, t]:
            out[lv[t]] = 1
    return best, out
