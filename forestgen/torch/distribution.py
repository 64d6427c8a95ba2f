"""A fitted forest as a :class:`torch.distributions.Distribution` (DESIGN.md §7).

The distribution lives in the model's *encoded* space: one float per column, numeric columns in
their own units and discrete columns as level codes ``0..k-1`` (see
:class:`~forestgen.data.encoder.TableEncoder`); :meth:`ForestDistribution.encode` /
:meth:`ForestDistribution.decode` convert DataFrames to and from it.

For leaf mixtures whose numeric leaf models implement the torch hook of
:class:`~forestgen.leaves.base.LeafModel` (every built-in does: ARF's FORDE, Watson et al. 2023,
Alg. 2; GeF; RFDE; DEF), with any discrete leaf models, ``log_prob`` runs on torch ops:

1. complete rows are routed to one leaf per tree (:mod:`forestgen.torch.routing`: the compiled
   kernel for CPU tensors, a packed node layout with one gather per level elsewhere);
2. each reached leaf contributes ``log w_leaf + sum_j log p_j(x_j | leaf)``, scored tree-major:
   the weight and every discrete column come from one gather into a leaf-major table of log
   masses (built from the leaf models' own ``log_prob``), each numeric column from its leaf
   model's ``torch_log_prob`` on parameters gathered per (row, tree);
3. trees combine by a log-sum-exp (the mixture ``p(x) = sum_leaves w_leaf prod_j p_j``).

Rows are processed in chunks sized by a memory budget per device (:data:`MEMORY_BUDGET`).

It therefore runs on the input's device and is differentiable with respect to numeric inputs.
The gradient is *piecewise*: inside a leaf cell a truncated-normal factor has gradient
``-(x - mu) / sigma^2``; the routing (which leaf a point falls in) is piecewise constant and has
no gradient, so the density jumps across split thresholds. Uniform leaves have piecewise constant
densities: their gradient is exactly zero (returned as zeros, not as an error). Missing entries
(NaN) are marginalised exactly, as in :meth:`GenerativeForest.log_prob_encoded`: the leaves a
partial row can reach are enumerated on the CPU (routing needs no gradient) and scored with torch.
Models with a numeric leaf lacking the hook fall back to the numpy path (values exact, no
gradient, a warning if one is wanted).
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.distributions import Distribution, constraints

from forestgen.data.support import off_levels
from forestgen.inference.rules import (
    conditional_constraint_log_normaliser,
    constraint_log_normaliser,
    law_log_prob_encoded,
    rules_of,
)
from forestgen.leaves.base import CUTS_AT_VALUES, numpy_dtype, torch_tensor
from forestgen.logsumexp import torch_logsumexp, torch_segment_logsumexp
from forestgen.torch.routing import PackedTrees, route, routing_forest
from forestgen.torch.rules import RuleKeeper
from forestgen.torch.sampling import DeviceSampler, checked_device, device_sampler_supported

if TYPE_CHECKING:  # annotations only: the estimator base imports this module in to_torch
    from forestgen.base import GenerativeForest

# bytes of per-chunk temporaries (about 12 words per (row, tree, column)). On the CPU large
# enough that each torch op is worth its intra-op parallel region (with few, larger chunks a
# busy machine stalls fewer thread barriers), small enough to stay in memory comfortably
MEMORY_BUDGET = {"cpu": 128 * 2**20, "default": 512 * 2**20}


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
@dataclass
class _TorchForest:
    """The forest and its leaf parameters as tensors on one device / dtype."""

    numeric: list  # (column, torch_log_prob, params) per numeric column (the leaf hook)
    disc_cols: torch.Tensor  # discrete columns
    disc_k: torch.Tensor  # their level counts
    disc_off: torch.Tensor  # their first slot in a table row
    table: torch.Tensor  # [L * K]: log w_leaf, then per discrete column k + 2 slots
    width: int  # K


def _build(model: GenerativeForest, device: torch.device, dtype: torch.dtype,
           leaf_log_weight: np.ndarray) -> _TorchForest:
    def T(a, dt=dtype):
        return torch_tensor(a, dt, device)

    def L(a):
        return T(np.asarray(a, np.int64), "long")

    ca = [j for j, lm in enumerate(model.leaf_models_) if lm.discrete]
    table, off = _discrete_table(model, ca, leaf_log_weight)
    return _TorchForest(
        numeric=[(j, type(lm).torch_log_prob, lm.torch_params(dtype, device))
                 for j, lm in enumerate(model.leaf_models_) if not lm.discrete],
        disc_cols=L(ca), disc_off=L(off),
        disc_k=T(np.asarray(model.schema_.n_levels, np.float64)[ca]),
        table=T(table.ravel()), width=table.shape[1],
    )


def _discrete_table(model: GenerativeForest, cols: list[int],
                    leaf_log_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One row per leaf: ``log w_leaf``, then for each discrete column its leaf model's log mass
    of codes ``0..k-1``, of an invalid code (-1) and 0 for a missing entry (marginalised). Built
    from the models' own ``log_prob``, so any discrete leaf model is scored exactly by one
    lookup per (row, leaf)."""
    L = model.forest_.n_leaves
    ks = np.asarray(model.schema_.n_levels, np.int64)[cols]
    off = 1 + np.r_[0, np.cumsum(ks + 2)[:-1]].astype(np.int64)
    table = np.zeros((L, 1 + int((ks + 2).sum())))
    table[:, 0] = leaf_log_weight
    leaves = np.arange(L)
    for j, o, k in zip(cols, off, ks):
        lm = model.leaf_models_[j]
        for c in range(-1, int(k)):
            table[:, o + (c if c >= 0 else k)] = lm.log_prob(leaves, np.full(L, float(c)))
    return table, off


