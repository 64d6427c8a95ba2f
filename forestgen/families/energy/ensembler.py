"""Additive energy over a product base measure: ``f(x) = log q0(x) + sum_t s_t dF_t(x)``.

NRGBoost (Bravo, ICLR 2025, Sec. 2-3; spec ``nrgboost_def.md`` §2.1, §3.4, §5.2, §6.1). The model
``q(x) = exp(f(x)) / Z`` lives on a :class:`~forestgen.families.energy.grid.Grid`; ``q0`` is a
normalised product of per-column pmfs over the grid's codes (:meth:`AdditiveEnergy.blend_marginals`:
the paper's ``m_j = (1 - u) p̂_j + u / C_j``, spec §8.1; or the column marginals' masses,
:mod:`forestgen.families.energy.base_measure`) and each tree is piecewise constant on grid codes.
Trees are stored flat (global node ids); every split, ordered or nominal, keeps a per-code
routing byte ``cat_left[cat_off[node] + code]``.

Kernels (module-level, ``cache=True``): the energy of rows and one tree's leaves. The *slice*
``f(x with x_j := k)`` for every ``k`` (spec §5.2, T10) is computed from the trees' leaf
bitsets (:mod:`forestgen.families.energy.leaf_sets`, built once per tree and cached): the leaves the
line through ``x`` along ``j`` crosses, each adding its value over its extent on ``j``. Trees
that never split on ``j`` add a constant to every ``k`` and are skipped unless ``full=True``.

Normaliser (spec §6.1): the running estimate ``log Z_t = log Z_{t-1} + log sum_j Q_j exp(s_t w_j)``
(exact when ``Q`` is exact; with pool masses an MCMC estimate), and an importance-sampling
estimate from ``q0`` or by AIS, with a standard error (:mod:`forestgen.families.energy.normaliser`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np
from numba import njit, prange

from forestgen.ensemble.base import Ensembler
from forestgen.families.energy.leaf_sets import (
    LeafSets,
    build_leaf_sets,
    extend,
    leaf_energy_kernel,
    slice_logits_kernel,
)
from forestgen.parallel import parallel_kernel
from forestgen.registry import register
from forestgen.tree.record import TreeRecord

ALPHA_GRID = np.logspace(-3.0, 1.0, 101)  # line-search steps, spec §3.4
#: rows per tree to be built from which :meth:`AdditiveEnergy.tree_energy` reads the leaf
#: bitsets rather than walking the trees (building a 256-leaf tree's tables costs ~2.5 ms, what
#: the bitsets save on ~10,000 rows)
LEAF_SET_ROWS = 10_000


@njit(cache=True, nogil=True, inline="always")
def _leaf_of(x, node, feature, left, right, cat_off, cat_left):
    while feature[node] >= 0:
        if cat_left[cat_off[node] + x[feature[node]]] == 1:
            node = left[node]
        else:
            node = right[node]
    return node


@parallel_kernel
def energy_kernel(C, roots, feature, left, right, cat_off, cat_left, value):
    """``sum_t value[leaf_t(x)]`` per row of codes ``C [n, d]`` (trees in ``roots``)."""
    n = C.shape[0]
    out = np.zeros(n)
    for i in prange(n):
        s = 0.0
        for t in range(roots.shape[0]):
            s += value[_leaf_of(C[i], roots[t], feature, left, right, cat_off, cat_left)]
        out[i] = s
    return out


@parallel_kernel
def leaf_kernel(C, root, feature, left, right, cat_off, cat_left):
    """Leaf node id of each row in the tree rooted at ``root``."""
    n = C.shape[0]
    out = np.empty(n, np.int64)
    for i in prange(n):
        out[i] = _leaf_of(C[i], root, feature, left, right, cat_off, cat_left)
    return out


@dataclass
class EnergyTrees:
    """All trees of an additive energy, concatenated (global node ids; see module docstring)."""

    feature: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    threshold: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    nan_left: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    left: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    right: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    cat_off: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cat_left: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))
    value: np.ndarray = field(default_factory=lambda: np.zeros(0))
    node_offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    uses: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.uint8))
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def n_trees(self) -> int:
        return len(self.node_offsets) - 1

    @property
    def roots(self) -> np.ndarray:
        return self.node_offsets[:-1].astype(np.int64)

    def args(self):
        """Arrays of the routing kernels."""
        return (self.feature, self.left, self.right, self.cat_off, self.cat_left, self.value)

    def truncate(self, n_trees: int) -> EnergyTrees:
        """The first ``n_trees`` trees."""
        end = int(self.node_offsets[n_trees])
        later = self.cat_off[end:][self.feature[end:] >= 0]
        cend = int(later.min()) if later.size else len(self.cat_left)
        return EnergyTrees(self.feature[:end], self.threshold[:end], self.nan_left[:end],
                           self.left[:end], self.right[:end],
                           self.cat_off[:end], self.cat_left[:cend], self.value[:end],
                           self.node_offsets[: n_trees + 1], self.uses[:n_trees],
                           self.depth[:n_trees])

    def append(self, tree: TreeRecord, node_value: np.ndarray, grid) -> None:
        """Add one tree grown on ``grid`` (a :class:`~forestgen.tree.record.TreeRecord` of
        :class:`~forestgen.families.energy.splitter.EnergySplitter`) with per-node leaf values
        (already scaled by the step; ignored at internal nodes). Every split is stored as a row
        over all codes of its column (1 = left), the missing code following ``nan_left``."""
        feature, left, right = tree.feature, tree.left, tree.right
        leaf_value = node_value
        n_codes = grid.n_codes
        ths = grid.split_thresholds()
        base = int(self.node_offsets[-1])
        internal = np.nonzero(feature >= 0)[0]
        cat_off = np.full(len(feature), -1, np.int64)
        thr = np.full(len(feature), -1, np.int64)
        parts = []
        acc = len(self.cat_left)
        for node in internal:
            j = int(feature[node])
            nv = int(grid.n_values[j])
            row = np.full(int(n_codes[j]), tree.nan_left[node], np.uint8)
            if grid.ordered[j]:
                thr[node] = np.searchsorted(ths[j], tree.threshold[node], side="right") - 1
                row[:nv] = np.arange(nv) <= thr[node]
            else:
                o = int(tree.cat_off[node])
                row[:nv] = tree.cat_left[o:o + nv]
            cat_off[node] = acc
            parts.append(row)
            acc += len(row)
        d = len(n_codes)
        uses = np.zeros((1, d), np.uint8)
        uses[0, np.unique(feature[internal])] = 1
        depth = np.zeros(len(feature), np.int64)
        for node in range(len(feature)):  # children have larger ids than their parent
            if feature[node] >= 0:
                depth[left[node]] = depth[right[node]] = depth[node] + 1
        self.feature = np.r_[self.feature, feature].astype(np.int32)
        self.threshold = np.r_[self.threshold, thr].astype(np.int32)
        self.nan_left = np.r_[self.nan_left, tree.nan_left].astype(np.uint8)
        self.left = np.r_[self.left, np.where(left >= 0, left + base, -1)].astype(np.int32)
        self.right = np.r_[self.right, np.where(right >= 0, right + base, -1)].astype(np.int32)
        self.cat_off = np.r_[self.cat_off, cat_off].astype(np.int64)
        self.cat_left = np.concatenate([self.cat_left] + parts).astype(np.uint8)
        self.value = np.r_[self.value, np.where(feature < 0, leaf_value, 0.0)].astype(np.float64)
        self.node_offsets = np.r_[self.node_offsets, base + len(feature)].astype(np.int64)
        self.uses = np.vstack([self.uses.reshape(-1, d), uses])
        self.depth = np.r_[self.depth, depth.max()].astype(np.int64)

    def cached_leaf_sets(self, grid) -> int:
        """How many trees' tables on ``grid`` :meth:`leaf_sets` holds already (0: none)."""
        got = self.__dict__.get("_leaf_sets")
        key = tuple(tuple(int(v) for v in a) for a in (grid.n_codes, grid.n_values, grid.ordered))
        return got[1].n_trees if got is not None and got[0][0] == key else 0

    def leaf_sets(self, grid) -> LeafSets:
        """The trees' :class:`~forestgen.families.energy.leaf_sets.LeafSets` on ``grid``, cached:
        trees appended since the last call are added to the cache."""
        n_codes, n_values, ordered = grid.n_codes, grid.n_values, grid.ordered
        key = tuple(tuple(int(v) for v in a) for a in (n_codes, n_values, ordered))
        is_leaf = np.r_[0, np.cumsum(self.feature < 0)]
        most = int(np.diff(is_leaf[self.node_offsets]).max(initial=1))
        words = max(1, -(-most // 64))
        got = self.__dict__.get("_leaf_sets")
        if got is not None and got[0] == (key, words) and got[1].n_trees <= self.n_trees:
            sets = got[1]
            if sets.n_trees < self.n_trees:
                sets = extend(sets, build_leaf_sets(self, n_codes, n_values, ordered, words,
                                                    sets.n_trees))
        else:
            sets = build_leaf_sets(self, n_codes, n_values, ordered, words)
        self.__dict__["_leaf_sets"] = ((key, words), sets)
        return sets

    def scaled(self, factor: float) -> EnergyTrees:
        """The same trees with every value multiplied by ``factor`` (annealing paths)."""
        return replace(self, value=self.value * factor)

    def to_arrays(self, prefix: str = "trees.") -> dict[str, np.ndarray]:
        return {prefix + f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_arrays(cls, a, prefix: str = "trees.") -> EnergyTrees:
        return cls(**{f.name: np.asarray(a[prefix + f.name]) for f in fields(cls)})


@register("ensembler", "additive_energy")
class AdditiveEnergy(Ensembler):
    """``f(x) = log q0(x) + sum_t value_t(x)`` on a grid (see the module docstring).

    ``log_q0``: flat per-code log pmfs (offsets ``grid.code_offsets``). ``trees``: leaf values
    are stored already scaled by the step ``s_t = gamma·alpha_t``. ``normalised = False``.

    In the ``ensembler`` slot of NRGBoost it is given as a class (or registry name): the learner
    builds it from the data, ``cls(grid, log_q0)`` (``log_q0`` from :meth:`blend_marginals` or
    :func:`~forestgen.families.energy.base_measure.marginals_base`), and grows its trees; it
    has no parameters of its own. Its :meth:`combine` adds per-tree leaf energies.
    """

    normalised = False
    serves = frozenset({"energy"})

    def __init__(self, grid, log_q0: np.ndarray, trees: EnergyTrees | None = None):
        self.grid = grid
        self.log_q0 = np.asarray(log_q0, np.float64)
        self.trees = trees if trees is not None else EnergyTrees()
        if self.trees.n_trees == 0:  # no tree yet: per-tree arrays still have d columns
            self.trees.uses = np.zeros((0, grid.d), np.uint8)

    def get_params(self) -> dict:
        return {}

    def combine(self, ptr: np.ndarray, pair_scores: np.ndarray) -> np.ndarray:
        """Per-row sum of the leaf energies ``pair_scores[ptr[i]:ptr[i+1]]`` (an energy adds
        its trees' values; the base energy ``log q0`` is not included)."""
        v = np.asarray(pair_scores, np.float64)
        csum = np.concatenate([np.zeros((1,) + v.shape[1:]), np.cumsum(v, axis=0)])
        return csum[ptr[1:]] - csum[ptr[:-1]]

    def combine_dense(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(scores, np.float64).sum(axis=0)

    # ------------------------------------------------------------------ base measure
    @staticmethod
    def blend_marginals(C: np.ndarray, grid, uniform: float, weight=None) -> np.ndarray:
        """Flat ``log m_j = log((1-u) p̂_j + u/C_j)`` from training codes ``C [n, d]``, where
        the uniform part spreads over the ``C_j`` codes of column ``j`` in the grid
        (:meth:`~forestgen.families.energy.grid.Grid.in_domain`: a declared level without training
        rows is not, and gets ``log m_j = -inf``)."""
        off = grid.code_offsets
        out = np.empty(off[-1])
        for j in range(grid.d):
            nc = int(grid.n_codes[j])
            cnt = np.bincount(C[:, j], weights=weight, minlength=nc)[:nc].astype(float)
            p = cnt / cnt.sum()
            flat = np.ones(nc)
            flat[: grid.n_values[j]] = grid.in_domain(j)
            with np.errstate(divide="ignore"):
                out[off[j]:off[j + 1]] = np.log((1.0 - uniform) * p + uniform * flat / flat.sum())
        return out

    def sample_q0(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` exact draws of ``q0`` as codes ``[n, d]`` int32."""
        off = self.grid.code_offsets
        out = np.empty((n, self.grid.d), np.int32)
        u = rng.random((n, self.grid.d))
        for j in range(self.grid.d):
            cdf = np.cumsum(np.exp(self.log_q0[off[j]:off[j + 1]]))
            cdf /= cdf[-1]
            out[:, j] = np.minimum(np.searchsorted(cdf, u[:, j], side="right"), len(cdf) - 1)
        return out

    def base_energy(self, C: np.ndarray) -> np.ndarray:
        return self.log_q0[C + self.grid.code_offsets[:-1]].sum(axis=1)

    # ------------------------------------------------------------------ evaluation
    def tree_energy(self, C: np.ndarray, start: int = 0, stop: int | None = None) -> np.ndarray:
        """``sum_{t in [start, stop)} value_t(x)`` for complete code rows ``C [n, d]``: from the
        trees' leaf bitsets (:func:`~forestgen.families.energy.leaf_sets.leaf_energy_kernel`)
        when they are cached or the work pays for building them, else by walking the trees
        (the same sums, bit for bit)."""
        tr = self.trees
        C = np.ascontiguousarray(C, np.int32)
        stop = tr.n_trees if stop is None else min(int(stop), tr.n_trees)
        start = min(int(start), stop)
        if len(C) * (stop - start) >= LEAF_SET_ROWS * (stop - tr.cached_leaf_sets(self.grid)):
            sets = tr.leaf_sets(self.grid)
            return leaf_energy_kernel(C, start, stop, self.grid.code_offsets,
                                      sets.view(tr.value), 256)
        return energy_kernel(C, tr.roots[start:stop], *tr.args())

    def energy(self, C: np.ndarray) -> np.ndarray:
        """Unnormalised log-probability ``f(x)`` of complete code rows."""
        return self.base_energy(C) + self.tree_energy(C)

    def tree_leaves(self, C: np.ndarray, t: int) -> np.ndarray:
        return leaf_kernel(np.ascontiguousarray(C, np.int32), int(self.trees.roots[t]),
                           *self.trees.args()[:5])

    def energy_slice(self, C: np.ndarray, j: int, full: bool = True) -> np.ndarray:
        """``[n, n_codes_j]``: ``f(x with x_j := k)`` for every code ``k`` (``full=False``
        drops the terms that do not depend on ``k``: ``log q0`` of the other columns and the
        trees that never split on ``j``)."""
        g = self.grid
        tr = self.trees
        C = np.ascontiguousarray(C, np.int32).copy()
        C[:, j] = 0
        sets = tr.leaf_sets(g)
        out = slice_logits_kernel(C, int(j), int(g.n_codes[j]), int(g.n_values[j]),
                                  bool(g.ordered[j]), g.code_offsets, sets.view(tr.value))
        off = self.grid.code_offsets
        out += self.log_q0[off[j]:off[j + 1]][None, :]
        if full:
            others = [i for i in range(self.grid.d) if i != j]
            out += self.log_q0[C[:, others] + off[others]].sum(axis=1)[:, None]
            const = tr.roots[tr.uses.reshape(-1, g.d)[:, j] == 0]
            out += energy_kernel(C, const, *tr.args())[:, None]
        return out


def line_search(P: np.ndarray, Q: np.ndarray, w: np.ndarray,
                alphas: np.ndarray = ALPHA_GRID) -> tuple[float, float]:
    """``argmax_a a·sum P w - log sum Q exp(a w)`` over ``alphas`` (Eq. 43; spec §3.4), with
    leaf masses normalised to one. Returns ``(alpha, gain)``."""
    P = P / P.sum()
    Q = Q / Q.sum()
    aw = alphas[:, None] * w[None, :]
    mx = aw.max(axis=1, keepdims=True)
    lse = (mx[:, 0] + np.log((Q[None, :] * np.exp(aw - mx)).sum(axis=1)))
    gain = alphas * (P @ w) - lse
    i = int(np.argmax(gain))
    return float(alphas[i]), float(gain[i])


def log_z_step(Q: np.ndarray, step_values: np.ndarray) -> float:
    """``log sum_j Q_j exp(s w_j)`` (Q normalised): the tracker's increment (spec §6.1)."""
    Q = Q / Q.sum()
    mx = step_values.max()
    return float(mx + np.log((Q * np.exp(step_values - mx)).sum()))
