"""Leaves that share the laws of another leaf model through an index.

Leaf ``l`` of an :class:`IndexedLeaf` holds exactly the law of leaf ``index_[l]`` of its fitted
``base``: many leaves may share one law without copying it. The anchored learner
(:class:`~forestgen.families.mixture.anchored.Anchored`) is its use: each of its components (a
training row) takes, for column ``j``, the law of the leaf that row reaches in column ``j``'s
conditional tree, and thousands of components share a few hundred such laws.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen import registry
from forestgen.leaves.base import ColumnCell, LeafModel
from forestgen.registry import register

__all__ = ["IndexedLeaf", "crossed"]

_BASE = "b_"


@register("leaf", "indexed")
class IndexedLeaf(LeafModel):
    """Leaf ``l`` answers as leaf ``index_[l]`` of ``base`` (module docstring).

    Built fitted (:meth:`of`: a fitted base and the index), or fitted like any leaf model:
    ``fit`` gives every leaf its own base leaf (``index_`` the identity) unless an index was
    set, in which case the leaves sharing a base leaf pool their pairs and must share a cell.
    Saved and loaded like any leaf model (the base's arrays under the prefix ``b_``). No packed
    form: the fused walks call its methods (the enumerating path).
    """

    def __init__(self, *, base: Any = "truncnorm"):
        self.base = registry.resolve("leaf", base, LeafModel)
        self.discrete = bool(self.base.discrete)
        self.handles_cells = self.base.handles_cells

    @classmethod
    def of(cls, base: LeafModel, index: np.ndarray, n_base: int) -> IndexedLeaf:
        """An indexed leaf over ``base``, fitted for ``n_base`` leaves: leaf ``l`` is
        ``base``'s leaf ``index[l]``."""
        index = np.ascontiguousarray(index, np.int64)
        if len(index) and (index.min() < 0 or index.max() >= n_base):
            raise ValueError(f"IndexedLeaf: index outside the base's {n_base} leaves")
        out = cls(base=base)
        out.index_, out.n_base_ = index, np.array([int(n_base)], np.int64)
        return out

    def get_params(self) -> dict:
        return {"base": self.base}

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> IndexedLeaf:
        """Fit a fresh copy of ``base`` on the pairs, each leaf's pairs given to its base leaf
        (its own unless ``index_`` is set); leaves sharing a base leaf must share their cell."""
        L = len(cell.lower)
        index = getattr(self, "index_", None)
        index = np.arange(L, dtype=np.int64) if index is None else np.asarray(index, np.int64)
        if index.shape != (L,) or (L and index.min() < 0):
            raise ValueError(f"IndexedLeaf: index_ must hold one base leaf >= 0 for each of "
                             f"the {L} leaves, got shape {index.shape}")
        n_base = int(index.max()) + 1 if L else 0
        first = np.full(n_base, -1, np.int64)
        first[index[::-1]] = np.arange(L)[::-1]  # each base leaf's first leaf
        lower, upper = np.asarray(cell.lower), np.asarray(cell.upper)
        used = first >= 0
        rep = np.where(used, first, 0)
        if not (np.array_equal(lower[rep[index]], lower, equal_nan=True)
                and np.array_equal(upper[rep[index]], upper, equal_nan=True)):
            raise ValueError("IndexedLeaf: leaves that share a base leaf must share their cell")
        sub = ColumnCell(lower=lower[rep], upper=upper[rep],
                         allowed=None if cell.allowed is None else np.asarray(cell.allowed)[rep],
                         data_min=cell.data_min, data_max=cell.data_max, n_levels=cell.n_levels)
        base = type(self.base)(**self.base.get_params())
        self.base = base.fit(x, index[np.asarray(leaf, np.int64)], sub, weight)
        self.index_, self.n_base_ = index, np.array([n_base], np.int64)
        return self

    def _at(self, leaf) -> np.ndarray:
        return self.index_[np.asarray(leaf, np.int64)]

    def _shared(self, fn, leaf, *vals) -> np.ndarray:
        """``fn(index_[leaf], *vals)`` pair by pair, each base leaf scored once per row where
        the pairs cross rows with leaves (:func:`crossed`) and fewer base leaves than leaves
        are used: the same values, computed on the ``rows x used base leaves`` table."""
        leaf = np.asarray(leaf, np.int64)
        vals = tuple(np.asarray(v) for v in vals)
        grid = crossed(leaf, vals, len(self.index_))
        if grid is None:
            return fn(self.index_[leaf], *vals)
        runs, row_vals, leaf_major = grid
        used, inv = np.unique(self.index_[runs], return_inverse=True)
        if 2 * len(used) > len(runs):  # little sharing: not worth the table
            return fn(self.index_[leaf], *vals)
        r, u = len(row_vals[0]), len(used)
        if leaf_major:  # [used, rows], a run per leaf
            table = np.asarray(fn(np.repeat(used, r), *(np.tile(v, u) for v in row_vals)))
            return table.reshape(u, r)[inv].ravel()
        # [rows, used], a run per row
        table = np.asarray(fn(np.tile(used, r), *(np.repeat(v, u) for v in row_vals)))
        return table.reshape(r, u)[:, inv].ravel()

    # ------------------------------------------------------------------ queries
    def log_prob(self, leaf, x):
        return self._shared(self.base.log_prob, leaf, x)

    def log_prob_interval(self, leaf, lo, hi):
        return self._shared(self.base.log_prob_interval, leaf, lo, hi)

    def mean_interval(self, leaf, lo, hi):
        return self.base.mean_interval(self._at(leaf), lo, hi)

    def log_prob_levels(self, leaf, levels):
        return self.base.log_prob_levels(self._at(leaf), levels)

    def mean(self, leaf):
        return self.base.mean(self._at(leaf))

    def probs(self, leaf):
        return self.base.probs(self._at(leaf))

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        return self.base.sample(self._at(leaf), rng, lo=lo, hi=hi, levels=levels)

    def sample_uniform(self, leaf, u):
        return self.base.sample_uniform(self._at(leaf), u)

    @property
    def has_uniform_sampler(self) -> bool:
        return self.base.has_uniform_sampler

    def log_max_density(self, leaf):
        return self.base.log_max_density(self._at(leaf))

    @property
    def n_levels(self) -> int:
        return int(getattr(self.base, "n_levels", 0))

    @property
    def floor(self) -> float:
        return float(getattr(self.base, "floor", 0.0))

    # ------------------------------------------------------------------ torch
    @property
    def has_torch(self) -> bool:
        return self.base.discrete or self.base.has_torch

    @property
    def has_torch_sampler(self) -> bool:
        return self.base.has_torch_sampler

    def torch_params(self, dtype, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        return {"fn": type(self.base).torch_log_prob,
                "base": self.base.torch_params(dtype, device),
                "index": torch_tensor(self.index_, "long", device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        return params["fn"](params["base"], params["index"][leaf], x)

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        if n_leaves != len(self.index_):
            raise ValueError(f"IndexedLeaf holds {len(self.index_)} leaves, asked for "
                             f"{n_leaves}")
        return {"fn": type(self.base).torch_sample,
                "base": self.base.torch_sample_params(int(self.n_base_[0]), device),
                "index": torch_tensor(self.index_, "long", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        return params["fn"](params["base"], params["index"][leaf], u)

    # ------------------------------------------------------------------ persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        return {"index_": self.index_, "n_base_": self.n_base_,
                **{_BASE + k: v for k, v in self.base.param_arrays().items()}}

    @staticmethod
    def _base_arrays(arrays) -> dict:
        return {k[len(_BASE):]: v for k, v in arrays.items() if k.startswith(_BASE)}

    def set_param_arrays(self, arrays) -> IndexedLeaf:
        self.index_ = np.asarray(arrays["index_"], np.int64)
        self.n_base_ = np.asarray(arrays["n_base_"], np.int64)
        self.base.set_param_arrays(self._base_arrays(arrays))
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        stray = [k for k in arrays if k not in ("index_", "n_base_")
                 and not k.startswith(_BASE)]
        if stray:
            raise ValueError(f"IndexedLeaf: arrays {stray} belong neither to the index nor "
                             f"to the base")
        index = arrays.get("index_")
        if not isinstance(index, np.ndarray) or index.shape != (n_leaves,) \
                or index.dtype.kind not in "iu":
            raise ValueError(f"IndexedLeaf.index_ must be {n_leaves} integers (one per leaf), "
                             f"got {getattr(index, 'shape', None)}")
        nb = arrays.get("n_base_")
        if not isinstance(nb, np.ndarray) or nb.shape != (1,) or nb.dtype.kind not in "iu" \
                or nb[0] < 0:
            raise ValueError("IndexedLeaf.n_base_ must be one count of the base's leaves")
        n_base = int(nb[0])
        base = self._base_arrays(arrays)
        if n_leaves and (index.min() < 0 or index.max() >= n_base):
            raise ValueError(f"IndexedLeaf.index_ points outside the base's {n_base} leaves")
        self.base.check_param_arrays(base, n_base, n_levels)


def _same_rows(a: np.ndarray) -> bool:
    """Whether every row of the 2-D ``a`` equals its first (NaN equal to NaN)."""
    eq = a == a[:1]
    if a.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(a[:1])
    return bool(eq.all())


def _constant_rows(a: np.ndarray) -> bool:
    """Whether each row of the 2-D ``a`` holds one value (NaN equal to NaN)."""
    eq = a == a[:, :1]
    if a.dtype.kind == "f":
        eq |= np.isnan(a) & np.isnan(a[:, :1])
    return bool(eq.all())


def crossed(leaf: np.ndarray, vals: tuple, n_leaves: int):
    """The (row, leaf) pairs as a cross of ``R`` rows with ``K`` leaves, if they are one:
    leaf-major (``K`` runs of ``R`` pairs, each run one leaf, the same ``R`` values in every
    run: a forest's complete rows, tree by tree) or row-major (``R`` runs of the same
    ``n_leaves`` leaves, each run one row's values: every row reaching every leaf). Returns
    ``(leaf of each run or of each row's run, the R rows' values per array, leaf_major)``, or
    ``None``. Checking costs a few comparisons per pair."""
    p = len(leaf)
    if p < 2 or any(v.shape != leaf.shape for v in vals):
        return None
    if leaf[1] == leaf[0]:  # leaf-major: runs of one leaf
        step = leaf[1:] != leaf[:-1]
        r = int(np.argmax(step)) + 1 if step.any() else p
        if r < p and p % r == 0:
            lk = leaf.reshape(-1, r)
            if _constant_rows(lk) and all(_same_rows(v.reshape(-1, r)) for v in vals):
                return lk[:, 0], tuple(v[:r] for v in vals), True
        return None
    if n_leaves <= p and p % n_leaves == 0:  # row-major
        lk = leaf.reshape(-1, n_leaves)
        if _same_rows(lk) and all(_constant_rows(v.reshape(-1, n_leaves)) for v in vals):
            return lk[0], tuple(v[::n_leaves] for v in vals), False
    return None