def _leaf_scores(tf: _TorchForest, x: torch.Tensor, leaf: torch.Tensor,
                 rows: torch.Tensor | None = None) -> torch.Tensor:
    """``log w_leaf + sum_j log p_j(x_j | leaf)`` for rows ``x [n, d]``; NaN entries contribute
    0 (marginalised). ``leaf`` is ``[B, n]`` (complete rows: one leaf per tree, tree-major) or,
    with ``rows``, ``[P]`` (pair ``p`` is row ``rows[p]`` in leaf ``leaf[p]``).

    Table slots are computed once per row; the weight and every discrete column then come from
    one gather into the leaf-major table (for a tree-major ``leaf`` consecutive lookups stay
    inside one tree's rows), each numeric column from its leaf model's torch hook."""
    xd = x.detach().index_select(-1, tf.disc_cols)
    k = tf.disc_k
    valid = (xd >= 0) & (xd < k) & (xd == torch.floor(xd))
    slot = torch.where(valid, xd, torch.where(torch.isnan(xd), k + 1, k)).long() + tf.disc_off
    slot = torch.nn.functional.pad(slot, (1, 0))  # slot 0: log w_leaf
    slot = slot.unsqueeze(0) if rows is None else slot.index_select(0, rows)
    idx = (leaf * tf.width).unsqueeze(-1) + slot
    s = tf.table.index_select(0, idx.reshape(-1)).reshape(idx.shape).sum(-1)
    if not tf.numeric:
        return s
    cols = torch.as_tensor([j for j, _, _ in tf.numeric], device=x.device)
    n_nan = torch.isnan(x.index_select(1, cols)).sum(0).tolist()  # one sync per call
    for (j, log_prob, params), c in zip(tf.numeric, n_nan):  # each numeric leaf's torch hook
        if c == len(x):  # marginalised in every row: contributes 0
            continue
        xv = x[:, j] if rows is None else x[:, j].index_select(0, rows)
        if c == 0:
            s = s + log_prob(params, leaf, xv)
        else:
            nan = torch.isnan(xv)
            t = log_prob(params, leaf, torch.where(nan, 0.0, xv))
            s = s + torch.where(nan, 0.0, t)
    return s


