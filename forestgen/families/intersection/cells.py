"""``CellTable``: the partition induced by *all* trees of a generative forest (Nock &
Guillame-Bert 2023, eq. (3); spec ``generative_forests.md`` §1.3, §2.9).

Only cells holding training mass are kept (``|P⁺| ≤`` number of row fragments). Per cell: its box
(interval ``(lo, hi]`` per ordered column, allowed-level mask per nominal column), data mass
``R(C)`` (fraction of the training weight), uniform mass ``U(C)`` (volume ratio to the root box),
its leaf in every tree and its row fragments. A row with a missing value on a split column is
split into two fragments weighted by the volume shares of the two children (spec §2.7, fractional
variant); a fragment lighter than ``min_fragment`` (default 1/8 of a row) instead goes to one
child, left with probability equal to that share, drawn from a hash of ``(seed, row, node)`` —
so a row has at most ``2 / min_fragment`` fragments, masses are exact in expectation, and the
result is deterministic. ``min_fragment=inf`` is the reference code's hard random assignment.

Per tree node: box, data weight ``nR`` (row units) and the list of cells inside it (an inverted
index), so splitting leaf ``λ`` costs ``O(rows in λ + cells in λ · T)``, independent of the rest of
the table. All state is flat arrays; the kernels are Numba.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

KIND_NOMINAL = 2


class Layout(NamedTuple):
    """The training rows ``Z [n, d]`` and the column layout (kind codes, nominal offsets,
    level counts) a split kernel reads."""

    Z: np.ndarray
    kind: np.ndarray
    nom_off: np.ndarray
    nlev: np.ndarray


class NodeArrays(NamedTuple):
    """Per tree node (all trees): split feature, threshold, children, tree, nominal split
    mask, box ``(nlo, nhi, nmask)`` and training mass ``nR``."""

    nfeat: np.ndarray
    nthr: np.ndarray
    nleft: np.ndarray
    nright: np.ndarray
    ntree: np.ndarray
    nsplit: np.ndarray
    nlo: np.ndarray
    nhi: np.ndarray
    nmask: np.ndarray
    nR: np.ndarray


class CellArrays(NamedTuple):
    """Per cell of the joint partition: box, mass ``cR``, measure share ``cU``, its leaf in
    every tree and its run of row fragments (``cf_start``, ``cf_count``)."""

    clo: np.ndarray
    chi: np.ndarray
    cmask: np.ndarray
    cR: np.ndarray
    cU: np.ndarray
    cleaf: np.ndarray
    cf_start: np.ndarray
    cf_count: np.ndarray


class CellBoxes(NamedTuple):
    """Boxes ``(lo, hi]`` with nominal level masks: cells (``[n, d]``, ``[n, n_nom]``) or one
    box (the root's)."""

    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray


class SplitCut(NamedTuple):
    """The split to apply: tree node, column, threshold, nominal left-level mask."""

    node: int
    j: int
    thr: float
    mask: np.ndarray


class CutRule(NamedTuple):
    """How cells are cut: EOGT's approximate masses, the lightest fragment split by share
    (lighter ones go to one side at random, hashed from ``seed``), the training rows."""

    approx: bool
    min_frag: float
    seed: int
    m_total: float


class FragmentPools(NamedTuple):
    """The growable pools: row fragments (``f_row``, ``f_w``, ``f_len`` used) and the leaves'
    cell lists (``lc_pool``, ``lc_len`` used)."""

    f_row: np.ndarray
    f_w: np.ndarray
    f_len: int
    lc_pool: np.ndarray
    lc_len: int


class LeafCellIndex(NamedTuple):
    """Per tree node: the start, count and capacity of its run of cell ids in the pool."""

    lc_start: np.ndarray
    lc_count: np.ndarray
    lc_cap: np.ndarray


class CellTable:
    """Joint partition of ``n_trees`` trees grown on encoded rows ``Z``.

    ``kind`` per column: 0 numeric, 1 ordered discrete, 2 nominal (see
    :func:`forestgen.families.boxes.column_layout`); ``integer`` marks integer-coded ordered
    columns (thresholds half-way between integers); ``lo, hi`` the root box and ``root_mask``
    its levels of the nominal columns (uint8, ``None``: every level).
    """

    def __init__(self, Z: np.ndarray, kind: np.ndarray, nlev: np.ndarray, nom_off: np.ndarray,
                 n_nom: int, integer: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_trees: int,
                 max_splits: int, approx: bool = False, min_fragment: float = 1.0 / 8,
                 seed: int = 0, root_mask: np.ndarray | None = None):
        m, d = Z.shape
        self.min_fragment = float(min_fragment)
        self.seed = int(seed) % 2**63
        self.Z = np.ascontiguousarray(Z, np.float64)
        self.kind = np.asarray(kind, np.int64)
        self.nlev = np.asarray(nlev, np.int64)
        self.nom_off = np.asarray(nom_off, np.int64)
        self.integer = np.asarray(integer, np.bool_)
        # narrowest side a continuous split may leave (point masses stay finite densities)
        self.min_width = np.where(self.integer | (self.kind == KIND_NOMINAL), 0.0,
                                  1e-6 * (np.asarray(hi, float) - np.asarray(lo, float)))
        self.approx = approx
        self.n_trees = int(n_trees)
        self.m_total = float(m)
        self.root_lo = np.asarray(lo, float)
        self.root_hi = np.asarray(hi, float)
        n_nom = max(int(n_nom), 1)
        self.root_mask = np.ones(n_nom, np.uint8)
        if root_mask is not None:
            self.root_mask[: len(root_mask)] = root_mask
        N = self.n_trees + 2 * int(max_splits)
        self.nfeat = np.full(N, -1, np.int64)
        self.nthr = np.zeros(N)
        self.nleft = np.full(N, -1, np.int64)
        self.nright = np.full(N, -1, np.int64)
        self.ntree = np.zeros(N, np.int64)
        self.nsplit = np.zeros((N, n_nom), np.uint8)  # left level set of nominal splits
        self.nlo = np.zeros((N, d))
        self.nhi = np.zeros((N, d))
        self.nmask = np.zeros((N, n_nom), np.uint8)  # allowed levels of the node's box
        self.nR = np.zeros(N)
        self.n_nodes = self.n_trees
        self.nlo[: self.n_trees] = lo
        self.nhi[: self.n_trees] = hi
        self.nmask[: self.n_trees] = self.root_mask
        self.ntree[: self.n_trees] = np.arange(self.n_trees)
        self.nR[: self.n_trees] = m
        # cells: one, the root box, holding every row once
        C = max(16, min(m, 1024))
        self.clo = np.zeros((C, d))
        self.chi = np.zeros((C, d))
        self.cmask = np.zeros((C, n_nom), np.uint8)
        self.cR = np.zeros(C)
        self.cU = np.zeros(C)
        self.cleaf = np.zeros((C, self.n_trees), np.int64)
        self.cf_start = np.zeros(C, np.int64)
        self.cf_count = np.zeros(C, np.int64)
        self.n_cells = 1
        self.clo[0], self.chi[0], self.cmask[0] = lo, hi, self.root_mask
        self.cR[0], self.cU[0] = 1.0, 1.0
        self.cleaf[0] = np.arange(self.n_trees)
        self.cf_count[0] = m
        self.f_row = np.arange(2 * m + 16, dtype=np.int64)
        self.f_w = np.ones(2 * m + 16)
        self.f_len = m
        # leaf -> cells vectors
        self.lc_start = np.zeros(N, np.int64)
        self.lc_count = np.zeros(N, np.int64)
        self.lc_cap = np.zeros(N, np.int64)
        self.lc_pool = np.zeros(4 * self.n_trees + 64, np.int64)
        self.lc_start[: self.n_trees] = np.arange(self.n_trees) * 4
        self.lc_cap[: self.n_trees] = 4
        self.lc_count[: self.n_trees] = 1
        self.lc_len = 4 * self.n_trees

    # ------------------------------------------------------------------ views
    @property
    def R(self) -> np.ndarray:
        return self.cR[: self.n_cells]

    @property
    def U(self) -> np.ndarray:
        return self.cU[: self.n_cells]

    def cells_of(self, node: int) -> np.ndarray:
        s = self.lc_start[node]
        return self.lc_pool[s: s + self.lc_count[node]]

    def is_leaf(self, node: int) -> bool:
        return self.nfeat[node] < 0

    def row_fragments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, cell, weight)`` of every live fragment."""
        n = self.n_cells
        cells = np.repeat(np.arange(n), self.cf_count[:n])
        idx = _ranges(self.cf_start[:n], self.cf_count[:n])
        return self.f_row[idx], cells, self.f_w[idx]

    # ------------------------------------------------------------------ split
    def split(self, node: int, j: int, thr: float, left_levels: np.ndarray) -> tuple[int, int]:
        """Split leaf ``node`` on column ``j`` (``x <= thr`` or level in ``left_levels`` goes
        left); returns the two new node ids."""
        if self.nfeat[node] >= 0:
            raise ValueError(f"node {node} is not a leaf")
        if self.n_nodes + 2 > len(self.nfeat):
            raise ValueError("node capacity exhausted (more splits than max_splits)")
        cells = self.cells_of(node)
        need = self.n_cells + len(cells)
        if need > len(self.cR):
            self._grow_cells(2 * need)
        frags = int(self.cf_count[cells].sum())
        live = int(self.cf_count[: self.n_cells].sum())
        if self.f_len + frags > len(self.f_row):
            self._compact_fragments(live + frags)
        live_lc = int(self.lc_cap[: self.n_nodes].sum())
        if self.lc_len + 2 * len(cells) * (self.n_trees + 2) > len(self.lc_pool) and (
                self.lc_len > 2 * live_lc):
            self._compact_leaf_cells()
        mask = np.zeros(self.nsplit.shape[1], np.uint8)
        if self.kind[j] == KIND_NOMINAL:
            o = self.nom_off[j]
            mask[o: o + len(left_levels)] = left_levels
        out = _apply_split(
            SplitCut(int(node), int(j), float(thr), mask),
            CutRule(bool(self.approx), float(self.min_fragment), int(self.seed),
                    float(self.m_total)),
            self.n_nodes, self.n_cells, *self.bundles(),
            FragmentPools(self.f_row, self.f_w, int(self.f_len), self.lc_pool, int(self.lc_len)))
        self.n_cells, self.f_row, self.f_w, self.f_len, self.lc_pool, self.lc_len = out
        left, right = self.n_nodes, self.n_nodes + 1
        self.n_nodes += 2
        return left, right

    def bundles(self) -> tuple[Layout, NodeArrays, CellArrays, LeafCellIndex]:
        """The table's arrays as the split kernels take them (views: kernels write through)."""
        return (Layout(self.Z, self.kind, self.nom_off, self.nlev),
                NodeArrays(self.nfeat, self.nthr, self.nleft, self.nright, self.ntree,
                           self.nsplit, self.nlo, self.nhi, self.nmask, self.nR),
                CellArrays(self.clo, self.chi, self.cmask, self.cR, self.cU, self.cleaf,
                           self.cf_start, self.cf_count),
                LeafCellIndex(self.lc_start, self.lc_count, self.lc_cap))

    def _grow_cells(self, cap: int) -> None:
        for name in ("clo", "chi", "cmask", "cR", "cU", "cleaf", "cf_start", "cf_count"):
            a = getattr(self, name)
            b = np.zeros((cap,) + a.shape[1:], a.dtype)
            b[: len(a)] = a
            setattr(self, name, b)

    def _compact_fragments(self, need: int) -> None:
        n = self.n_cells
        idx = _ranges(self.cf_start[:n], self.cf_count[:n])
        cap = max(2 * need, 64)
        row = np.zeros(cap, np.int64)
        w = np.zeros(cap)
        row[: len(idx)] = self.f_row[idx]
        w[: len(idx)] = self.f_w[idx]
        self.cf_start[:n] = np.r_[0, np.cumsum(self.cf_count[:n])[:-1]]
        self.f_row, self.f_w, self.f_len = row, w, len(idx)

    def _compact_leaf_cells(self) -> None:
        N = self.n_nodes
        cap = self.lc_cap[:N]
        idx = _ranges(self.lc_start[:N], cap)
        pool = np.zeros(max(2 * len(idx), 64), np.int64)
        pool[: len(idx)] = self.lc_pool[idx]
        self.lc_start[:N] = np.r_[0, np.cumsum(cap)[:-1]]
        self.lc_pool, self.lc_len = pool, len(idx)


