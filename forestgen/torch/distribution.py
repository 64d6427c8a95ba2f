"""A fitted forest as a :class:`torch.distributions.Distribution` (DESIGN.md §7).

The distribution lives in the model's *encoded* space: one float per column, numeric columns in
their own units and discrete columns as level codes ``0..k-1`` (see
:class:`~forestgen.data.encoder.TableEncoder`); :meth:`ForestDistribution.encode` /
:meth:`ForestDistribution.decode` convert DataFrames to and from it.

For leaf mixtures whose leaf models all implement the torch hook of
:class:`~forestgen.leaves.base.LeafModel` (every built-in does: ARF's FORDE, Watson et al. 2023,
Alg. 2; GeF; RFDE; DEF) ``log_prob`` runs on torch ops:

1. trees are traversed by gathers over the :class:`~forestgen.tree.arrays.ForestArrays` node
   arrays, one step per depth level, all rows x trees at once;
2. each reached leaf contributes ``log w_leaf + sum_j log p_j(x_j | leaf)``, each factor from
   its leaf model's ``torch_log_prob`` with the parameters gathered per row;
3. trees combine by a log-sum-exp (the mixture ``p(x) = sum_leaves w_leaf prod_j p_j``).

It therefore runs on the input's device and is differentiable with respect to numeric inputs.
The gradient is *piecewise*: inside a leaf cell a truncated-normal factor has gradient
``-(x - mu) / sigma^2``; the routing (which leaf a point falls in) is piecewise constant and has
no gradient, so the density jumps across split thresholds. Uniform leaves have piecewise constant
densities: their gradient is exactly zero (returned as zeros, not as an error). Missing entries
(NaN) are marginalised exactly, as in :meth:`GenerativeForest.log_prob_encoded`: the leaves a
partial row can reach are enumerated on the CPU (routing needs no gradient) and scored with torch.
Models with a leaf lacking the hook fall back to the numpy path (values exact, no gradient, a
warning if one is wanted).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.distributions import Distribution, constraints

from forestgen.base import GenerativeForest
from forestgen.leaves.base import floor_to, numpy_dtype, torch_tensor

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
ELEMENT_BUDGET = 4_000_000  # rows x trees x columns per chunk of the torch path


# ---------------------------------------------------------------------------- support
class EncodedRows(constraints.Constraint):
    """Support of a forest: numeric columns real (not NaN), discrete columns integer codes in
    ``0..k-1``. ``event_dim = 1``: one check per row."""

    event_dim = 1
    is_discrete = False

    def __init__(self, n_levels: np.ndarray):
        self.n_levels = np.asarray(n_levels, np.int64)
        super().__init__()

    def check(self, value: torch.Tensor) -> torch.Tensor:
        k = torch.as_tensor(self.n_levels, device=value.device, dtype=value.dtype)
        disc = k > 0
        ok_disc = (value >= 0) & (value < k) & (value == torch.floor(value))
        ok = torch.where(disc, ok_disc, ~torch.isnan(value))
        return ok.all(-1)

    def __repr__(self) -> str:
        return f"EncodedRows(d={len(self.n_levels)})"


# ---------------------------------------------------------------------------- tensors
def _max_depth(feature: np.ndarray, left: np.ndarray, right: np.ndarray,
               roots: np.ndarray) -> int:
    depth = 0
    frontier = roots.astype(np.int64)
    while True:
        frontier = frontier[feature[frontier] >= 0]
        if frontier.size == 0:
            return depth
        frontier = np.concatenate([left[frontier], right[frontier]]).astype(np.int64)
        depth += 1


@dataclass
class _TorchForest:
    """The forest and each column's leaf parameters (from its leaf model's torch hook) as
    tensors on one device / dtype."""

    feature: torch.Tensor
    threshold: torch.Tensor
    nan_left: torch.Tensor
    left: torch.Tensor
    right: torch.Tensor
    cat_off: torch.Tensor
    cat_left: torch.Tensor
    node_leaf: torch.Tensor
    feat_levels: torch.Tensor
    roots: torch.Tensor
    depth: int
    leaf_lw: torch.Tensor
    columns: list  # (torch_log_prob, params) per column


def _build(model: GenerativeForest, device: torch.device, dtype: torch.dtype) -> _TorchForest:
    f = model.forest_
    npdt = numpy_dtype(dtype)

    def T(a, dt=dtype):
        return torch_tensor(a, dt, device)

    feature = np.asarray(f.feature, np.int64)
    n_lev = np.asarray(f.n_levels, np.int64)
    feat_levels = n_lev if n_lev.size else np.zeros(1, np.int64)
    cat_left = f.cat_left.astype(bool) if f.cat_left.size else np.zeros(1, bool)
    return _TorchForest(
        feature=T(feature, "long"), threshold=T(floor_to(f.threshold, npdt)),
        nan_left=T(f.nan_left.astype(bool), "bool"), left=T(np.asarray(f.left, np.int64), "long"),
        right=T(np.asarray(f.right, np.int64), "long"),
        cat_off=T(np.asarray(f.cat_off, np.int64), "long"), cat_left=T(cat_left, "bool"),
        node_leaf=T(np.asarray(f.node_leaf, np.int64), "long"),
        feat_levels=T(feat_levels.astype(np.float64)), roots=T(f.roots, "long"),
        depth=_max_depth(feature, f.left, f.right, f.roots),
        leaf_lw=T(model.leaf_log_weight_),
        columns=[(type(lm).torch_log_prob, lm.torch_params(dtype, device))
                 for lm in model.leaf_models_],
    )


def _route(tf: _TorchForest, x: torch.Tensor) -> torch.Tensor:
    """Global leaf ids ``[n, B]`` of complete rows ``x [n, d]`` (no gradient needed)."""
    n = x.shape[0]
    B = tf.roots.shape[0]
    node = tf.roots.unsqueeze(0).expand(n, B).contiguous()
    ncat = tf.cat_left.shape[0]
    for _ in range(tf.depth):
        f = tf.feature[node]
        internal = f >= 0
        fc = f.clamp(min=0)
        xv = torch.gather(x, 1, fc)
        nan = torch.isnan(xv)
        nl = tf.nan_left[node]
        off = tf.cat_off[node]
        xz = torch.where(nan, torch.zeros_like(xv), xv)
        k = tf.feat_levels[fc]
        valid = (xz >= 0) & (xz < k) & (xz == torch.floor(xz))
        code = torch.where(valid, xz, torch.zeros_like(xz)).long()
        cgo = tf.cat_left[(off.clamp(min=0) + code).clamp(max=ncat - 1)]
        go = torch.where(off >= 0, torch.where(valid, cgo, nl), xv <= tf.threshold[node])
        go = torch.where(nan, nl, go)
        nxt = torch.where(go, tf.left[node], tf.right[node])
        node = torch.where(internal, nxt, node)
    return tf.node_leaf[node]


def _leaf_scores(tf: _TorchForest, x: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``log w_leaf + sum_j log p_j(x_j | leaf)`` for ``leaf`` of shape ``S`` and rows ``x``
    broadcastable to ``S + (d,)``; NaN entries contribute 0 (marginalised)."""
    s = tf.leaf_lw[leaf]
    xb = x.expand(*leaf.shape, x.shape[-1])
    for j, (log_prob, params) in enumerate(tf.columns):
        xv = xb[..., j]
        nan = torch.isnan(xv)
        t = log_prob(params, leaf, torch.where(nan, torch.zeros_like(xv), xv))
        s = s + torch.where(nan, torch.zeros_like(t), t)
    return s


