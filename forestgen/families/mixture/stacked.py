"""One column's leaf laws given by different leaf models for consecutive blocks of leaves.

The back-off of RFDE, DEF and GeF (:mod:`~forestgen.families.mixture.backoff`) appends one
tree whose one leaf holds every training row and carries the column's marginal law, a histogram
density or an empirical pmf fitted on all rows, while the forest's own leaves keep the
learner's leaf models (RFDE's and DEF's uniform cells, GeF's Gaussians). A
:class:`StackedLeaf` is that column's leaf model: part ``i``, a fitted leaf model of
``sizes[i]`` leaves, answers for the global leaves ``offset_i .. offset_i + sizes[i] - 1``
(its own leaves ``0 .. sizes[i] - 1``). Every query is the part's, so a stacked model
normalises over each leaf's cell exactly as its parts do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen import registry
from forestgen.leaves.base import ColumnCell, LeafModel
from forestgen.registry import register

__all__ = ["StackedLeaf"]


@register("leaf", "stacked")
class StackedLeaf(LeafModel):
    """Fitted leaf models ``parts`` of ``sizes`` consecutive leaves each (module docstring).

    All parts are numeric or all discrete (registry names, classes or instances). Built from
    fitted parts (the back-off), or fitted: each part on the pairs of its own leaves; saved
    and loaded like any leaf model (each part's arrays under the prefix ``p<i>_``). No packed
    form of its own: where the parts after the first hold the leaves of trees that never
    split (the back-off tree), the fused walk of ``log_prob`` and the moments packs the first
    part and scores those leaves by its methods
    (:func:`~forestgen.inference.leaf_factors.fused_head`); other queries call its methods
    (the enumerating path), which dispatch each entry to its part.
    """

    def __init__(self, *, parts: Any = (), sizes: Any = ()):
        self.parts = [registry.resolve("leaf", p, LeafModel) for p in parts]
        self.sizes = [int(s) for s in sizes]
        if len(self.parts) != len(self.sizes) or not self.parts:
            raise ValueError(f"StackedLeaf needs one size per part, got {len(self.parts)} "
                             f"parts and {len(self.sizes)} sizes")
        kinds = {bool(p.discrete) for p in self.parts}
        if len(kinds) != 1:
            raise ValueError("StackedLeaf: parts must be all numeric or all discrete")
        self.discrete = kinds.pop()
        # the edge cells every part fits
        self.handles_cells = frozenset.intersection(*(p.handles_cells for p in self.parts))

    def get_params(self) -> dict:
        return {"parts": list(self.parts), "sizes": list(self.sizes)}

    @property
    def offsets(self) -> np.ndarray:
        """First global leaf of each part, then the total ``[len(parts) + 1]``."""
        return np.r_[0, np.cumsum(self.sizes)].astype(np.int64)

    # ------------------------------------------------------------------ dispatch
    def _split(self, leaf):
        """``(part index, entries of the part, local leaf ids)`` for each part with entries:
        a slice where ``leaf`` is sorted (the enumerating path scores pairs in leaf order, so
        each part's entries are one stretch: no copies), else an index array."""
        leaf = np.asarray(leaf, np.int64)
        off = self.offsets
        if len(leaf) > 1 and (leaf[1:] >= leaf[:-1]).all():
            cut = np.searchsorted(leaf, off)
            for i in range(len(self.parts)):
                a, b = int(cut[i]), int(cut[i + 1])
                if b > a:
                    yield i, slice(a, b), leaf[a:b] - off[i]
            return
        which = np.searchsorted(off, leaf, side="right") - 1
        for i in range(len(self.parts)):
            sel = np.flatnonzero(which == i)
            if len(sel):
                yield i, sel, leaf[sel] - off[i]

    @staticmethod
    def _take(a, sel, m: int, per_entry_ndim: int = 1):
        """``a`` for the entries ``sel``: an array of at least ``per_entry_ndim`` dimensions
        holds one row per entry and is indexed (a ``ValueError`` unless it has ``m`` rows);
        scalars and shared arrays (a level mask ``[k]``) are kept."""
        if a is None:
            return None
        arr = np.asarray(a)
        if arr.ndim >= max(per_entry_ndim, 1):
            if arr.shape[0] != m:
                raise ValueError(f"StackedLeaf: {m} leaves but {arr.shape[0]} values")
            return arr[sel]
        return a

    def _map(self, name: str, leaf, *args, per_entry=(1,), dtype=float, shape=()):
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        out = np.empty((m, *shape), dtype)
        for i, sel, local in self._split(leaf):
            sub = [self._take(a, sel, m, nd) for a, nd in zip(args, per_entry)]
            out[sel] = getattr(self.parts[i], name)(local, *sub)
        return out

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> StackedLeaf:
        """Fit a fresh copy of each part on the pairs of its leaves (renumbered from 0) and
        its leaves' cells. The parts after the first keep their ``sizes``; the first takes the
        leaves of ``cell`` they leave (possibly none)."""
        first = len(cell.lower) - sum(self.sizes[1:])
        if first < 0:
            raise ValueError(f"StackedLeaf: {len(cell.lower)} leaves, but the parts after the "
                             f"first take {sum(self.sizes[1:])}")
        self.sizes = [first, *self.sizes[1:]]
        off = self.offsets
        x = np.asarray(x, np.float64)
        leaf = np.asarray(leaf, np.int64)
        parts = []
        for i, p in enumerate(self.parts):
            a, b = int(off[i]), int(off[i + 1])
            sel = (leaf >= a) & (leaf < b)
            sub = ColumnCell(lower=np.asarray(cell.lower)[a:b], upper=np.asarray(cell.upper)[a:b],
                             allowed=None if cell.allowed is None else cell.allowed[a:b],
                             data_min=cell.data_min, data_max=cell.data_max,
                             n_levels=cell.n_levels)
            w = None if weight is None else np.asarray(weight, np.float64)[sel]
            parts.append(type(p)(**p.get_params()).fit(x[sel], leaf[sel] - a, sub, w))
        self.parts = parts
        return self

    # ------------------------------------------------------------------ queries
    def log_prob(self, leaf, x):
        return self._map("log_prob", leaf, x)

    def log_prob_interval(self, leaf, lo, hi):
        return self._map("log_prob_interval", leaf, lo, hi, per_entry=(1, 1))

    def mean_interval(self, leaf, lo, hi):
        return self._map("mean_interval", leaf, lo, hi, per_entry=(1, 1))

    def log_prob_levels(self, leaf, levels):
        return self._map("log_prob_levels", leaf, levels, per_entry=(2,))

    def mean(self, leaf):
        return self._map("mean", leaf)

    def probs(self, leaf):
        k = None
        leaf = np.asarray(leaf, np.int64)
        parts = [(sel, self.parts[i].probs(local)) for i, sel, local in self._split(leaf)]
        k = max((p.shape[1] for _, p in parts), default=0)
        out = np.zeros((len(leaf), k))
        for sel, p in parts:
            out[sel, : p.shape[1]] = p
        return out

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        """Without a condition, :meth:`sample_uniform` of ``rng.random(m)`` where every part
        has it; otherwise each part draws its entries in turn (part order) from ``rng``."""
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        if lo is None and hi is None and levels is None and self.has_uniform_sampler:
            return self.sample_uniform(leaf, rng.random(m))
        out = np.empty(m)
        for i, sel, local in self._split(leaf):
            out[sel] = self.parts[i].sample(local, rng, lo=self._take(lo, sel, m),
                                            hi=self._take(hi, sel, m),
                                            levels=self._take(levels, sel, m, 2))
        return out

    def sample_uniform(self, leaf, u):
        return self._map("sample_uniform", leaf, u)

    @property
    def has_uniform_sampler(self) -> bool:
        return all(p.has_uniform_sampler for p in self.parts)

    def log_max_density(self, leaf):
        return self._map("log_max_density", leaf)

    @property
    def n_levels(self) -> int:
        return max(int(getattr(p, "n_levels", 0)) for p in self.parts)

    @property
    def floor(self) -> float:
        return min(float(getattr(p, "floor", 0.0)) for p in self.parts)

    # ------------------------------------------------------------------ torch
    @property
    def has_torch(self) -> bool:
        return all(p.discrete or p.has_torch for p in self.parts)

    @property
    def has_torch_sampler(self) -> bool:
        return all(p.has_torch_sampler for p in self.parts)

    def torch_params(self, dtype, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        return {"parts": [(type(p).torch_log_prob, p.torch_params(dtype, device))
                          for p in self.parts],
                "offsets": torch_tensor(self.offsets, "long", device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        return _torch_dispatch(params, leaf, x)

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        from forestgen.leaves.base import torch_tensor

        if n_leaves != int(self.offsets[-1]):
            raise ValueError(f"StackedLeaf holds {int(self.offsets[-1])} leaves, asked for "
                             f"{n_leaves}")
        return {"parts": [(type(p).torch_sample, p.torch_sample_params(s, device))
                          for p, s in zip(self.parts, self.sizes)],
                "offsets": torch_tensor(self.offsets, "long", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        return _torch_dispatch(params, leaf, u, sample=True)

    # ------------------------------------------------------------------ persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        out = {}
        for i, p in enumerate(self.parts):
            out.update({f"p{i}_{k}": v for k, v in p.param_arrays().items()})
        return out

    def _part_arrays(self, arrays, i: int) -> dict:
        pre = f"p{i}_"
        return {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}

    def set_param_arrays(self, arrays) -> StackedLeaf:
        for i, p in enumerate(self.parts):
            p.set_param_arrays(self._part_arrays(arrays, i))
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        if n_leaves != int(self.offsets[-1]):
            raise ValueError(f"StackedLeaf parts hold {int(self.offsets[-1])} leaves, the "
                             f"forest has {n_leaves}")
        known = {f"p{i}_" for i in range(len(self.parts))}
        stray = [k for k in arrays if not any(k.startswith(p) for p in known)]
        if stray:
            raise ValueError(f"StackedLeaf: arrays {stray} belong to no part")
        for i, (p, s) in enumerate(zip(self.parts, self.sizes)):
            p.check_param_arrays(self._part_arrays(arrays, i), s, n_levels)


def _torch_dispatch(params, leaf, x, sample: bool = False):
    """Each entry's value from its part's torch hook (log density, or a draw)."""
    import torch

    off = params["offsets"]
    out = None
    for i, (fn, p) in enumerate(params["parts"]):
        sel = (leaf >= off[i]) & (leaf < off[i + 1])
        if sample:
            idx = torch.nonzero(sel).flatten()
            if idx.numel() == 0:
                continue
            v = fn(p, leaf[idx] - off[i], x[idx])
            if out is None:
                out = torch.empty(leaf.shape, dtype=v.dtype, device=v.device)
            out[idx] = v
            continue
        local = torch.where(sel, leaf - off[i], torch.zeros_like(leaf))
        v = fn(p, local, x)
        out = v if out is None else torch.where(sel, v, out)
    if out is None:
        out = torch.empty(leaf.shape, dtype=x.dtype, device=x.device)
    return out