def _ranges(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(start[i], start[i] + count[i])``."""
    count = np.asarray(count, np.int64)
    tot = int(count.sum())
    if tot == 0:
        return np.zeros(0, np.int64)
    off = np.repeat(np.asarray(start, np.int64) - np.r_[0, np.cumsum(count)[:-1]], count)
    return off + np.arange(tot)


@njit(cache=True, nogil=True)
def unit_hash(seed, a, b):
    """A uniform number in [0, 1) determined by ``(seed, a, b)`` (splitmix64 finaliser)."""
    z = np.uint64(seed) ^ (np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)) ^ (
        np.uint64(b) * np.uint64(0xC2B2AE3D27D4EB4F))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True)
def _push(pool, pool_len, start, count, cap, node, value):
    """Append ``value`` to node's cell list (relocating it to the pool's end when full)."""
    if count[node] == cap[node]:
        new_cap = max(4, 2 * cap[node])
        if pool_len + new_cap > pool.shape[0]:
            bigger = np.zeros(2 * (pool_len + new_cap), np.int64)
            bigger[:pool_len] = pool[:pool_len]
            pool = bigger
        pool[pool_len: pool_len + count[node]] = pool[start[node]: start[node] + count[node]]
        start[node] = pool_len
        cap[node] = new_cap
        pool_len += new_cap
    pool[start[node] + count[node]] = value
    count[node] += 1
    return pool, pool_len


@njit(cache=True, nogil=True)
def _side_fraction(j, thr, mask, is_nom, off, k, lo, hi, cm, c):
    """Share of cell/node ``c``'s extent on column ``j`` that the split sends left."""
    if is_nom:
        a = 0.0
        tot = 0.0
        for v in range(k):
            if cm[c, off + v]:
                tot += 1.0
                if mask[off + v]:
                    a += 1.0
        return a / tot if tot > 0 else 0.0
    a = lo[c, j]
    b = hi[c, j]
    if b <= a:
        return 0.0
    return min(1.0, max(0.0, (thr - a) / (b - a)))