# ---------------------------------------------------------------------------- conditionals
@dataclass
class _Conditional:
    """Evidence of a conditional: free columns, point evidence used for routing (NaN where a
    column has no point evidence) and the leaf posterior weights."""

    free: np.ndarray
    route_fill: np.ndarray  # [d]
    leaf_log_weight: np.ndarray | None  # [L], -inf outside the posterior
    #: the evidence dict, for a model off the torch path: its own numpy conditional queries
    evidence: dict | None = None
    #: log P'(C | evidence) of the table's constraints, for a model on the torch path
    log_z: float = 0.0
    #: the evidence dict, for a model on the torch path under constraints (the rows that
    #: leave one open: :func:`forestgen.inference.rules.open_constraint_log_factor`)
    constrained_by: dict | None = None

    def rows(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Free-column rows ``x [n, f]`` -> (scored rows: evidence columns NaN, so they add 0
        (their factors are in the leaf weights); routed rows: point evidence filled in)."""
        n, d = x.shape[0], len(self.route_fill)
        fill = torch.as_tensor(self.route_fill, dtype=x.dtype, device=x.device)
        free = torch.as_tensor(self.free, device=x.device)
        scored = torch.full((n, d), math.nan, dtype=x.dtype, device=x.device)
        scored = scored.index_copy(1, free, x)
        routed = fill.expand(n, d).index_copy(1, free, x.detach())
        return scored, routed


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

    Notes
    -----
    ``sample`` draws on :attr:`sample_device` with torch ops when every leaf model has a device
    sampler (:mod:`forestgen.torch.sampling`), from torch's default generator of that device or
    ``generator`` (so ``torch.manual_seed`` makes samples reproducible); other models draw a seed
    the same way and use their numpy sampler.
    ``log_prob`` runs on torch ops for leaf mixtures (see the module docstring for the gradient:
    piecewise, zero for uniform leaves); otherwise it falls back to numpy.
    :meth:`condition` gives the distribution of the other columns given evidence.
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, model: GenerativeForest, *, dtype: torch.dtype | None = None,
                 device: Any = None, validate_args: bool = False,
                 _conditional: _Conditional | None = None):
        model.check_fitted()
        self.model = model
        self._out_dtype = dtype or torch.get_default_dtype()
        self._out_device = checked_device(device) if device is not None else torch.device("cpu")
        self._cache: dict[tuple, Any] = {}
        self._warned = False
        d = model.schema_.d
        self._cond = _conditional
        self._free = np.arange(d) if _conditional is None else _conditional.free
        rules = rules_of(model)
        numpy_cond = _conditional is not None and _conditional.evidence is not None
        self._keeper = None if not rules or numpy_cond else RuleKeeper(
            model, rules, self._free, None if _conditional is None else _conditional.route_fill,
            None if _conditional is None else _conditional.constrained_by)
        super().__init__(batch_shape=torch.Size(), event_shape=torch.Size([len(self._free)]),
                         validate_args=validate_args)
    # ------------------------------------------------------------------ properties
    @property
    def torch_path(self) -> bool:
        """True when ``log_prob`` runs on torch ops (differentiable, any device)."""
        m = self.model
        if not (hasattr(m, "forest_") and hasattr(m, "leaf_models_")
                and hasattr(m, "leaf_log_weight_")):
            return False
        if not type(m).leaf_mixture_law:
            return False
        try:
            m.require_normalised("torch log_prob")
        except NotImplementedError:
            return False
        return all(lm.discrete or lm.has_torch for lm in m.leaf_models_)

    @property
    def support(self) -> constraints.Constraint:
        return EncodedRows(np.asarray(self.model.schema_.n_levels)[self._free])

    @property
    def columns(self) -> list:
        """Column names, in the order of the event axis."""
        return [self.model.schema_.names[j] for j in self._free]

    @property
    def mean(self) -> torch.Tensor:
        """Mixture mean per column (discrete columns: mean level code), for a model whose law
        is its leaf mixture (``leaf_mixture_law``; EOGT's trees are not its law) and without
        evidence (a conditional: ``model.expect(conditions=...)``)."""
        m = self.model
        if not (hasattr(m, "leaf_models_") and type(m).leaf_mixture_law):
            raise NotImplementedError(f"{type(m).__name__}: the torch 'mean' needs a model whose "
                                      f"law is its leaf mixture; average sample() instead")
        if self._cond is not None and self._cond.evidence is not None:  # the numpy path
            raise NotImplementedError(f"{type(m).__name__}: the torch 'mean' of this "
                                      f"conditional is not available; use "
                                      f"model.expect(conditions=...)")
        lw = self._leaf_log_weight()
        w = np.exp(lw - np.max(lw))
        w /= w.sum()
        leaves = np.flatnonzero(w > 0)
        mu = np.array([w[leaves] @ m.leaf_models_[j].mean(leaves) for j in self._free])
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
        """Encoded tensor ``[n, d]`` -> DataFrame with the training columns, dtypes and levels
        (a conditional's evidence columns hold their point evidence, else missing)."""
        Z = torch.as_tensor(value).detach().to("cpu", torch.float64).numpy()
        Z = Z.reshape(-1, self.event_shape[0])
        if self._cond is not None:
            full = np.tile(self._cond.route_fill, (len(Z), 1))
            full[:, self._free] = Z
            Z = full
        return self.model.encoder_.inverse_transform(Z)

    # ------------------------------------------------------------------ sampling
    @property
    def sample_device(self) -> torch.device:
        """Where :meth:`sample` draws: the distribution's ``device`` for leaf mixtures with a
        device sampler, else the CPU (numpy) with a copy to ``device``."""
        return self._out_device if device_sampler_supported(self.model) else torch.device("cpu")

    def device_sampler(self, device: Any = None) -> DeviceSampler:
        """The (cached) :class:`~forestgen.torch.sampling.DeviceSampler` of this distribution's
        leaf weights and columns on ``device`` (default: the distribution's device)."""
        device = self._out_device if device is None else checked_device(device)
        key = ("sampler", str(device))
        if key not in self._cache:
            self._cache[key] = DeviceSampler(self.model, device, self._leaf_log_weight(),
                                             columns=list(self._free))
        return self._cache[key]

    def sample(self, sample_shape=torch.Size(), generator: torch.Generator | None = None
               ) -> torch.Tensor:
        """Encoded rows of shape ``sample_shape + (d,)`` (complete: no missing entries)."""
        shape = torch.Size(sample_shape)
        n = int(shape.numel())
        if self._cond is not None and self._cond.evidence is not None:
            return self._sample_numpy_conditional(n, generator).reshape(shape + self.event_shape)
        if not device_sampler_supported(self.model) and self._cond is not None:
            raise NotImplementedError(f"{type(self.model).__name__}: conditional sampling in "
                                      "torch needs a leaf mixture with a device sampler")

        def draw(k: int) -> torch.Tensor:
            if device_sampler_supported(self.model):
                return self.device_sampler().sample(k, generator, self._out_dtype)
            seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
            Z = self.model.sample_encoded(k, random_state=seed, missing=False)
            return torch.as_tensor(Z, dtype=self._out_dtype, device=self._out_device)

        out = draw(n) if self._keeper is None else self._keeper.draw(draw, n)
        return out.reshape(shape + self.event_shape)

    def _sample_numpy_conditional(self, n: int, generator) -> torch.Tensor:
        """``n`` draws of the model's own ``sample(conditions=evidence)`` (free columns),
        seeded from ``generator`` and moved to the distribution's device."""
        seed = int(torch.randint(0, 2**62, (1,), generator=generator).item())
        df = self.model.sample(n, conditions=self._cond.evidence, random_state=seed)
        Z = self.model.encoder_.transform(df)[:, self._free]
        return torch.as_tensor(Z, dtype=self._out_dtype, device=self._out_device)

    # ------------------------------------------------------------------ conditioning
    def condition(self, evidence: dict) -> ForestDistribution:
        """The distribution of the columns without evidence given ``evidence``, a dict of
        column -> value in the forms :mod:`forestgen.inference` accepts (a value or level; an
        interval or level set). Exact: the leaf weights become the leaf posterior
        ``w_l prod_e p_e(evidence | l) / Z`` (:func:`forestgen.inference.leaf_posterior`); rows
        with point evidence route on the device, interval / set evidence routes on the CPU.
        ``log_prob`` and ``sample`` of the result take and return the free columns only
        (:attr:`columns`). Raises :class:`~forestgen.inference.ZeroProbabilityError` for
        evidence of probability zero. Under the table's rules, evidence on a column that a
        rule determines is evidence on its determinant (as in numpy), and a determined column
        whose determinant is given a range or set is left out with it
        (:meth:`~forestgen.torch.rules.RuleKeeper.left_out`).

        A model off the torch path (EOGT, NRGBoost) answers with its own numpy queries:
        ``sample`` is ``model.sample(n, conditions=evidence)`` moved to the device (NRGBoost:
        Gibbs chains with the evidence clamped) and ``log_prob`` is ``model.log_prob(X,
        conditions=evidence)`` (no gradient); evidence of probability zero raises when drawn."""
        from forestgen.inference.api import leaf_posterior
        from forestgen.inference.conditions import parse_conditions

        if self._cond is not None:
            raise NotImplementedError("condition() of a conditional distribution: pass all the "
                                      "evidence to one condition() call")
        if not isinstance(evidence, dict):
            raise TypeError(f"evidence must be a dict of column -> value, got "
                            f"{type(evidence).__name__}")
        if not self.torch_path:
            return self._condition_numpy(evidence)
        ev, _ = parse_conditions(self.model, evidence)
        leaf, w = leaf_posterior(self.model, evidence)
        lw = np.full(self.model.forest_.n_leaves, -np.inf)
        with np.errstate(divide="ignore"):
            lw[leaf] = np.log(w)
        active = ev.active()[0]
        if self._keeper is not None:
            given = {self.model.schema_.index(k) for k in evidence}
            active = self._keeper.left_out(active, ev.point[0], given)
        log_z = (conditional_constraint_log_normaliser(self.model, evidence)
                 if self._keeper is not None else 0.0)
        cond = _Conditional(free=np.flatnonzero(~active), route_fill=ev.point[0].copy(),
                            leaf_log_weight=lw, log_z=log_z,
                            constrained_by=dict(evidence) if self._keeper is not None else None)
        return ForestDistribution(self.model, dtype=self._out_dtype, device=self._out_device,
                                  validate_args=self._validate_args, _conditional=cond)

    def _condition_numpy(self, evidence: dict) -> ForestDistribution:
        """``condition`` of a model off the torch path: its numpy conditional queries."""
        from forestgen.inference.conditions import parse_conditions

        m = self.model
        m.require("conditional_sample")
        m.require("conditional_log_prob")
        ev, _ = parse_conditions(m, evidence)
        active = ev.active()[0]
        cond = _Conditional(free=np.flatnonzero(~active), route_fill=ev.point[0].copy(),
                            leaf_log_weight=None, evidence=dict(evidence))
        return ForestDistribution(m, dtype=self._out_dtype, device=self._out_device,
                                  validate_args=self._validate_args, _conditional=cond)

    def _leaf_log_weight(self) -> np.ndarray:
        return self.model.leaf_log_weight_ if self._cond is None else self._cond.leaf_log_weight

    # ------------------------------------------------------------------ density
    def _tensors(self, device: torch.device, dtype: torch.dtype) -> _TorchForest:
        key = (str(device), dtype)
        if key not in self._cache:
            token = CUTS_AT_VALUES.set(self.model.cuts_at_values)  # leaf cell edges
            try:
                self._cache[key] = _build(self.model, device, dtype, self._leaf_log_weight())
            finally:
                CUTS_AT_VALUES.reset(token)
        return self._cache[key]

    def _routing(self, dtype: torch.dtype):
        """The forest whose thresholds ``dtype`` rows are compared with on the CPU."""
        key = ("routing", dtype)
        if key not in self._cache:
            self._cache[key] = routing_forest(self.model.forest_, dtype,
                                              self.model.cuts_at_values)
        return self._cache[key]

    def _packed(self, device: torch.device, dtype: torch.dtype) -> PackedTrees:
        key = ("packed", str(device), dtype)
        if key not in self._cache:
            self._cache[key] = PackedTrees.build(self.model.forest_, self.event_shape[0],
                                                 device, dtype, self.model.cuts_at_values)
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
        if self._keeper is None:
            res = self._score(x)
        else:
            log_z = (constraint_log_normaliser(self.model)[0] if self._cond is None
                     else self._cond.log_z)  # (numpy conditionals divide by it themselves)
            res = self._keeper.log_prob(self._score, x, log_z)
        return res.to(out_dtype).reshape(batch)

    def _score(self, x: torch.Tensor) -> torch.Tensor:
        """The learner's log density of rows ``x [n, f]`` (before the table's rules)."""
        if self._cond is not None and self._cond.evidence is not None:
            return self._log_prob_numpy_conditional(x)
        if self._cond is not None:
            return self._log_prob_torch(*self._cond.rows(x))
        if self.torch_path:
            return self._log_prob_torch(x, x)
        return self._log_prob_numpy(x)

    def _log_prob_numpy(self, x: torch.Tensor) -> torch.Tensor:
        """The model's own ``log_prob_encoded`` of rows ``x [n, d]``, before the table's rules,
        which :meth:`log_prob` applies (no gradient; warns once when one is wanted)."""
        if x.requires_grad and not self._warned:
            warnings.warn(f"{type(self.model).__name__}: log_prob uses the numpy path for "
                          "these leaf models; the result carries no gradient", stacklevel=3)
            self._warned = True
        Z = _float64_rows(x, self.model.schema_.columns)
        return torch.as_tensor(law_log_prob_encoded(self.model, Z), device=x.device,
                               dtype=x.dtype)

    def _log_prob_numpy_conditional(self, x: torch.Tensor) -> torch.Tensor:
        """``model.log_prob(rows, conditions=evidence)`` of free-column rows ``x [n, f]``, exact
        (``floor=None`` where the learner has a ``density_floor``: the distribution is the law
        itself); a row with a discrete code that is no level of its column (outside the
        support, which decoding would move onto a level) is ``-inf``."""
        xs = _float64_rows(x, [self.model.schema_.columns[j] for j in self._free])
        bad = off_levels([self.model.schema_.columns[j] for j in self._free], xs).any(axis=1)
        lp = np.full(len(xs), -np.inf)
        if (~bad).any():
            Z = np.tile(self._cond.route_fill, (int((~bad).sum()), 1))
            Z[:, self._free] = xs[~bad]
            df = self.model.encoder_.inverse_transform(Z)
            own = getattr(type(self.model).log_prob, "__wrapped__", type(self.model).log_prob)
            exact = {"floor": None} if "floor" in inspect.signature(own).parameters else {}
            lp[~bad] = self.model.log_prob(df, conditions=self._cond.evidence, **exact)
        return torch.as_tensor(lp, device=x.device, dtype=x.dtype)

    def _log_prob_torch(self, x: torch.Tensor, xr: torch.Tensor) -> torch.Tensor:
        """Rows ``x [n, d]`` scored (NaN marginalised) in the leaves that ``xr`` (same rows,
        with point evidence filled in) routes to."""
        tf = self._tensors(x.device, x.dtype)
        n, d = x.shape
        B = int(self.model.forest_.n_trees)
        out = torch.empty(n, dtype=x.dtype, device=x.device)
        if n == 0:
            return out + (x * 0).sum(-1)
        nan_row = torch.isnan(xr).any(-1)
        parts: list[tuple[torch.Tensor, torch.Tensor]] = []
        full = torch.nonzero(~nan_row).squeeze(-1)
        budget = MEMORY_BUDGET.get(x.device.type, MEMORY_BUDGET["default"])
        step = max(1, budget // (12 * x.element_size() * B * (d + 1)))
        for s in range(0, full.numel(), step):
            idx = full[s : s + step]
            xs = x[idx]
            leaf = route(self._routing(x.dtype), lambda: self._packed(x.device, x.dtype),
                         xr[idx])
            # tree-major [B, m]: lookups of one tree stay within its rows of the leaf tables
            s_bm = _leaf_scores(tf, xs, leaf.T.contiguous())
            parts.append((idx, torch_logsumexp(s_bm, 0)))
        part = torch.nonzero(nan_row).squeeze(-1)
        if part.numel():
            parts.append((part, self._log_prob_partial(tf, x[part], xr[part])))
        res = torch.zeros(n, dtype=x.dtype, device=x.device)
        for idx, val in parts:
            res = res.index_put((idx,), val)
        # a zero-valued term tying the output to every finite input entry, so that backward
        # returns zeros (not an error) where the density does not depend on x (uniform leaves,
        # categorical codes, rows outside the support)
        xf = torch.where(torch.isfinite(x), x, torch.zeros_like(x))
        return res + (xf * 0).sum(-1)

    def _log_prob_partial(self, tf: _TorchForest, x: torch.Tensor,
                          xr: torch.Tensor) -> torch.Tensor:
        """Rows with NaN: all leaves each row can reach (CPU routing), scored with torch."""
        Z = xr.detach().to("cpu", torch.float64).numpy()
        ptr, leaf = self._routing(x.dtype).reach(Z)
        # rows in chunks of at most `most` (row, leaf) pairs (at least one row per chunk)
        budget = MEMORY_BUDGET.get(x.device.type, MEMORY_BUDGET["default"])
        most = max(1, budget // (12 * x.element_size() * (x.shape[1] + 1)))
        parts = []
        start = 0
        while start < len(Z):
            end = max(start + 1, int(np.searchsorted(ptr, ptr[start] + most, "right")) - 1)
            rows = np.repeat(np.arange(end - start), np.diff(ptr[start: end + 1]))
            rows_t = torch.as_tensor(rows, device=x.device)
            leaf_t = torch.as_tensor(leaf[ptr[start]: ptr[end]].astype(np.int64),
                                     device=x.device)
            s = _leaf_scores(tf, x[start:end], leaf_t, rows_t)
            parts.append(torch_segment_logsumexp(s, rows_t, end - start))
            start = end
        return torch.cat(parts) if parts else x.new_zeros(0)


def _float64_rows(x: torch.Tensor, columns) -> np.ndarray:
    """Rows ``x [n, f]`` as float64 for the numpy path, columns ``columns`` (their specs). A
    numeric value of a lower precision (float32) that is the rounding of a point of its
    column's grid (two decimals: 47.9 read as 47.900001525...) is that point, and one that
    rounds a column's training bound is the bound: the value the row was encoded from, not
    one past the range or across a cell face at a training value (the torch path rounds its
    cells to the input's precision instead)."""
    Z = x.detach().to("cpu", torch.float64).numpy()
    if x.dtype == torch.float64:
        return Z
    Z = Z.copy()
    npdt = numpy_dtype(x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        for j, spec in enumerate(columns):
            if spec.is_discrete:
                continue
            z = Z[:, j]
            if spec.has_grid:
                g = spec.to_grid(z)
                z = np.where(g.astype(npdt) == z.astype(npdt), g, z)
            for bound in (spec.lower, spec.upper):
                if np.isfinite(bound):
                    z = np.where(z == float(npdt(bound)), bound, z)
            Z[:, j] = z
    return Z