def _safe_lse(s: torch.Tensor) -> torch.Tensor:
    """Log-sum-exp over the last axis, ``-inf`` (with zero gradient) where all terms are."""
    m = s.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    tot = torch.exp(s - m).sum(-1)
    ok = tot > 0
    val = torch.log(torch.where(ok, tot, torch.ones_like(tot))) + m.squeeze(-1)
    return torch.where(ok, val, torch.full_like(val, -math.inf))


def _segment_lse(s: torch.Tensor, rows: torch.Tensor, n: int) -> torch.Tensor:
    m = torch.full((n,), -math.inf, dtype=s.dtype, device=s.device)
    m = m.scatter_reduce(0, rows, s.detach(), reduce="amax")
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    tot = torch.zeros(n, dtype=s.dtype, device=s.device).index_add(0, rows, torch.exp(s - m[rows]))
    ok = tot > 0
    val = torch.log(torch.where(ok, tot, torch.ones_like(tot))) + m
    return torch.where(ok, val, torch.full_like(val, -math.inf))


# ---------------------------------------------------------------------------- distribution
class ForestDistribution(Distribution):
    """A fitted forest (any learner with ``log_prob_encoded`` / ``sample_encoded``) as a torch
    distribution over encoded rows; ``event_shape = (d,)``, ``batch_shape = ()``.

    Parameters
    ----------
    model : a fitted :class:`~forestgen.base.GenerativeForest`.
    dtype, device : dtype and device of :meth:`sample` / :meth:`encode` outputs (default:
        ``torch.get_default_dtype()`` on the CPU). :meth:`log_prob` follows its input instead.
    validate_args : check inputs against :attr:`support` (off by default: NaN entries, which
        are marginalised, would fail the check).

    ``sample`` draws a seed from torch's global RNG (or ``generator``) and passes it to the
    model's numpy sampler, so ``torch.manual_seed`` makes samples reproducible.
    ``log_prob`` runs on torch ops for built-in leaf mixtures (see the module docstring for the
    gradient: piecewise, zero for uniform leaves); otherwise it falls back to numpy.
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, model: GenerativeForest, *, dtype: torch.dtype | None = None,
                 device: Any = None, validate_args: bool = False):
        model._check_fitted()
        self.model = model
        self._out_dtype = dtype or torch.get_default_dtype()
        self._out_device = torch.device(device) if device is not None else torch.device("cpu")
        self._cache: dict[tuple, _TorchForest] = {}
        self._warned = False
        d = model.schema_.d
        super().__init__(batch_shape=torch.Size(), event_shape=torch.Size([d]),
                         validate_args=validate_args)

    # ------------------------------------------------------------------ properties
    @property
    def torch_path(self) -> bool:
        """True when ``log_prob`` runs on torch ops (differentiable, any device)."""
        m = self.model
        if not (hasattr(m, "forest_") and hasattr(m, "leaf_models_")
                and hasattr(m, "leaf_log_weight_")):
            return False
        if getattr(type(m).log_prob_encoded, "__func__", type(m).log_prob_encoded) is not \
                GenerativeForest.log_prob_encoded:
            return False
        return all(lm.has_torch for lm in m.leaf_models_)

    @property
    def support(self) -> constraints.Constraint:
        return EncodedRows(self.model.schema_.n_levels)

    @property
    def columns(self) -> list:
        """Column names, in the order of the event axis."""
        return list(self.model.schema_.names)

    @property
    def mean(self) -> torch.Tensor:
        """Mixture mean per column (discrete columns: mean level code)."""
        m = self.model
        if not hasattr(m, "leaf_models_"):
            raise NotImplementedError(f"{type(m).__name__} has no leaf mixture to average")
        w = np.exp(m.leaf_log_weight_ - np.max(m.leaf_log_weight_))
        w /= w.sum()
        leaves = np.arange(m.forest_.n_leaves)
        mu = np.array([w @ lm.mean(leaves) for lm in m.leaf_models_])
        return torch.as_tensor(mu, dtype=self._out_dtype, device=self._out_device)

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(
            "ForestDistribution cannot be expanded: it has no parameters to batch "
            f"(batch_shape=() and event_shape={tuple(self.event_shape)}); pass rows of shape "
            "(..., d) to log_prob directly or build one distribution per model")

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # ------------------------------------------------------------------ encoding helpers
    def encode(self, df) -> torch.Tensor:
        """DataFrame (or array) -> encoded float tensor via ``model.encoder_`` (categorical
        columns become level codes, missing entries NaN)."""
        Z = self.model.encoder_.transform(df)
        return torch.as_tensor(Z, dtype=self._out_dtype, device=self._out_device)

    def decode(self, value: torch.Tensor):
        """Encoded tensor ``[n, d]`` -> DataFrame with the training columns, dtypes and levels."""
        Z = torch.as_tensor(value).detach().to("cpu", torch.float64).numpy()
        return self.model.encoder_.inverse_transform(Z.reshape(-1, self.event_shape[0]))

    # ------------------------------------------------------------------ sampling
    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None
               ) -> torch.Tensor:
        """Encoded rows of shape ``sample_shape + (d,)``, seeded from torch's RNG."""
        shape = torch.Size(sample_shape)
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        Z = self.model.sample_encoded(int(shape.numel()), random_state=seed)
        out = torch.as_tensor(Z, dtype=self._out_dtype, device=self._out_device)
        return out.reshape(shape + self.event_shape)

    # ------------------------------------------------------------------ density
    def _tensors(self, device: torch.device, dtype: torch.dtype) -> _TorchForest:
        key = (str(device), dtype)
        if key not in self._cache:
            self._cache[key] = _build(self.model, device, dtype)
        return self._cache[key]

    def log_prob(self, value) -> torch.Tensor:
        """Log density of encoded rows ``value [..., d]``: a tensor of shape ``value.shape[:-1]``
        on ``value``'s device and dtype (integer inputs use the default float dtype)."""
        value = torch.as_tensor(value)
        d = self.event_shape[0]
        if value.dim() == 0 or value.shape[-1] != d:
            raise ValueError(f"log_prob expects rows of {d} encoded columns "
                             f"({self.columns}); got a tensor of shape {tuple(value.shape)}")
        if not value.is_floating_point():
            value = value.to(torch.get_default_dtype())
        if self._validate_args:
            self._validate_sample(value)
        out_dtype = value.dtype
        work = value if out_dtype in (torch.float32, torch.float64) else value.float()
        batch = value.shape[:-1]
        x = work.reshape(-1, d)
        if self.torch_path:
            res = self._log_prob_torch(x)
        else:
            if x.requires_grad and not self._warned:
                warnings.warn(f"{type(self.model).__name__}: log_prob uses the numpy path for "
                              "these leaf models; the result carries no gradient", stacklevel=2)
                self._warned = True
            Z = x.detach().to("cpu", torch.float64).numpy()
            res = torch.as_tensor(self.model.log_prob_encoded(Z), device=x.device,
                                  dtype=x.dtype)
        return res.to(out_dtype).reshape(batch)

    def _log_prob_torch(self, x: torch.Tensor) -> torch.Tensor:
        tf = self._tensors(x.device, x.dtype)
        n, d = x.shape
        B = int(tf.roots.shape[0])
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        if n == 0:
            return out + (x * 0).sum(-1)
        nan_row = torch.isnan(x).any(-1)
        parts: list[tuple[torch.Tensor, torch.Tensor]] = []
        full = torch.nonzero(~nan_row).squeeze(-1)
        step = max(1, ELEMENT_BUDGET // max(B * max(d, 1), 1))
        for s in range(0, full.numel(), step):
            idx = full[s : s + step]
            xs = x[idx]
            leaf = _route(tf, xs.detach())
            parts.append((idx, _safe_lse(_leaf_scores(tf, xs.unsqueeze(1), leaf))))
        part = torch.nonzero(nan_row).squeeze(-1)
        if part.numel():
            parts.append((part, self._log_prob_partial(tf, x[part])))
        res = torch.zeros(n, dtype=x.dtype, device=x.device)
        for idx, val in parts:
            res = res.index_put((idx,), val)
        # a zero-valued term tying the output to every finite input entry, so that backward
        # returns zeros (not an error) where the density does not depend on x (uniform leaves,
        # categorical codes, rows outside the support)
        xf = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
        return res + (xf * 0).sum(-1)

    def _log_prob_partial(self, tf: _TorchForest, x: torch.Tensor) -> torch.Tensor:
        """Rows with NaN: all leaves each row can reach (CPU routing), scored with torch."""
        Z = x.detach().to("cpu", torch.float64).numpy()
        ptr, leaf = self.model.forest_.reach(Z)
        rows = np.repeat(np.arange(len(Z)), np.diff(ptr))
        rows_t = torch.as_tensor(rows, device=x.device)
        leaf_t = torch.as_tensor(leaf.astype(np.int64), device=x.device)
        s = _leaf_scores(tf, x[rows_t], leaf_t)
        return _segment_lse(s, rows_t, len(Z))