@njit(cache=True, nogil=True)
def _apply_split(cut, rule, n_nodes, n_cells, layout, node_arrays, cell_arrays, leaf_cells,
                 pools):
    """Split tree node ``node`` on column ``j`` at ``thr`` (nominal: left levels ``mask``;
    :class:`SplitCut`) under :class:`CutRule` ``rule``: the two children's boxes and masses,
    every cell inside the node cut in two with its row fragments (:class:`Layout`,
    :class:`NodeArrays`, :class:`CellArrays`, :class:`LeafCellIndex` bundle the table's
    arrays; the growable :class:`FragmentPools` are returned with their new lengths, after the
    new cell count)."""
    node, j, thr, mask = cut
    approx, min_frag, seed, m_total = rule
    f_row, f_w, f_len, lc_pool, lc_len = pools
    Z, kind, nom_off, nlev = layout
    nfeat, nthr, nleft, nright, ntree, nsplit, nlo, nhi, nmask, nR = node_arrays
    clo, chi, cmask, cR, cU, cleaf, cf_start, cf_count = cell_arrays
    lc_start, lc_count, lc_cap = leaf_cells
    T = cleaf.shape[1]
    t = ntree[node]
    is_nom = kind[j] == 2
    off = nom_off[j]
    k = nlev[j]
    L = n_nodes
    Rn = n_nodes + 1
    # tree structure and child boxes
    nfeat[node] = j
    nthr[node] = thr
    nleft[node] = L
    nright[node] = Rn
    for child in (L, Rn):
        ntree[child] = t
        nlo[child] = nlo[node]
        nhi[child] = nhi[node]
        nmask[child] = nmask[node]
        nR[child] = 0.0
    if is_nom:
        for v in range(k):
            nsplit[node, off + v] = mask[off + v]
            if mask[off + v]:
                nmask[Rn, off + v] = 0
            else:
                nmask[L, off + v] = 0
    else:
        nhi[L, j] = thr
        nlo[Rn, j] = thr
    fl_leaf = _side_fraction(j, thr, mask, is_nom, off, k, nlo, nhi, nmask, node)
    cells = lc_pool[lc_start[node]: lc_start[node] + lc_count[node]].copy()
    nc = cells.shape[0]
    # EOGT: leaf-level data weight of each child (observed rows + missing shares)
    leaf_l = 0.0
    leaf_r = 0.0
    if approx:
        for q in range(nc):
            c = cells[q]
            for s in range(cf_start[c], cf_start[c] + cf_count[c]):
                x = Z[f_row[s], j]
                if np.isnan(x):
                    leaf_l += f_w[s] * fl_leaf
                    leaf_r += f_w[s] * (1.0 - fl_leaf)
                elif (mask[off + int(x)] == 1) if is_nom else (x <= thr):
                    leaf_l += f_w[s]
                else:
                    leaf_r += f_w[s]
    lc_start[L] = lc_len
    lc_cap[L] = max(nc, 1)
    lc_count[L] = 0
    lc_len += lc_cap[L]
    lc_start[Rn] = lc_len
    lc_cap[Rn] = max(nc, 1)
    lc_count[Rn] = 0
    lc_len += lc_cap[Rn]
    if lc_len > lc_pool.shape[0]:
        bigger = np.zeros(2 * lc_len, np.int64)
        bigger[: lc_pool.shape[0]] = lc_pool
        lc_pool = bigger
    for q in range(nc):
        c = cells[q]
        f = _side_fraction(j, thr, mask, is_nom, off, k, clo, chi, cmask, c)
        s0 = cf_start[c]
        n0 = cf_count[c]
        # partition fragments: left ones stay in place, right ones are buffered
        rb_row = np.empty(n0, np.int64)
        rb_w = np.empty(n0)
        nr = 0
        nl = 0
        wl = 0.0
        wr = 0.0
        for s in range(s0, s0 + n0):
            r = f_row[s]
            w = f_w[s]
            x = Z[r, j]
            if np.isnan(x):
                if w >= min_frag:  # fractional: both children, by volume share
                    a = w * f
                    b = w - a
                elif unit_hash(seed, r, node) < f:  # light fragment: one side at random
                    a = w
                    b = 0.0
                else:
                    a = 0.0
                    b = w
            elif (mask[off + int(x)] == 1) if is_nom else (x <= thr):
                a = w
                b = 0.0
            else:
                a = 0.0
                b = w
            if a > 0.0:
                f_row[s0 + nl] = r
                f_w[s0 + nl] = a
                nl += 1
                wl += a
            if b > 0.0:
                rb_row[nr] = r
                rb_w[nr] = b
                nr += 1
                wr += b
        Rc = cR[c]
        if approx:
            wt = leaf_l * f / fl_leaf if fl_leaf > 0 else 0.0
            wf = leaf_r * (1.0 - f) / (1.0 - fl_leaf) if fl_leaf < 1 else 0.0
            rl = Rc * wt / (wt + wf) if wt + wf > 0 else 0.0
            rr = Rc - rl
        else:
            rl = wl / m_total
            rr = wr / m_total
        nR[L] += wl
        nR[Rn] += wr
        Uc = cU[c]
        if nr == 0 or nl == 0:
            go_left = nl > 0
            # the row-less side is dropped: the cell shrinks to the other side
            if is_nom:
                for v in range(k):
                    if (mask[off + v] == 1) != go_left:
                        cmask[c, off + v] = 0
            elif go_left:
                chi[c, j] = min(chi[c, j], thr)
            else:
                clo[c, j] = max(clo[c, j], thr)
            cU[c] = Uc * (f if go_left else 1.0 - f)
            cR[c] = rl if go_left else rr
            cleaf[c, t] = L if go_left else Rn
            cf_count[c] = nl if go_left else nr
            if not go_left:
                for s in range(nr):
                    f_row[s0 + s] = rb_row[s]
                    f_w[s0 + s] = rb_w[s]
            dst = L if go_left else Rn
            lc_pool, lc_len = _push(lc_pool, lc_len, lc_start, lc_count, lc_cap, dst, c)
            continue
        # both sides hold rows: c keeps the left part, a new cell takes the right part
        nc_id = n_cells
        n_cells += 1
        clo[nc_id] = clo[c]
        chi[nc_id] = chi[c]
        cmask[nc_id] = cmask[c]
        if is_nom:
            for v in range(k):
                if mask[off + v] == 1:
                    cmask[nc_id, off + v] = 0
                else:
                    cmask[c, off + v] = 0
        else:
            chi[c, j] = thr
            clo[nc_id, j] = thr
        cU[c] = Uc * f
        cU[nc_id] = Uc * (1.0 - f)
        cR[c] = rl
        cR[nc_id] = rr
        for u in range(T):
            cleaf[nc_id, u] = cleaf[c, u]
        cleaf[c, t] = L
        cleaf[nc_id, t] = Rn
        cf_count[c] = nl
        if f_len + nr > f_row.shape[0]:
            cap = 2 * (f_len + nr)
            r2 = np.zeros(cap, np.int64)
            w2 = np.zeros(cap)
            r2[:f_len] = f_row[:f_len]
            w2[:f_len] = f_w[:f_len]
            f_row = r2
            f_w = w2
        cf_start[nc_id] = f_len
        cf_count[nc_id] = nr
        for s in range(nr):
            f_row[f_len + s] = rb_row[s]
            f_w[f_len + s] = rb_w[s]
        f_len += nr
        lc_pool, lc_len = _push(lc_pool, lc_len, lc_start, lc_count, lc_cap, L, c)
        lc_pool, lc_len = _push(lc_pool, lc_len, lc_start, lc_count, lc_cap, Rn, nc_id)
        for u in range(T):
            if u != t:
                lc_pool, lc_len = _push(lc_pool, lc_len, lc_start, lc_count, lc_cap,
                                        cleaf[nc_id, u], nc_id)
    lc_count[node] = 0
    return n_cells, f_row, f_w, f_len, lc_pool, lc_len
