"""Energy splitter: best-first trees contrasting a data mass ``P`` with a model mass ``Q``.

NRGBoost (Bravo, ICLR 2025, Sec. 3 and App. A; spec ``nrgboost_def.md`` §3.2-3.6). Per child the
second-order gain scores ``P^2/Q`` (``"chi2"``), or equivalently ``G^2/H`` with ``G = P - Q``,
``H = Q`` (``"gradhess"``: the linear terms cancel between parent and children, so both pick the
same splits); ``"kl"`` scores ``P log(P/Q)`` (greedy multiplicative boosting, App. C).
A split is rejected when a child has ``P/Q > max_ratio`` or ``Q = 0`` (spec §3.3), or when it
gains no more than ``1e-12`` (§8.8) — except at the root, which takes its most balanced valid
split even at zero gain: with quantile bins the base measure ``q0`` already matches every
single-column marginal, so no first split gains anything and only the splits below it can show
a dependence between columns (without this, boosting stops at round one on such tables). Gains
within ``1e-12`` of each other are ties, broken towards the more balanced split.
``P`` comes from data rows, ``Q`` either from model-sample
rows or, in round one, analytically from a product measure ``q0`` (``Q(box) = prod_j q0_j(S_j)``).

Trees grow on grid codes (:class:`~forestgen.data.grid.Grid`): ordered columns split at a
threshold (``code <= thr`` left; a column's missing code goes to the side in ``nan_left``),
nominal columns by a level subset found by sorting levels by ``P_k/Q_k`` and scanning
prefixes (§3.6). Feature subsampling per node draws ``mtry`` columns from the tree's Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from forestgen.registry import register

CHI2 = 0
KL = 1
GRADHESS = 2
CRITERIA = {"chi2": CHI2, "kl": KL, "gradhess": GRADHESS}
MIN_GAIN = 1e-12
MIN_MASS = 1e-12  # smallest model mass of a child (masses are normalised to 1)


@njit(cache=True, nogil=True)
def child_score(P, Q, crit):
    """Per-child score; the split gain is ``score(L) + score(R) - score(parent)``."""
    if crit == KL:
        return P * np.log(P / Q) if P > 0.0 else 0.0
    if crit == GRADHESS:
        G = P - Q
        return G * G / Q
    return P * P / Q


@njit(cache=True, nogil=True)
def _valid(P, Q, max_ratio):
    # Q is often a difference of sums: a tiny positive rounding residue means an empty child
    return Q > MIN_MASS and P <= max_ratio * Q


@njit(cache=True, nogil=True)
def _better(g, bal, best, best_bal):
    """A candidate beats the best so far by more than :data:`MIN_GAIN`, or ties it (within
    ``MIN_GAIN``) and is more balanced (larger smaller-child data mass ``bal``)."""
    return g > best + MIN_GAIN or (g >= best - MIN_GAIN and bal > best_bal)


@njit(cache=True, nogil=True)
def _node_hist(f, Xd, wd, di, ds, de, Xq, wq, qi, qs, qe, analytic, mask, q0, off, n_codes,
               Qnode, hP, hQ):
    nc = n_codes[f]
    for k in range(nc):
        hP[k] = 0.0
        hQ[k] = 0.0
    for r in range(ds, de):
        i = di[r]
        hP[Xd[f, i]] += wd[i]
    if analytic:
        tot = 0.0
        for k in range(nc):
            if mask[off[f] + k]:
                tot += q0[off[f] + k]
        for k in range(nc):
            if mask[off[f] + k]:
                hQ[k] = Qnode * q0[off[f] + k] / tot
    else:
        for r in range(qs, qe):
            i = qi[r]
            hQ[Xq[f, i]] += wq[i]


@njit(cache=True, nogil=True)
def _best_split(Xd, wd, di, ds, de, Xq, wq, qi, qs, qe, analytic, mask, q0, off, n_codes,
                n_values, has_miss, ordered, Pn, Qn, crit, max_ratio, mtry, rng, feats, hP, hQ,
                order, keys, out_left):
    """Best split of one node: (gain, feature, thr, nan_left); nominal left sets -> out_left."""
    d = Xd.shape[0]
    for s in range(d):
        feats[s] = s
    best = -np.inf
    best_bal = -1.0
    bf = -1
    bt = -1
    bnl = 0
    if Qn <= MIN_MASS:
        return best, bf, bt, bnl
    parent = child_score(Pn, Qn, crit)
    for s in range(mtry):
        t = s + rng.integers(0, d - s)
        tmp = feats[s]
        feats[s] = feats[t]
        feats[t] = tmp
        f = feats[s]
        nc = n_codes[f]
        if nc < 2:
            continue
        _node_hist(f, Xd, wd, di, ds, de, Xq, wq, qi, qs, qe, analytic, mask, q0, off, n_codes,
                   Qn, hP, hQ)
        if ordered[f]:
            nv = n_values[f]
            mP = hP[nv] if has_miss[f] else 0.0
            mQ = hQ[nv] if has_miss[f] else 0.0
            n_side = 2 if has_miss[f] else 1
            for side in range(n_side):
                nl = 1 - side  # side 0: missing goes left
                cP = mP if nl == 1 and has_miss[f] else 0.0
                cQ = mQ if nl == 1 and has_miss[f] else 0.0
                for k in range(nv - 1):
                    cP += hP[k]
                    cQ += hQ[k]
                    PR = Pn - cP
                    QR = Qn - cQ
                    if not (_valid(cP, cQ, max_ratio) and _valid(PR, QR, max_ratio)):
                        continue
                    g = child_score(cP, cQ, crit) + child_score(PR, QR, crit) - parent
                    if _better(g, min(cP, PR), best, best_bal):
                        best = g
                        best_bal = min(cP, PR)
                        bf = f
                        bt = k
                        bnl = nl
            # missing alone vs every value
            if has_miss[f]:
                PR = Pn - mP
                QR = Qn - mQ
                if _valid(mP, mQ, max_ratio) and _valid(PR, QR, max_ratio):
                    g = child_score(mP, mQ, crit) + child_score(PR, QR, crit) - parent
                    if _better(g, min(mP, PR), best, best_bal):
                        best = g
                        best_bal = min(mP, PR)
                        bf = f
                        bt = -1
                        bnl = 1
        else:
            m = 0
            for k in range(nc):
                if hP[k] > 0.0 or hQ[k] > 0.0:
                    order[m] = k
                    if hQ[k] > 0.0:
                        keys[m] = hP[k] / hQ[k]
                    else:
                        keys[m] = np.inf
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
                PR = Pn - cP
                QR = Qn - cQ
                if not (_valid(cP, cQ, max_ratio) and _valid(PR, QR, max_ratio)):
                    continue
                g = child_score(cP, cQ, crit) + child_score(PR, QR, crit) - parent
                if _better(g, min(cP, PR), best, best_bal):
                    best = g
                    best_bal = min(cP, PR)
                    bf = f
                    bt = q
                    for k2 in range(nc):
                        out_left[k2] = 0
                    for q2 in range(q + 1):
                        out_left[order[srt[q2]]] = 1
    return best, bf, bt, bnl


@njit(cache=True, nogil=True)
def _goes_left(code, f, thr, nl, cat_row, ordered, n_values):
    if ordered[f]:
        if code >= n_values[f]:
            return nl == 1
        return code <= thr
    return cat_row[code] == 1


@njit(cache=True, nogil=True)
def _partition(X, f, idx, s, e, thr, nl, cat_row, ordered, n_values):
    i = s
    k = e - 1
    while i <= k:
        if _goes_left(X[f, idx[i]], f, thr, nl, cat_row, ordered, n_values):
            i += 1
        else:
            tmp = idx[i]
            idx[i] = idx[k]
            idx[k] = tmp
            k -= 1
    return i


@njit(cache=True, nogil=True)
def grow_energy_tree(Xd, wd, Xq, wq, analytic, q0, off, n_codes, n_values, has_miss, ordered,
                     crit, max_ratio, max_leaves, mtry, rng):
    """Grow one tree best-first. ``Xd [d, N]`` data codes with weights ``wd`` (summing to 1);
    ``Xq [d, M]`` model-sample codes with weights ``wq`` (summing to 1), or ``analytic`` with the
    flat product-measure marginals ``q0`` (offsets ``off``).

    Returns tree-local ``feature, thr, nan_left, left, right, cat_rows [n_nodes, max codes]``
    and per node ``P, Q``.
    """
    d, N = Xd.shape
    M = Xq.shape[1]
    cmax = 1
    for j in range(d):
        cmax = max(cmax, n_codes[j])
    total = off[d]
    max_nodes = 2 * max_leaves - 1
    feature = np.full(max_nodes, -1, np.int32)
    thr = np.full(max_nodes, -1, np.int32)
    nan_left = np.zeros(max_nodes, np.uint8)
    left = np.full(max_nodes, -1, np.int32)
    right = np.full(max_nodes, -1, np.int32)
    cat_rows = np.zeros((max_nodes, cmax), np.uint8)
    Pm = np.zeros(max_nodes)
    Qm = np.zeros(max_nodes)
    ds_ = np.zeros(max_nodes, np.int64)
    de_ = np.zeros(max_nodes, np.int64)
    qs_ = np.zeros(max_nodes, np.int64)
    qe_ = np.zeros(max_nodes, np.int64)
    nmask = np.ones((max_nodes if analytic else 1, total), np.uint8)
    g_best = np.full(max_nodes, -np.inf)
    f_best = np.full(max_nodes, -1, np.int64)
    t_best = np.full(max_nodes, -1, np.int64)
    nl_best = np.zeros(max_nodes, np.int64)
    set_best = np.zeros((max_nodes, cmax), np.uint8)
    is_open = np.zeros(max_nodes, np.bool_)
    di = np.arange(N)
    qi = np.arange(M)
    feats = np.empty(d, np.int64)
    hP = np.zeros(cmax)
    hQ = np.zeros(cmax)
    order = np.empty(cmax, np.int64)
    keys = np.empty(cmax)
    Pm[0] = 0.0
    for i in range(N):
        Pm[0] += wd[i]
    Qm[0] = 1.0
    if not analytic:
        Qm[0] = 0.0
        for i in range(M):
            Qm[0] += wq[i]
    ds_[0] = 0
    de_[0] = N
    qs_[0] = 0
    qe_[0] = M
    g, f, t, nl = _best_split(Xd, wd, di, 0, N, Xq, wq, qi, 0, M, analytic, nmask[0], q0, off,
                              n_codes, n_values, has_miss, ordered, Pm[0], Qm[0], crit,
                              max_ratio, mtry, rng, feats, hP, hQ, order, keys, set_best[0])
    g_best[0], f_best[0], t_best[0], nl_best[0] = g, f, t, nl
    is_open[0] = True
    n_nodes = 1
    n_leaves = 1
    while n_leaves < max_leaves:
        node = -1
        # the root splits even without gain (its most balanced valid split): when q0 already
        # matches every single-column marginal, only splits below it can show an interaction
        bg = -MIN_GAIN if n_nodes == 1 else MIN_GAIN
        for c in range(n_nodes):
            if is_open[c] and g_best[c] > bg:
                bg = g_best[c]
                node = c
        if node < 0:
            break
        is_open[node] = False
        f = f_best[node]
        feature[node] = f
        thr[node] = t_best[node]
        nan_left[node] = nl_best[node]
        if ordered[f]:
            for k in range(n_codes[f]):
                cat_rows[node, k] = 1 if _goes_left(k, f, t_best[node], nl_best[node],
                                                    set_best[node], ordered, n_values) else 0
        else:
            for k in range(n_codes[f]):
                cat_rows[node, k] = set_best[node, k]
        dm = _partition(Xd, f, di, ds_[node], de_[node], thr[node], nan_left[node],
                        cat_rows[node], ordered, n_values)
        qm = _partition(Xq, f, qi, qs_[node], qe_[node], thr[node], nan_left[node],
                        cat_rows[node], ordered, n_values)
        for side in range(2):
            c = n_nodes
            n_nodes += 1
            if side == 0:
                left[node] = c
                ds_[c], de_[c], qs_[c], qe_[c] = ds_[node], dm, qs_[node], qm
            else:
                right[node] = c
                ds_[c], de_[c], qs_[c], qe_[c] = dm, de_[node], qm, qe_[node]
            s = 0.0
            for r in range(ds_[c], de_[c]):
                s += wd[di[r]]
            Pm[c] = s
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
                s = 0.0
                for r in range(qs_[c], qe_[c]):
                    s += wq[qi[r]]
                Qm[c] = s
            g, f2, t2, nl2 = _best_split(Xd, wd, di, ds_[c], de_[c], Xq, wq, qi, qs_[c], qe_[c],
                                         analytic, nmask[c if analytic else 0], q0, off, n_codes,
                                         n_values, has_miss, ordered, Pm[c], Qm[c], crit,
                                         max_ratio, mtry, rng, feats, hP, hQ, order, keys,
                                         set_best[c])
            g_best[c], f_best[c], t_best[c], nl_best[c] = g, f2, t2, nl2
            is_open[c] = True
        n_leaves += 1
    return (feature[:n_nodes].copy(), thr[:n_nodes].copy(), nan_left[:n_nodes].copy(),
            left[:n_nodes].copy(), right[:n_nodes].copy(), cat_rows[:n_nodes].copy(),
            Pm[:n_nodes].copy(), Qm[:n_nodes].copy())


@dataclass
class EnergyTree:
    """One grown tree (tree-local ids): node arrays, ``cat_rows[node, code]`` = 1 if that code
    goes left (every split, ordered or not; ordered splits also keep ``thr``/``nan_left``), and
    the node masses ``P``, ``Q`` that grew it."""

    feature: np.ndarray
    thr: np.ndarray
    nan_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_rows: np.ndarray
    P: np.ndarray
    Q: np.ndarray

    @property
    def is_leaf(self) -> np.ndarray:
        return self.feature < 0

    @property
    def n_leaves(self) -> int:
        return int(self.is_leaf.sum())


@register("splitter", "energy")
class EnergySplitter:
    """Grows one tree from data and model masses (see the module docstring).

    Parameters: ``criterion`` (``"chi2"`` — NRGBoost, default; ``"gradhess"``; ``"kl"``),
    ``max_leaves`` (default 256), ``max_ratio`` ``R`` (default 2; ``None`` disables it),
    ``feature_fraction`` of columns drawn per node (``max(1, round(frac·d))``, default 1.0).
    """

    def __init__(self, *, criterion: str = "chi2", max_leaves: int = 256,
                 max_ratio: float | None = 2.0, feature_fraction: float = 1.0):
        self.criterion = criterion
        self.max_leaves = max_leaves
        self.max_ratio = max_ratio
        self.feature_fraction = feature_fraction

    def get_params(self) -> dict:
        return dict(vars(self))

    def _check(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {sorted(CRITERIA)}, got "
                             f"{self.criterion!r}")
        if not isinstance(self.max_leaves, (int, np.integer)) or self.max_leaves < 2:
            raise ValueError(f"max_leaves must be an integer >= 2, got {self.max_leaves!r}")
        r = self.max_ratio
        if r is not None and not (isinstance(r, (int, float)) and r > 1):
            raise ValueError(f"max_ratio must be > 1 or None, got {r!r}")
        ff = self.feature_fraction
        if not (isinstance(ff, (int, float)) and 0 < ff <= 1):
            raise ValueError(f"feature_fraction must be in (0, 1], got {ff!r}")

    def grow(self, grid, data_codes: np.ndarray, data_weight: np.ndarray,
             model_codes: np.ndarray | None, model_weight: np.ndarray | None,
             q0_flat: np.ndarray | None, rng: np.random.Generator) -> EnergyTree:
        """``data_codes``/``model_codes``: feature-major ``[d, n]`` int32 grid codes; weights
        sum to one. With ``model_codes=None`` the model mass is the product measure ``q0_flat``."""
        self._check()
        d = data_codes.shape[0]
        analytic = model_codes is None
        if analytic:
            model_codes = np.zeros((d, 0), np.int32)
            model_weight = np.zeros(0)
            q0_flat = np.asarray(q0_flat, np.float64)
        else:
            q0_flat = np.zeros(1)
        mtry = max(1, int(round(self.feature_fraction * d)))
        R = np.inf if self.max_ratio is None else float(self.max_ratio)
        out = grow_energy_tree(
            np.ascontiguousarray(data_codes, np.int32), np.asarray(data_weight, np.float64),
            np.ascontiguousarray(model_codes, np.int32), np.asarray(model_weight, np.float64),
            analytic, q0_flat, grid.code_offsets, grid.n_codes.astype(np.int64),
            grid.n_values.astype(np.int64), grid.has_missing, grid.ordered,
            CRITERIA[self.criterion], R, int(self.max_leaves), mtry, rng)
        feature, thr, nan_left, left, right, cat_rows, P, Q = out
        return EnergyTree(feature, thr, nan_left, left, right, cat_rows, P, Q)
