"""Star-node sampler of generative forests (Nock & Guillame-Bert 2023, Alg. 1-3 and 6; spec
``generative_forests.md`` §3.1, §3.4, §4.3).

Every tree keeps a *star* node, initially its root; the current region ``C`` starts as the root
box. Repeatedly pick an unfinished tree (``order="iterative"``: tree after tree, Alg. 3;
``"random"``: Alg. 6), branch its star left with probability ``q`` and intersect ``C`` with the
child's box; when every star is a leaf, draw uniformly in ``C``.

``branch="exact"`` (GF): ``q = R(C ∩ left) / R(C)`` from the cell masses (Lemma 4.4: the cell law is
``R(C)`` for any order). ``branch="approx"`` (EOGT, eq. (8)): ``q̂ ∝ π_v · |C_j ∩ v| / |v_j|``, the
child's branching probability times the share of the child's extent on the split column that
``C`` covers — only arc probabilities are needed; the law depends on the order. With the
iterative order, :func:`approx_log_prob` gives the exact density of that law
(:mod:`~forestgen.families.intersection.regions` its regions compatible with partial evidence).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from forestgen.families.intersection.cells import unit_hash
from forestgen.parallel import parallel_kernel
from forestgen.tree.arrays import ForestArrays


class GeometryArrays(NamedTuple):
    """A forest and its node boxes as the compiled walks read them
    (:meth:`TreeGeometry.kernel_arrays`): split column, threshold, children, nominal level
    sets, roots, training weight per node, ``share`` (each split node's left share of its own
    extent), node boxes ``lo, hi, mask`` and the nominal columns' offsets and level counts."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    cat_left: np.ndarray
    roots: np.ndarray
    weight: np.ndarray
    share: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray
    nom_off: np.ndarray
    nlev: np.ndarray


class LevelWords(NamedTuple):
    """Nominal level sets as bit words (:meth:`TreeGeometry.level_words`)."""

    word_off: np.ndarray
    node_bits: np.ndarray
    left_bits: np.ndarray


