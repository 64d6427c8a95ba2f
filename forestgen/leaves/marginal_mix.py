"""A numeric leaf shrunk toward the column's marginal restricted to the leaf's cell (ARF's
``numeric_prior``, issue 37).

FORDE's leaf normal (Watson et al. 2023, Alg. 2) fitted to the two or three rows of a small
leaf is sharp: a held-out value between them, or at a value the column repeats (a grid, a
rounded measurement), gets a density far below the column's marginal. This leaf mixes it with
the column's marginal histogram restricted to the leaf's cell
(:class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`: the back-off tree's histogram,
:func:`~forestgen.families.mixture.backoff.column_histograms`), with a pseudo-count ``a``:

    p(x | l) = (1 - w_l) f_l(x) + w_l h(x) / H(cell_l),    w_l = a / (N_l + a),

``N_l`` the leaf's (weighted) count of fitting values. Like a Dirichlet prior centred on the
marginal (the discrete leaves' ``prior``), a large leaf keeps its own law and a leaf of two
rows leans on the column's shape inside its cell. Both parts integrate to one over the cell,
so the mixture does. A leaf whose cell the histogram does not cover (or of zero width) keeps
``f_l`` alone (``w_l = 0``).

One uniform per draw serves both parts (:meth:`sample_uniform`): ``u < w_l`` draws the
histogram part from ``u / w_l``, else the base part from ``(u - w_l) / (1 - w_l)``: a draw of
the mixture from one uniform, as the torch sampler makes it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen import registry
from forestgen.leaves.base import ColumnCell, LeafModel, torch_tensor
from forestgen.leaves.marginal_cell import MarginalCellLeaf
from forestgen.registry import register

#: largest uniform below one (a rescaled uniform must stay in [0, 1))
_BELOW_ONE = 1.0 - 2.0**-53


@register("leaf", "marginal_mix")
class MarginalMixLeaf(LeafModel):
    """``base`` numeric leaf mixed with the column's histogram on the leaf's cell.

    Parameters
    ----------
    base : numeric leaf model (name, class or instance; default ``"truncnorm"``).
    edges, cdf : the column's marginal histogram (as :class:`MarginalCellLeaf`; ``None``: one
        bin over the cells' finite span, set at ``fit``).
    strength : pseudo-count ``a >= 0``: leaf ``l`` of ``N_l`` fitting values gives the
        histogram the weight ``a / (N_l + a)`` (0: ``base`` alone).
    """

    discrete = False
    handles_cells = frozenset({"zero-width", "unbounded", "empty"})

    def __init__(self, *, base: Any = "truncnorm", edges=None, cdf=None, strength: float = 1.0):
        self.base = base
        self.edges = None if edges is None else [float(e) for e in edges]
        self.cdf = None if cdf is None else [float(c) for c in cdf]
        self.strength = strength

    def get_params(self) -> dict:
        return {"base": self.base, "edges": None if self.edges is None else list(self.edges),
                "cdf": None if self.cdf is None else list(self.cdf), "strength": self.strength}

    def _base_model(self) -> LeafModel:
        if not hasattr(self, "base_"):
            self.base_ = registry.resolve("leaf", self.base, LeafModel)
            if self.base_.discrete:
                raise ValueError(f"MarginalMixLeaf needs a numeric base, got {self.base!r}")
        return self.base_

    def _root_model(self) -> MarginalCellLeaf:
        if not hasattr(self, "root_"):
            if self.edges is None or self.cdf is None:
                raise ValueError("MarginalMixLeaf needs the column's histogram (edges, cdf)")
            self.root_ = MarginalCellLeaf(edges=self.edges, cdf=self.cdf)
        return self.root_

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> MarginalMixLeaf:
        a = float(self.strength)
        if not (np.isfinite(a) and a >= 0):
            raise ValueError(f"MarginalMixLeaf strength must be a finite number >= 0, got "
                             f"{self.strength!r}")
        x = np.asarray(x, float)
        leaf = np.asarray(leaf)
        L = len(cell.lower)
        self._base_model().fit(x, leaf, cell, weight)
        if self.edges is None:  # (as MarginalCellLeaf: one bin over the cells' finite span)
            fin = np.r_[np.asarray(cell.lower, float), np.asarray(cell.upper, float)]
            fin = fin[np.isfinite(fin)]
            lo0, hi0 = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 1.0)
            self.edges, self.cdf = [lo0, hi0 if hi0 > lo0 else lo0 + 1.0], [0.0, 1.0]
        root = self._root_model()
        e = np.asarray(self.edges, float)
        lo = np.maximum(np.asarray(cell.lower, float), e[0])
        hi = np.minimum(np.asarray(cell.upper, float), e[-1])
        ok = hi > lo  # (a cell the histogram covers, of positive width)
        root.fit(None, None, ColumnCell(lower=np.where(ok, lo, e[0]),
                                        upper=np.where(ok, hi, e[-1]), allowed=None,
                                        data_min=cell.data_min, data_max=cell.data_max))
        c = np.asarray(self.cdf, float)
        ok &= np.interp(hi, e, c) - np.interp(lo, e, c) > 0
        keep = ~np.isnan(x)
        w = None if weight is None else np.asarray(weight, float)[keep]
        n = np.bincount(leaf[keep].astype(np.int64), weights=w, minlength=L)[:L]
        self.fit_count_, self.fit_covered_ = n, ok  # (for set_strength; not saved)
        self.weight_ = self._weights(a)
        return self

    def _weights(self, a: float) -> np.ndarray:
        n, ok = self.fit_count_, self.fit_covered_
        return np.where(ok, a / np.maximum(n + a, 1e-300), 0.0) if a > 0 else np.zeros(len(n))

    def set_strength(self, strength: float) -> MarginalMixLeaf:
        """Refit only the weights for another pseudo-count (the fit's leaf counts and parts
        kept): what a fit with ``strength`` would give. Used to score strengths on held-out
        rows without refitting the parts."""
        a = float(strength)
        if not (np.isfinite(a) and a >= 0):
            raise ValueError(f"MarginalMixLeaf strength must be a finite number >= 0, got "
                             f"{strength!r}")
        if not hasattr(self, "fit_count_"):
            raise ValueError("MarginalMixLeaf.set_strength needs a fitted leaf (not a loaded "
                             "one: the leaf counts are not saved)")
        self.strength = strength
        self.weight_ = self._weights(a)
        return self

    def part_log_probs(self, leaf, x) -> tuple[np.ndarray, np.ndarray]:
        """The log densities of the two parts at ``(leaf, x)`` pairs: the base leaf's and
        the histogram's on the cell (``-inf`` where a leaf's weight is 0)."""
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        root = np.where(self.fit_covered_[leaf] if hasattr(self, "fit_covered_")
                        else self.weight_[leaf] > 0, self._root_model().log_prob(leaf, x),
                        -np.inf)
        return self._base_model().log_prob(leaf, x), root

    def mix_log_prob(self, leaf, base: np.ndarray, root: np.ndarray,
                     strength: float) -> np.ndarray:
        """:meth:`log_prob` from :meth:`part_log_probs` at the weights a fit with
        ``strength`` gives (the fit's leaf counts): scores several strengths with the parts
        evaluated once."""
        w = self._weights(float(strength))[np.asarray(leaf, np.int64)]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.logaddexp(np.log1p(-w) + base, np.where(w > 0, np.log(w) + root,
                                                               -np.inf))

    # ------------------------------------------------------------------ persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        out = {"weight_": self.weight_}
        out.update({f"base_{k}": v for k, v in self._base_model().param_arrays().items()})
        out.update({f"root_{k}": v for k, v in self._root_model().param_arrays().items()
                    if k in ("lo_", "hi_")})
        return out

    def set_param_arrays(self, arrays: dict[str, np.ndarray]) -> MarginalMixLeaf:
        self.weight_ = np.asarray(arrays["weight_"], float)
        self._base_model().set_param_arrays({k[5:]: v for k, v in arrays.items()
                                             if k.startswith("base_")})
        self._root_model().set_param_arrays({k[5:]: v for k, v in arrays.items()
                                             if k.startswith("root_")})
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        w = arrays.get("weight_")
        if (not isinstance(w, np.ndarray) or w.shape != (n_leaves,)
                or not (np.isfinite(w).all() and (w >= 0).all() and (w <= 1).all())):
            raise ValueError(f"MarginalMixLeaf.weight_ must be [{n_leaves}] weights in [0, 1]")
        self._base_model().check_param_arrays(
            {k[5:]: v for k, v in arrays.items() if k.startswith("base_")}, n_leaves, n_levels)
        self._root_model().check_param_arrays(
            {k[5:]: v for k, v in arrays.items() if k.startswith("root_")}, n_leaves, n_levels)

    # ------------------------------------------------------------------ queries
    def _logw(self, leaf) -> tuple[np.ndarray, np.ndarray]:
        w = self.weight_[leaf]
        with np.errstate(divide="ignore"):
            return np.log(w), np.log1p(-w)

    def log_prob(self, leaf, x):
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        lw, l1w = self._logw(leaf)
        base = self._base_model().log_prob(leaf, x)
        with np.errstate(invalid="ignore"):
            root = np.where(lw > -np.inf, self._root_model().log_prob(leaf, x), -np.inf)
            out = np.logaddexp(l1w + base, lw + root)
        return np.where(np.isnan(x), 0.0, out)

    def _interval_parts(self, leaf, lo, hi):
        leaf = np.asarray(leaf, np.int64)
        w = self.weight_[leaf]
        with np.errstate(under="ignore", invalid="ignore"):
            pb = np.exp(self._base_model().log_prob_interval(leaf, lo, hi))
            pr = np.exp(self._root_model().log_prob_interval(leaf, lo, hi))
        return leaf, (1.0 - w) * np.nan_to_num(pb), w * np.nan_to_num(pr)

    def log_prob_interval(self, leaf, lo, hi):
        _, pb, pr = self._interval_parts(leaf, lo, hi)
        with np.errstate(divide="ignore"):
            return np.log(pb + pr)

    def mean(self, leaf):
        leaf = np.asarray(leaf, np.int64)
        w = self.weight_[leaf]
        base = self._base_model().mean(leaf)
        return np.where(w > 0, (1.0 - w) * base + w * self._root_model().mean(leaf), base)

    def mean_interval(self, leaf, lo, hi):
        leaf, pb, pr = self._interval_parts(leaf, lo, hi)
        mb = self._base_model().mean_interval(leaf, lo, hi)
        mr = np.nan_to_num(self._root_model().mean_interval(leaf, lo, hi))
        tot = pb + pr
        with np.errstate(invalid="ignore", divide="ignore"):
            mix = (pb * np.nan_to_num(mb) + pr * mr) / tot
        return np.where((tot > 0) & (pr > 0), mix, mb)

    @property
    def has_uniform_sampler(self) -> bool:
        return self._base_model().has_uniform_sampler

    def sample_uniform(self, leaf, u):
        leaf = np.asarray(leaf, np.int64)
        u = np.asarray(u, float)
        base = self._base_model()
        if not base.has_uniform_sampler:
            raise NotImplementedError(f"MarginalMixLeaf: its base {type(base).__name__} has "
                                      "no sample_uniform")
        w = self.weight_[leaf]
        on = u < w
        out = np.empty(len(leaf))
        if on.any():
            out[on] = self._root_model().sample_uniform(
                leaf[on], np.minimum(u[on] / w[on], _BELOW_ONE))
        rest = ~on
        if rest.any():
            out[rest] = base.sample_uniform(
                leaf[rest], np.minimum((u[rest] - w[rest]) / (1.0 - w[rest]), _BELOW_ONE))
        return out

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        if lo is None and hi is None and self._base_model().has_uniform_sampler:
            return self.sample_uniform(leaf, rng.random(m))
        lo_ = np.full(m, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float),
                                                                     (m,))
        hi_ = np.full(m, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), (m,))
        _, pb, pr = self._interval_parts(leaf, lo_, hi_)
        tot = pb + pr
        # no mass in the interval (evidence outside the leaf): the base model decides
        on = (tot > 0) & (rng.random(m) * np.where(tot > 0, tot, 1.0) < pr)
        out = np.empty(m)
        if on.any():
            out[on] = self._root_model().sample(leaf[on], rng, lo=lo_[on], hi=hi_[on])
        rest = ~on
        if rest.any():
            out[rest] = self._base_model().sample(
                leaf[rest], rng, lo=None if lo is None else lo_[rest],
                hi=None if hi is None else hi_[rest])
        return out

    # ------------------------------------------------------------------ torch hooks
    @property
    def has_torch(self) -> bool:
        return self._base_model().has_torch

    @property
    def has_torch_sampler(self) -> bool:
        return self._base_model().has_torch_sampler

    def torch_params(self, dtype, device) -> dict:
        base = self._base_model()
        lw, l1w = self._logw(np.arange(len(self.weight_)))
        return {"base": base.torch_params(dtype, device), "base_fn": type(base).torch_log_prob,
                "root": self._root_model().torch_params(dtype, device),
                "logw": torch_tensor(np.stack([lw, l1w], axis=1), dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        lw, l1w = params["logw"][leaf].unbind(-1)
        base = params["base_fn"](params["base"], leaf, x)
        root = MarginalCellLeaf.torch_log_prob(params["root"], leaf, x)
        root = torch.where(torch.isfinite(lw), lw + root, torch.full_like(root, -np.inf))
        return torch.logaddexp(l1w + base, root)

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        base = self._base_model()
        return {"base": base.torch_sample_params(n_leaves, device),
                "base_fn": type(base).torch_sample,
                "root": self._root_model().torch_sample_params(n_leaves, device),
                "w": torch_tensor(self.weight_, "float64", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        """:meth:`sample_uniform` on the device: ``u < w`` the histogram part from ``u / w``,
        else the base part from ``(u - w) / (1 - w)``."""
        import torch

        w = params["w"][leaf]
        on = u < w
        ur = (u / torch.where(on, w, torch.ones_like(w))).clamp(0.0, _BELOW_ONE)
        ub = ((u - w) / (1.0 - w).clamp(min=1e-300)).clamp(0.0, _BELOW_ONE)
        root = MarginalCellLeaf.torch_sample(params["root"], leaf, ur)
        base = params["base_fn"](params["base"], leaf, ub)
        return torch.where(on, root, base)