class TreeGeometry:
    """Per-node boxes and data weights of a forest's nodes (encoded units).

    ``lo, hi [N, d]`` intervals ``(lo, hi]`` per ordered column and ``mask [N, n_levels_total]``
    allowed levels of nominal columns (offsets ``nom_off``); ``weight [N]`` the training weight
    stored in ``forest.node_value[:, 0]``. Roots span the box ``box_lo, box_hi`` with the
    nominal levels ``box_mask`` (``None``: every level).
    """

    def __init__(self, forest: ForestArrays, box_lo: np.ndarray, box_hi: np.ndarray,
                 nom_off: np.ndarray, nlev: np.ndarray, box_mask: np.ndarray | None = None):
        N = len(forest.feature)
        d = len(box_lo)
        n_nom = max(1, int(sum(nlev[j] for j in range(d) if nom_off[j] >= 0)))
        self.forest = forest
        self.nom_off = np.asarray(nom_off)
        self.nlev = np.asarray(nlev)
        self.lo = np.tile(np.asarray(box_lo, float), (N, 1))
        self.hi = np.tile(np.asarray(box_hi, float), (N, 1))
        self.mask = np.ones((N, n_nom), bool)
        if box_mask is not None:
            self.mask[:, : len(box_mask)] = np.asarray(box_mask, bool)
        f = forest
        for node in range(N):  # parents precede their children
            j = f.feature[node]
            if j < 0:
                continue
            a, b = f.left[node], f.right[node]
            for c in (a, b):
                self.lo[c], self.hi[c], self.mask[c] = self.lo[node], self.hi[node], \
                    self.mask[node]
            if f.cat_off[node] >= 0:
                o = nom_off[j]
                left = f.cat_left[f.cat_off[node]: f.cat_off[node] + nlev[j]].astype(bool)
                self.mask[a, o: o + nlev[j]] &= left
                self.mask[b, o: o + nlev[j]] &= ~left
            else:
                self.hi[a, j] = min(self.hi[a, j], f.threshold[node])
                self.lo[b, j] = max(self.lo[b, j], f.threshold[node])
        self.weight = np.asarray(forest.node_value[:, 0], float)
        self._kernel_arrays: GeometryArrays | None = None
        self._level_words: LevelWords | None = None

    def level_words(self) -> LevelWords:
        """Nominal level sets as bit words (built once): ``word_off [d]`` the first word of
        each nominal column (-1 otherwise; a column takes ``ceil(levels / 64)`` words),
        ``node_bits [N, W]`` each node's allowed levels, ``left_bits [N, W]`` the levels a
        nominal split sends left (0 at other nodes)."""
        if self._level_words is None:
            f = self.forest
            nominal = self.nom_off >= 0
            n_words = np.where(nominal, (self.nlev + 63) // 64, 0)
            word_off = np.where(nominal, np.cumsum(n_words) - n_words, -1).astype(np.int64)
            left = np.zeros_like(self.mask)
            for node in np.flatnonzero(f.cat_off >= 0):
                j = f.feature[node]
                o, k = self.nom_off[j], self.nlev[j]
                left[node, o: o + k] = f.cat_left[f.cat_off[node]: f.cat_off[node] + k] == 1
            self._level_words = LevelWords(
                word_off, pack_levels(self.mask, self.nom_off, self.nlev, word_off),
                pack_levels(left, self.nom_off, self.nlev, word_off))
        return self._level_words

    def kernel_arrays(self) -> GeometryArrays:
        """The forest and node boxes as the typed arrays of the compiled walks (built once):
        ``feature, threshold, left, right, cat_off, cat_left, roots, weight, node_share, lo,
        hi, mask, nom_off, nlev``; ``node_share`` the share of each node's own extent on its
        split column that goes left (:meth:`left_share` of its box)."""
        if self._kernel_arrays is None:
            f = self.forest
            arrays = (f.feature.astype(np.int64), f.threshold.astype(np.float64),
                      f.cat_off.astype(np.int64), f.cat_left.astype(np.uint8),
                      self.nom_off.astype(np.int64), self.nlev.astype(np.int64),
                      np.ascontiguousarray(self.lo, np.float64),
                      np.ascontiguousarray(self.hi, np.float64), self.mask.astype(np.uint8))
            feature, threshold, cat_off, cat_left, nom_off, nlev, lo, hi, mask = arrays
            share = _node_shares(feature, threshold, cat_off, cat_left, nom_off, nlev, lo, hi,
                                 mask)
            self._kernel_arrays = GeometryArrays(
                feature, threshold, f.left.astype(np.int64), f.right.astype(np.int64), cat_off,
                cat_left, f.roots.astype(np.int64), self.weight.astype(np.float64), share, lo,
                hi, mask, nom_off, nlev)
        return self._kernel_arrays

    def left_share(self, node: int, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray) -> float:
        """Share of the region's extent on the split column of ``node`` that goes left."""
        f = self.forest
        j = f.feature[node]
        if f.cat_off[node] >= 0:
            o = self.nom_off[j]
            k = self.nlev[j]
            allowed = mask[o: o + k]
            left = f.cat_left[f.cat_off[node]: f.cat_off[node] + k].astype(bool)
            tot = allowed.sum()
            return float((allowed & left).sum() / tot) if tot else 0.0
        a, b = lo[j], hi[j]
        return float(min(1.0, max(0.0, (f.threshold[node] - a) / (b - a)))) if b > a else 0.0

    def cut(self, node: int, go_left: bool, lo, hi, mask) -> None:
        """Intersect the region with the chosen child of ``node`` (in place)."""
        f = self.forest
        j = f.feature[node]
        if f.cat_off[node] >= 0:
            o = self.nom_off[j]
            k = self.nlev[j]
            left = f.cat_left[f.cat_off[node]: f.cat_off[node] + k].astype(bool)
            mask[o: o + k] &= left if go_left else ~left
        elif go_left:
            hi[j] = min(hi[j], f.threshold[node])
        else:
            lo[j] = max(lo[j], f.threshold[node])

    def approx_left(self, node: int, lo, hi, mask) -> float:
        """EOGT's ``q̂`` (eq. (8)) of branching left at ``node`` from the region."""
        f = self.forest
        a, b = f.left[node], f.right[node]
        w = self.weight[node]
        s_reg = self.left_share(node, lo, hi, mask)
        s_node = self.left_share(node, self.lo[node], self.hi[node], self.mask[node])
        al = (self.weight[a] / w) * s_reg / s_node if s_node > 0 else 0.0
        ar = (self.weight[b] / w) * (1 - s_reg) / (1 - s_node) if s_node < 1 else 0.0
        return al / (al + ar) if al + ar > 0 else 0.0


def pack_levels(mask: np.ndarray, nom_off: np.ndarray, nlev: np.ndarray,
                word_off: np.ndarray) -> np.ndarray:
    """Level masks ``[n, n_levels_total]`` as bit words ``[n, W]`` (uint64, layout
    ``word_off`` of :meth:`TreeGeometry.level_words`; level ``v`` of a column is bit ``v % 64``
    of its word ``v // 64``)."""
    n_words = [(int(nlev[j]) + 63) // 64 for j in np.flatnonzero(word_off >= 0)]
    out = np.zeros((len(mask), max(1, sum(n_words))), np.uint64)
    for j in np.flatnonzero(word_off >= 0):
        o, k, w = int(nom_off[j]), int(nlev[j]), int(word_off[j])
        bits = np.zeros((len(mask), 64 * ((k + 63) // 64)), np.uint8)
        bits[:, :k] = mask[:, o: o + k]
        packed = np.packbits(bits, axis=1, bitorder="little")
        out[:, w: w + bits.shape[1] // 64] = packed.view("<u8")
    return out


def unpack_levels(words: np.ndarray, nom_off: np.ndarray, nlev: np.ndarray,
                  word_off: np.ndarray, n_levels_total: int) -> np.ndarray:
    """Inverse of :func:`pack_levels`: bool masks ``[n, n_levels_total]``."""
    nominal = np.flatnonzero(word_off >= 0)
    out = (np.empty if len(nominal) else np.ones)((len(words), n_levels_total), bool)
    for j in nominal:
        o, k, w = int(nom_off[j]), int(nlev[j]), int(word_off[j])
        raw = np.ascontiguousarray(words[:, w: w + (k + 63) // 64], "<u8").view(np.uint8)
        out[:, o: o + k] = np.unpackbits(raw, axis=1, count=k, bitorder="little").view(bool)
    return out


def draw_uniform(lo, hi, mask, kind, nom_off, nlev, rng: np.random.Generator) -> np.ndarray:
    """One uniform draw in a region: ``U(lo, hi]`` on numeric columns, a uniform code on
    ordered discrete ones (codes in ``(lo, hi]``) and a uniform allowed level on nominal ones."""
    d = len(lo)
    x = np.empty(d)
    for j in range(d):
        if kind[j] == 2:
            lv = np.flatnonzero(mask[nom_off[j]: nom_off[j] + nlev[j]])
            x[j] = lv[rng.integers(len(lv))]
        elif kind[j] == 1:
            a, b = math.floor(lo[j]) + 1, math.floor(hi[j])
            x[j] = rng.integers(a, b + 1)
        else:
            x[j] = lo[j] + (hi[j] - lo[j]) * rng.random()
    return x


class StarNodeSampler:
    """Star-node sampler over a forest's trees (one row per call of :meth:`draw`).

    ``cells``: ``(lo, hi, mask, R)`` boxes and masses of the joint partition, needed by
    ``branch="exact"``.
    """

    def __init__(self, geometry: TreeGeometry, kind, branch: str = "exact",
                 order: str = "iterative", cells: tuple | None = None):
        if branch not in ("exact", "approx"):
            raise ValueError(f"branch must be 'exact' or 'approx', got {branch!r}")
        if order not in ("iterative", "random"):
            raise ValueError(f"order must be 'iterative' or 'random', got {order!r}")
        if branch == "exact" and cells is None:
            raise ValueError("branch='exact' needs the cells of the partition")
        self.g = geometry
        self.kind = np.asarray(kind)
        self.branch = branch
        self.order = order
        self.cells = cells

    def _cell_left(self, node: int, idx: np.ndarray) -> np.ndarray:
        f = self.g.forest
        j = f.feature[node]
        clo, chi, cmask, _ = self.cells
        if f.cat_off[node] >= 0:
            o = self.g.nom_off[j]
            k = self.g.nlev[j]
            left = f.cat_left[f.cat_off[node]: f.cat_off[node] + k].astype(bool)
            first = np.argmax(cmask[idx, o: o + k], axis=1)
            return left[first]
        return chi[idx, j] <= f.threshold[node]

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        g = self.g
        f = g.forest
        roots = f.roots
        T = len(roots)
        out = np.empty((n, g.lo.shape[1]))
        for i in range(n):
            lo, hi, mask = g.lo[roots[0]].copy(), g.hi[roots[0]].copy(), g.mask[roots[0]].copy()
            star = roots.copy()
            idx = np.arange(len(self.cells[3])) if self.branch == "exact" else None
            todo = [t for t in range(T) if f.feature[star[t]] >= 0]
            while todo:
                t = todo[0] if self.order == "iterative" else todo[rng.integers(len(todo))]
                node = star[t]
                if self.branch == "exact":
                    side = self._cell_left(node, idx)
                    R = self.cells[3][idx]
                    q = R[side].sum() / R.sum()
                else:
                    q = g.approx_left(node, lo, hi, mask)
                go_left = rng.random() < q
                if self.branch == "exact":
                    idx = idx[side == go_left]
                g.cut(node, go_left, lo, hi, mask)
                star[t] = f.left[node] if go_left else f.right[node]
                if f.feature[star[t]] < 0:
                    todo.remove(t)
            out[i] = draw_uniform(lo, hi, mask, self.kind, g.nom_off, g.nlev, rng)
        return out


def approx_log_prob(g: TreeGeometry, Z: np.ndarray, box_lo, box_hi) -> np.ndarray:
    """Log density of EOGT's iterative-order law (§4.3) at complete encoded rows:
    ``log Π q̂ - log μ(C)`` along the path each row follows; ``-inf`` outside the box."""
    f = g.forest
    roots = f.roots
    out = np.empty(len(Z))
    for i, x in enumerate(Z):
        if np.any(np.isnan(x)):
            raise ValueError("approx_log_prob takes complete rows")
        r0 = roots[0]
        lo, hi, mask = g.lo[r0].copy(), g.hi[r0].copy(), g.mask[r0].copy()
        nom = np.flatnonzero(g.nom_off >= 0)
        ordered = np.flatnonzero(g.nom_off < 0)
        if (np.any(x[ordered] <= box_lo[ordered]) or np.any(x[ordered] > box_hi[ordered])
                or any(x[j] < 0 or x[j] >= g.nlev[j] or x[j] != int(x[j]) for j in nom)):
            out[i] = -np.inf
            continue
        lp = 0.0
        for root in roots:
            node = root
            while f.feature[node] >= 0:
                j = f.feature[node]
                if f.cat_off[node] >= 0:
                    go_left = f.cat_left[f.cat_off[node] + int(x[j])] == 1
                else:
                    go_left = x[j] <= f.threshold[node]
                q = g.approx_left(node, lo, hi, mask)
                p = q if go_left else 1.0 - q
                lp += math.log(p) if p > 0 else -math.inf
                g.cut(node, go_left, lo, hi, mask)
                node = f.left[node] if go_left else f.right[node]
        vol = 0.0
        for j in range(len(x)):
            if g.nom_off[j] >= 0:
                o = g.nom_off[j]
                vol += math.log(mask[o: o + g.nlev[j]].sum())
            else:
                vol += math.log(hi[j] - lo[j])
        out[i] = lp - vol
    return out


def approx_sample(g: TreeGeometry, kind, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` draws of EOGT's iterative-order law (the star-node walk with branching (8), then a
    uniform draw in the final region), compiled: the same law as
    ``StarNodeSampler(g, kind, branch="approx")``. Every uniform number comes from a
    counter-based hash of one seed drawn from ``rng`` and the (row, draw) index, so results do
    not depend on the thread count (a fork- and thread-safe parallel kernel,
    :func:`~forestgen.parallel.parallel_kernel`)."""
    seed = int(rng.integers(0, 2**63 - 1))
    return _approx_sample_kernel(int(n), seed, g.kernel_arrays(), np.asarray(kind, np.int64))


@parallel_kernel
def _approx_sample_kernel(n, seed, geo, kind):
    feature, left, right, roots = geo.feature, geo.left, geo.right, geo.roots
    nlo, nhi, nmask = geo.lo, geo.hi, geo.mask
    d = nlo.shape[1]
    out = np.empty((n, d))
    r0 = roots[0]
    for i in prange(n):
        lo = nlo[r0].copy()
        hi = nhi[r0].copy()
        mask = nmask[r0].copy()
        k = 0
        for t in range(roots.shape[0]):
            node = roots[t]
            while feature[node] >= 0:
                q = approx_q(node, geo, lo, hi, mask)
                go_left = unit_hash(seed, i, k) < q
                k += 1
                cut_region(node, go_left, geo, lo, hi, mask)
                node = left[node] if go_left else right[node]
        for j in range(d):
            u = unit_hash(seed, i, k)
            k += 1
            out[i, j] = uniform_coordinate(j, u, kind, lo, hi, mask, geo)
    return out


@njit(cache=True, nogil=True)
def uniform_coordinate(j, u, kind, lo, hi, mask, geo):
    """Coordinate ``j`` of a uniform draw in the region, from one uniform ``u``: a level of the
    mask (nominal), an integer in ``(lo, hi]`` (ordered) or a point of ``[lo, hi)``."""
    if kind[j] == 2:
        o = geo.nom_off[j]
        cnt = 0
        for v in range(geo.nlev[j]):
            cnt += mask[o + v]
        pick = min(int(u * cnt), cnt - 1)
        for v in range(geo.nlev[j]):
            if mask[o + v]:
                if pick == 0:
                    return v
                pick -= 1
        return math.nan
    if kind[j] == 1:
        a0 = math.floor(lo[j]) + 1
        cnt = math.floor(hi[j]) - a0 + 1
        return a0 + min(int(u * cnt), cnt - 1)
    return lo[j] + (hi[j] - lo[j]) * u


@njit(cache=True, nogil=True)
def _left_share(node, j, threshold, cat_off, cat_left, nom_off, nlev, lo, hi, mask):
    """Share of a region's extent on column ``j`` that ``node`` sends left (as
    :meth:`TreeGeometry.left_share`)."""
    if cat_off[node] >= 0:
        o = nom_off[j]
        tot = 0
        a = 0
        for v in range(nlev[j]):
            if mask[o + v]:
                tot += 1
                if cat_left[cat_off[node] + v] == 1:
                    a += 1
        return a / tot if tot > 0 else 0.0
    return interval_share(threshold[node], lo[j], hi[j])


@njit(cache=True, nogil=True)
def interval_share(threshold, x0, x1):
    """Share of the interval ``(x0, x1]`` at or below ``threshold`` (0 when it is empty)."""
    if x1 <= x0:
        return 0.0
    return min(1.0, max(0.0, (threshold - x0) / (x1 - x0)))


@njit(cache=True, nogil=True)
def branch_q(node, s_reg, left, right, weight, share):
    """EOGT's ``q̂`` (eq. (8)) at ``node`` from the region's left share ``s_reg`` on its split
    column and the node's own ``share[node]``."""
    s_node = share[node]
    w = weight[node]
    al = (weight[left[node]] / w) * s_reg / s_node if s_node > 0 else 0.0
    ar = (weight[right[node]] / w) * (1 - s_reg) / (1 - s_node) if s_node < 1 else 0.0
    return al / (al + ar) if al + ar > 0 else 0.0


@njit(cache=True, nogil=True)
def approx_q(node, geo, lo, hi, mask):
    """EOGT's ``q̂`` (eq. (8)) of branching left at ``node`` from the region ``(lo, hi, mask)``
    (as :meth:`TreeGeometry.approx_left`, compiled; ``geo``: :class:`GeometryArrays`)."""
    s_reg = _left_share(node, geo.feature[node], geo.threshold, geo.cat_off, geo.cat_left,
                        geo.nom_off, geo.nlev, lo, hi, mask)
    return branch_q(node, s_reg, geo.left, geo.right, geo.weight, geo.share)


@njit(cache=True, nogil=True)
def cut_region(node, go_left, geo, lo, hi, mask):
    """Intersect the region with the chosen child of ``node`` in place (as
    :meth:`TreeGeometry.cut`, compiled)."""
    threshold, cat_off, cat_left, nom_off, nlev = geo.threshold, geo.cat_off, geo.cat_left, \
        geo.nom_off, geo.nlev
    j = geo.feature[node]
    if cat_off[node] >= 0:
        o = nom_off[j]
        for v in range(nlev[j]):
            if (cat_left[cat_off[node] + v] == 1) != go_left:
                mask[o + v] = 0
    elif go_left:
        hi[j] = min(hi[j], threshold[node])
    else:
        lo[j] = max(lo[j], threshold[node])


@njit(cache=True, nogil=True)
def _node_shares(feature, threshold, cat_off, cat_left, nom_off, nlev, lo, hi, mask):
    """Left share of every split node's own box (0 at leaves)."""
    out = np.zeros(feature.shape[0])
    for node in range(feature.shape[0]):
        j = feature[node]
        if j >= 0:
            out[node] = _left_share(node, j, threshold, cat_off, cat_left, nom_off, nlev,
                                    lo[node], hi[node], mask[node])
    return out
