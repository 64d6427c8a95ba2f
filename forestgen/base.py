"""``GenerativeForest``: the query side shared by every leaf-mixture learner (DESIGN.md §5).

A fitted model holds a table encoder, :class:`~forestgen.tree.arrays.ForestArrays`, per-leaf
log-weights and one :class:`~forestgen.leaves.base.LeafModel` per column. Learners implement
``fit``; log-density, sampling and the query API live here, with the slots
(:mod:`forestgen.slots`), the shared parameter handling (:mod:`forestgen.learner_params`) and
the model file's contents (:mod:`forestgen.persistence`) in their own modules.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError as _SklearnNotFittedError

from forestgen import registry
from forestgen.data.encoder import TableEncoder
from forestgen.data.metadata import constrain
from forestgen.data.rules import missing_parents
from forestgen.data.schema import Schema
from forestgen.data.support import (
    column_log_volumes,
    floor_zero_rows,
    restrict_cells,
    restrict_levels,
    rows_to_support,
)
from forestgen.families import LEAF_MIXTURE, Family
from forestgen.inference.conditions import Evidence
from forestgen.inference.rules import keeps_rules
from forestgen.learner_params import COMMON_CHECKS, PARAM_ALIASES, init_params, resolve_aliases
from forestgen.leaves.base import ColumnCell, LeafModel
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.leaves.stats import ForestStats
from forestgen.modelfile import (
    ModelFileError,
    attach_mapping,
    check_mapping,
    from_json,
    read_model_file,
    write_model_file,
)
from forestgen.parallel import thread_map
from forestgen.persistence import model_arrays, restore_fitted
from forestgen.slots import SLOT_BASES, SLOTS, check_slots
from forestgen.tree.arrays import ColumnBoxes, LeafBoxes
from forestgen.validation import as_generator, check_int, warn_input

__all__ = ["ATOM_PRIOR", "COMMON_CHECKS", "PAIR_BUDGET", "SAMPLE_BLOCK", "SLOTS", "SLOT_BASES",
           "EncodedTable", "GenerativeForest", "NotFittedError"]

PAIR_BUDGET = 4_000_000  # (row, leaf) pairs evaluated per batch: bounds memory of queries
SAMPLE_BLOCK = 100_000  # rows drawn at a time by sample / sample_to: bounds their temporaries
#: pseudo-rows of the point-mass prior of a learner whose ``prior_strength`` is ``"auto"``
ATOM_PRIOR = 0.3

# SLOTS, SLOT_BASES (forestgen.slots) and COMMON_CHECKS (forestgen.learner_params) are
# re-exported here, where they stood before.


class EncodedTable:
    """Rows already encoded by a fitted :class:`~forestgen.data.encoder.TableEncoder`, as a
    learner's ``fit`` takes a table: :meth:`GenerativeForest.fit_encoder` adopts ``encoder``
    and ``rows`` instead of fitting an encoder. A learner's held-out copy fitted on part of its
    training table (:func:`forestgen.families.mixture.backoff.held_out_fit`) so shares the
    full fit's encoder and encoding (same columns, levels and support)."""

    def __init__(self, encoder: TableEncoder, rows: np.ndarray):
        self.encoder = encoder
        self.rows = np.asarray(rows, float)

    def __len__(self) -> int:
        return len(self.rows)

    def take(self, idx: np.ndarray) -> EncodedTable:
        """The rows ``idx``, with the same encoder."""
        return EncodedTable(self.encoder, self.rows[idx])


class NotFittedError(_SklearnNotFittedError):
    """A query on an unfitted model; scikit-learn's ``NotFittedError`` (a ``ValueError`` and
    ``AttributeError``), so ``except sklearn.exceptions.NotFittedError`` catches it."""


class GenerativeForest(BaseEstimator):
    """Base class of forest density models with factorised leaves.

    A scikit-learn ``BaseEstimator`` (density estimator): ``get_params``/``set_params``/
    ``clone``, ``check_is_fitted``, ``GridSearchCV`` and ``cross_val_score`` (scoring by the
    mean log-likelihood :meth:`score`) work on every learner.

    Fitted attributes: ``encoder_`` (:class:`~forestgen.data.encoder.TableEncoder`), ``forest_``
    (:class:`~forestgen.tree.arrays.ForestArrays`),
    ``leaf_log_weight_`` (``log(coverage / B)`` per leaf), ``leaf_models_`` (one per column).
    """

    method_name = "forest"
    model_family: ClassVar[Family] = LEAF_MIXTURE
    #: split thresholds sit on training values (else between them): how the torch layer rounds
    #: them to float32 (:func:`forestgen.leaves.base.edges_to`)
    cuts_at_values: ClassVar[bool] = False
    #: ``forest_``, ``leaf_log_weight_`` and ``leaf_models_`` are this model's law, a leaf mixture
    #: scored by the shared :meth:`log_prob_encoded`: code that works on leaf mixtures directly
    #: (the torch scoring and device sampler) may answer for it. False where the learner's law
    #: is its own (EOGT's star-node walk, NRGBoost's energy)
    leaf_mixture_law: ClassVar[bool] = True

    @property
    def capabilities(self) -> frozenset:
        """Queries this model answers (see :mod:`forestgen.families`)."""
        return self.model_family.capabilities

    def require(self, query: str) -> None:
        """Raise ``NotImplementedError`` naming the learner and ``query`` unless declared."""
        if query not in self.capabilities:
            raise NotImplementedError(
                f"{type(self).__name__} ({self.model_family.name} family) does not answer "
                f"{query!r} queries; it answers {sorted(self.capabilities)}")

    def require_normalised(self, query: str) -> None:
        """Raise ``NotImplementedError`` naming the learner and ``query`` unless this model's
        ensembler combines leaf scores into a normalised density (``Ensembler.normalised``):
        the shared ``log_prob``, leaf posteriors and the torch scoring add leaf scores in a
        log-sum-exp and would be silently wrong for an unnormalised energy."""
        name = self.model_family.slots.get("ensembler")
        if name is None or not self.component("ensembler").normalised:
            what = "it has no ensembler slot" if name is None else \
                f"its ensembler {type(self.component('ensembler')).__name__} is unnormalised"
            raise NotImplementedError(
                f"{type(self).__name__}: the shared {query!r} sums leaf mixtures, but "
                f"{what}; override it with the learner's own (e.g. with a normaliser estimate)")

    #: slots this learner's paper rules out, each with the reason: giving one raises
    #: ``ValueError`` at construction naming the learner, the slot and the reason
    ruled_out: ClassVar[dict[str, str]] = {}
    #: the edge cells its trees can give a leaf model (``LeafModel.handles_cells``): ARF and
    #: GeF grow zero-width cells (only rows missing the column reached the leaf) and unbounded
    #: ones; partition learners (RFDE, DEF) finite boxes of positive width
    edge_cells: ClassVar[frozenset] = frozenset({"zero-width", "unbounded", "empty"})
    #: what a splitter in this learner must grow (``Splitter.grows``): one tree at a time
    #: (``"tree"``) or splits of the joint cell table of all trees (``"cell table"``)
    splitter_grows: ClassVar[str] = "tree"
    #: whether its tree splitter grows on class labels (``Splitter.labelled``: ARF, GeF)
    splitter_labelled: ClassVar[bool] = False
    #: what it gives a tree splitter: the :class:`~forestgen.splitters.base.TreeData` fields it
    #: fills and ``"max_depth"`` if its limits set a depth; a splitter whose ``needs`` are not
    #: all here is refused at construction
    tree_data: ClassVar[frozenset] = frozenset()
    #: whether the enumerating path scores its (row, leaf) pairs sorted by leaf
    #: (:func:`~forestgen.tree.arrays.in_leaf_order`: the leaf tables in memory order); a
    #: learner whose leaf models share laws by index keeps the pairs row by row instead
    #: (:class:`~forestgen.leaves.indexed.IndexedLeaf` scores each shared law once per row)
    pairs_in_leaf_order: ClassVar[bool] = True

    def component(self, slot: str):
        """The component filling ``slot`` (``"ensembler"`` or ``"sampler"``): the learner's
        parameter of that name (registry name, class or instance), else the family's default
        (:attr:`Family.slots <forestgen.families.Family>`). One fresh instance per model
        (an instance given is copied, as scikit-learn copies a criterion), built on first use
        after ``fit`` / ``set_params``."""
        cache = self.__dict__.setdefault("_components", {})
        if slot not in cache:
            spec = getattr(self, slot, None)
            if spec is None:
                spec = self.model_family.slots[slot]
            cache[slot] = registry.build(slot, spec, SLOT_BASES[slot])
        return cache[slot]

    def _check_slots(self) -> None:
        """Constructor-time check of the slot parameters (:func:`forestgen.slots.check_slots`):
        a ruled-out slot given raises ``ValueError`` with the learner's reason; a component of
        the wrong kind raises ``TypeError``/``ValueError`` naming the learner, the slot and
        what it needs."""
        check_slots(self)

    _estimator_type = "density_estimator"
    #: scikit-learn parameter names accepted (in ``__init__`` and ``set_params``) and readable
    #: as attributes, for learners whose own (paper) name is the value
    PARAM_ALIASES = PARAM_ALIASES

    def __init_subclass__(cls, **kwargs):
        """Each learner declares its parameters once, as the keyword-only signature of its
        ``__init__`` (paper defaults, type hints); this wrapper stores every argument, after
        applying the defaults and the scikit-learn aliases, as an attribute of the same name
        before the learner's own body (usually empty) runs. ``inspect.signature`` still sees
        the learner's signature, so ``get_params``/``clone`` work as in scikit-learn."""
        super().__init_subclass__(**kwargs)
        _keep_rules_in(cls)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_stores_params", False):
            return
        signature = inspect.signature(init)
        stored = [p.name for p in list(signature.parameters.values())[1:]
                  if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            kw = resolve_aliases(type(self), kw)
            bound = signature.bind(self, *args, **kw)
            bound.apply_defaults()
            for name in stored:
                setattr(self, name, bound.arguments[name])
            init(self, *args, **kw)
            if type(self).__init__ is __init__:  # once, by the learner's own constructor
                self._check_slots()

        __init__._stores_params = True
        cls.__init__ = __init__

    def __getattr__(self, name: str):
        target = GenerativeForest.PARAM_ALIASES.get(name)
        if target is not None and target in init_params(type(self)):
            return getattr(self, target)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's ``check_is_fitted``: what :meth:`check_fitted` (a learner's own, e.g.
        NRGBoost's, which holds no ``forest_``) accepts."""
        try:
            self.check_fitted()
        except NotFittedError:
            return False
        return True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.target_tags.required = False
        return tags

    def validate_params(self) -> None:
        """Check the constructor's parameters, raising ``ValueError``/``TypeError`` naming the
        bad one. Called by ``fit``, by ``load`` and by other fitters (e.g.
        :mod:`forestgen.distributed`). The base checks the conventional parameters a learner
        declares (:data:`COMMON_CHECKS`); learners extend it with their own."""
        declared = init_params(type(self))
        auto = getattr(type(self), "AUTO_PARAMS", ())
        for name, check in COMMON_CHECKS.items():
            if name in declared and not (name in auto and getattr(self, name) == "auto"):
                check(name, getattr(self, name))
        self._check_slots()
        self.__dict__.pop("_components", None)  # fit builds fresh components

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters. Components (splitters, leaf models) are values, not
        nested estimators: ``deep`` adds no ``component__param`` keys, so parameters always
        round-trip through ``type(self)(**params)`` and model files."""
        return super().get_params(deep=False)

    def set_params(self, **params) -> GenerativeForest:
        params = resolve_aliases(type(self), params)
        valid = self.get_params()
        for k in params:
            if k not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {k!r}; valid: "
                                 f"{sorted(valid)}")
        super().set_params(**params)
        self.__dict__.pop("_components", None)
        self._check_slots()
        return self

    # ----------------------------------------------------------------- shared fitting helpers
    def check_fitted(self) -> None:
        """Raise :class:`NotFittedError` unless fitted, or ``ModelFileError`` if the file a
        loaded model is memory-mapped from changed on disk since
        (:class:`~forestgen.modelfile.MappedFile`); every query calls it before reading the
        model's arrays."""
        if not hasattr(self, "forest_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit() first")
        check_mapping(self)

    def _check_fitted(self) -> None:
        """Former name of :meth:`check_fitted`, kept for learners written against it."""
        self.check_fitted()

    @property
    def schema_(self) -> Schema:
        self.check_fitted()
        return self.encoder_.schema

    @property
    def n_features_in_(self) -> int:
        return self.schema_.d

    def fit_leaves(self, Z: np.ndarray, leaves: np.ndarray, boxes: LeafBoxes | ColumnBoxes,
                   numeric_leaf: Any, discrete_leaf: Any, pair_weight: np.ndarray | None = None,
                   overrides: dict[int, Any] | None = None, *,
                   tree_major: bool = False,
                   also: Sequence[Callable[[], Any]] = ()) -> list[LeafModel]:
        """Fit one leaf model per column from the leaves ``[n, B]`` of the fitting rows.

        ``numeric_leaf``/``discrete_leaf`` (registry name, class or prototype instance) serve
        every column of that kind; ``overrides`` maps a column index to its own leaf model. A
        numeric column with point masses (``ColumnSpec.atoms``) gets its leaf model inside a
        :class:`~forestgen.leaves.point_mass.PointMassLeaf`.

        The leaf models get the (value, leaf) pairs row by row (``pair_weight`` is in that
        order, ``[n * B]``), or with ``tree_major`` tree by tree
        (:meth:`~forestgen.leaves.base.LeafModel.fit_column`: the column's values and the
        leaves ``[B, n]``): a tree's leaves are one block of ids, so per-leaf sums stay in
        cache. A leaf lies in one tree, so its pairs
        arrive in row order either way and per-leaf sums keep their bits; only sums over all
        pairs (GeF's global SD) would differ, so learners whose leaf fits take none opt in.

        ``also``: more tasks (callables without arguments, results dropped) queued on the same
        threads behind the columns' tasks, for work that does not read the leaf models: they
        take a thread that the last columns leave idle.
        """
        n, B = leaves.shape
        if tree_major:  # [B, n]: leaf models read each column's values in place
            leaves = np.ascontiguousarray(leaves.T)
            if pair_weight is not None:
                pair_weight = np.ascontiguousarray(np.reshape(pair_weight, (n, B)).T)
        else:
            flat_leaf = leaves.ravel()

        def fit(j: int) -> LeafModel:  # columns are independent: one task each
            lm, cell = self._leaf_model_and_cell(j, boxes, numeric_leaf, discrete_leaf,
                                                 overrides)
            if tree_major:
                lm.fit_column(np.ascontiguousarray(Z[:, j]), leaves, cell, pair_weight)
            else:
                lm.fit(np.repeat(Z[:, j], B), flat_leaf, cell, pair_weight)
            return lm

        d = self.encoder_.schema.d
        tasks = [functools.partial(fit, j) for j in range(d)] + list(also)
        return thread_map(lambda k: tasks[k](), len(tasks), getattr(self, "n_jobs", 1))[:d]

    def _fit_leaves(self, *args, **kwargs) -> list[LeafModel]:
        """Former name of :meth:`fit_leaves`, kept for learners written against it."""
        return self.fit_leaves(*args, **kwargs)

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the fitted arrays: ``forest`` (nodes and cells), ``leaf_weights``,
        ``missing`` (per-leaf missing rates) and one ``column:<name>`` entry per leaf model
        (docs: "Scale and memory")."""
        self.check_fitted()

        def size(obj) -> int:
            return sum(v.nbytes for v in vars(obj).values() if isinstance(v, np.ndarray))

        out = {"forest": size(self.forest_), "leaf_weights": int(self.leaf_log_weight_.nbytes),
               "missing": int(getattr(self, "missing_rate_", np.zeros(0)).nbytes)}
        for name, lm in zip(self.schema_.names, self.leaf_models_):
            out[f"column:{name}"] = size(lm)
        return out

    def _leaf_model_and_cell(self, j: int, boxes: LeafBoxes | ColumnBoxes, numeric_leaf: Any,
                             discrete_leaf: Any, overrides: dict[int, Any] | None = None,
                             ) -> tuple[LeafModel, ColumnCell]:
        """An unfitted leaf model for column ``j`` and the column's leaf cells."""
        spec = self.encoder_.schema.columns[j]
        k = spec.n_levels if spec.is_discrete else 0
        # the support is part of the density: numeric cells end at the column's latent range,
        # discrete cells hold only its support levels
        lower, upper = restrict_cells(spec, *boxes.column(j))
        cell = ColumnCell(
            lower=lower, upper=upper,
            allowed=restrict_levels(spec, boxes.levels(j, k)) if spec.is_discrete else None,
            data_min=float(spec.lower), data_max=float(spec.upper), n_levels=k,
        )
        proto = (overrides or {}).get(j)
        if proto is None:
            proto = discrete_leaf if spec.is_discrete else numeric_leaf
        lm = fresh_leaf(proto)
        if spec.atoms and not spec.is_discrete and not isinstance(lm, PointMassLeaf):
            lm = PointMassLeaf(base=lm, atoms=spec.atoms, prior=self.atom_prior())
        return lm, cell

    def atom_prior(self) -> float:
        """Pseudo-rows of the Dirichlet prior that shrinks each leaf's shares at a numeric
        column's point masses toward the column's overall shares (``PointMassLeaf(prior=)``):
        the learner's ``prior_strength`` where it has a number there, :data:`ATOM_PRIOR`
        where it selects its prior itself (``"auto"``), 0 for learners without one."""
        p = getattr(self, "prior_strength", 0.0)
        return float(p) if isinstance(p, (int, float)) else ATOM_PRIOR

    def leaf_prototypes(self) -> tuple[Any, Any]:
        """The (numeric, discrete) leaf models this learner fits on a grown forest."""
        raise NotImplementedError(f"{type(self).__name__} does not fit its leaves from "
                                  "sufficient statistics (leaf_prototypes)")

    def leaf_overrides(self) -> dict[int, Any]:
        """Columns (index -> leaf model) fitted with their own leaf model; none by default."""
        return {}

    def fit_leaves_from_stats(self, stats: ForestStats) -> GenerativeForest:
        """Fit the leaf weights (coverage), leaf models and missing rates of the grown forest
        ``forest_`` from :class:`~forestgen.leaves.stats.ForestStats` (e.g. merged over the
        partitions of a Dask DataFrame, :mod:`forestgen.distributed`): the same fit as from
        the rows the statistics summarise. Re-fitting on other rows is honest estimation."""
        lam = float(getattr(self, "marginal_weight_", 0.0))
        if lam > 0:
            raise NotImplementedError(
                f"{type(self).__name__}.fit_leaves_from_stats (forestgen.distributed."
                f"refit_leaves): this model backed off toward the column marginals "
                f"(marginal_weight_={lam:g}), whose leaf the forest statistics do not carry; "
                f"fit with marginal_weight=0 to re-estimate the leaves from statistics")
        schema = self.encoder_.schema
        forest = self.forest_
        if len(stats.coverage) != forest.n_leaves or len(stats.columns) != schema.d:
            raise ValueError(f"statistics for {len(stats.coverage)} leaves and "
                             f"{len(stats.columns)} columns; the model has {forest.n_leaves} "
                             f"leaves and {schema.d} columns")
        numeric, discrete = self.leaf_prototypes()
        self.leaf_log_weight_ = self.component("ensembler").checked_log_weights(
            stats.coverage, forest.leaf_tree, forest.n_trees)
        boxes = forest.column_boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
        models: list[LeafModel] = []
        for j, st in enumerate(stats.columns):
            lm, cell = self._leaf_model_and_cell(j, boxes, numeric, discrete,
                                                 self.leaf_overrides())
            models.append(lm.fit_stats(st, cell))
        self.leaf_models_ = models
        self._set_missing_rates(stats.missing_cols, stats.coverage, stats.missing)
        return self

    def fit_encoder(self, X, kinds: dict | None = None, min_rows: int = 2,
                    background_rules: bool = False, **options: Any) -> np.ndarray:
        """Fits ``encoder_`` (a :class:`~forestgen.data.encoder.TableEncoder` with ``kinds``
        and ``options``) on the training table ``X`` and returns ``X`` encoded; a
        ``ValueError`` naming the learner for fewer than ``min_rows`` rows. An
        :class:`EncodedTable` is taken as it is: its encoder becomes ``encoder_`` (``kinds``
        and ``options`` unused) and a copy of its rows is returned. ``background_rules``:
        passed to :meth:`~forestgen.data.encoder.TableEncoder.fit_transform` (the caller then
        calls ``encoder_.wait_rules()``)."""
        if isinstance(X, EncodedTable):  # rows a fitted encoder has encoded: adopted as is
            self.encoder_, Z = X.encoder, np.array(X.rows, float)
        else:
            self.encoder_ = TableEncoder(kinds=kinds, **options)
            Z = self.encoder_.fit_transform(X, background_rules=background_rules)
        if len(Z) < min_rows:
            self.encoder_.wait_rules(reraise=False)
            raise ValueError(f"{type(self).__name__} needs at least {min_rows} rows, "
                             f"got {len(Z)}")
        return Z

    # ----------------------------------------------------------------- queries
    def encode_rows(self, X, missing_columns: str = "nan") -> np.ndarray:
        """Encoded query rows; a column absent from a DataFrame is all-missing, so every query
        (``log_prob``, ``predict_proba``, conditions, ...) marginalises it. Absent columns,
        unseen levels and levels given as text are reported in one
        :class:`~forestgen.validation.InputWarning`. Rows this model's encoder encoded
        (an :class:`EncodedTable`) are taken as they are."""
        self.check_fitted()
        if isinstance(X, EncodedTable) and X.encoder is self.encoder_:
            return np.array(X.rows, float)
        notes: list = []
        Z = self.encoder_.transform(X, missing_columns, notes)
        warn_input(notes, type(self).__name__)
        return Z

    def _encode(self, X, missing_columns: str = "nan") -> np.ndarray:
        """Former name of :meth:`encode_rows`, kept for learners written against it."""
        return self.encode_rows(X, missing_columns)

    def log_prob_encoded(self, Z: np.ndarray) -> np.ndarray:
        """Log density of encoded rows; NaN entries are marginalised out exactly."""
        n = len(Z)
        out = np.empty(n)
        B = self.forest_.n_trees
        step = max(1, PAIR_BUDGET // max(B, 1))
        self.require_normalised("log_prob")
        ens = self.component("ensembler")
        for s in range(0, n, step):
            Zb = Z[s: s + step]
            res = np.empty(len(Zb))
            fused = np.zeros(len(Zb), bool)
            if ens.logsumexp_combine:  # one fused walk: scores and logsumexp, no list of pairs
                from forestgen.inference.marginal_walk import fused_rows, marginal_log_prob

                fused = fused_rows(self, Zb)
                if fused.any():
                    res[fused] = marginal_log_prob(self, Zb[fused])
            inc = np.isnan(Zb).any(axis=1)
            if (~inc & ~fused).any():
                res[~inc & ~fused] = self._log_prob_complete(Zb[~inc & ~fused], ens)
            if (inc & ~fused).any():
                res[inc & ~fused] = self._log_prob_reach(Zb[inc & ~fused], ens)
            out[s: s + len(Zb)] = res
        return out

    def _log_prob_complete(self, Zc: np.ndarray, ens) -> np.ndarray:
        """Complete rows: one leaf per tree. Pairs are scored tree-major, so consecutive lookups
        hit one tree's (contiguous) slice of the leaf parameter tables."""
        m = len(Zc)
        B = self.forest_.n_trees
        leaf = np.ascontiguousarray(self.forest_.apply(Zc).T).ravel()
        s = self.leaf_log_weight_[leaf]
        for j, lm in enumerate(self.leaf_models_):
            s += lm.log_prob(leaf, np.tile(Zc[:, j], B))
        return ens.combine_dense(s.reshape(B, m))

    def _log_prob_reach(self, Zi: np.ndarray, ens) -> np.ndarray:
        """Rows with missing entries, scored leaf by leaf: every consistent leaf, each pair by
        the enumerating path's one scorer (:func:`~forestgen.inference.posterior.pair_log_weights`,
        the observed values as point evidence) and combined by the ensembler. The rows are
        walked in the order of the leaves they reach in the first two trees (missing values
        following the splits' NaN side), so consecutive rows share most of their paths and the
        nodes stay in cache (``benchmarks/results/walk_search_1m.md``); each row's result does
        not depend on it. (A mixture's rows whose observed columns all have in-kernel leaf
        factors take the fused walk of :mod:`forestgen.inference.marginal_walk` instead,
        complete or not: same values, no list of pairs.)"""
        from forestgen.inference.posterior import pair_log_weights

        res = np.empty(len(Zi))
        ev = Evidence(Zi, np.full(Zi.shape, np.nan), np.full(Zi.shape, np.nan))
        order = np.lexsort(self.forest_.apply(Zi, n_trees=2).T[::-1])
        for idx, ptr, leaf in self.forest_.reach_chunks(Zi, PAIR_BUDGET, rows=order):
            prow = np.repeat(np.arange(len(idx)), np.diff(ptr))
            res[idx] = ens.combine(ptr, pair_log_weights(self, ev, idx, leaf.astype(np.int64),
                                                         prow))
        return res

    def log_prob(self, X, conditions=None) -> np.ndarray:
        """Log density (nats) of each row: a density for numeric columns times a pmf for discrete
        ones. Entries given as missing (NaN/None) are marginalised, not imputed, and so are
        columns absent from a DataFrame (a marginal density, as R arf's ``lik``); a column the
        model does not know raises.

        With ``conditions`` (see :mod:`forestgen.inference`), returns ``log p(x_free | evidence)``.
        """
        if conditions is not None:
            from forestgen.inference.api import conditional_log_prob

            self.require("conditional_log_prob")
            return conditional_log_prob(self, X, conditions)
        return self.log_prob_encoded(self.encode_rows(X, missing_columns="nan"))

    def floor_log_volumes(self) -> np.ndarray:
        """Per column, the log measure ``density_floor`` is relative to: the support's
        (:func:`~forestgen.data.support.column_log_volumes`; a box learner, its root box's)."""
        return column_log_volumes(self.encoder_.schema)

    def apply_density_floor(self, logp: np.ndarray, floor: Any = "default",
                            over: Any = None) -> np.ndarray:
        """Exact log densities ``logp`` as this learner's ``log_prob`` reports them: a row of
        density zero scores ``floor`` times the uniform density on the columns its density is
        over (``over``: ``bool [n, d]`` or a callable returning it, as
        :func:`~forestgen.inference.density_columns` gives it; default every column), on the
        measure of :meth:`floor_log_volumes`. ``"default"``: the learner's ``density_floor``;
        ``None``: exact."""
        floor = getattr(self, "density_floor", None) if floor == "default" else floor
        return floor_zero_rows(logp, floor, self.floor_log_volumes(), over)

    def score_samples(self, X) -> np.ndarray:
        """Alias of :meth:`log_prob` (scikit-learn naming)."""
        return self.log_prob(X)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row (nats). Rows of zero density (outside the model's
        support) make it ``-inf``; a ``RuntimeWarning`` then says how many and gives the mean
        over the other rows."""
        lp = self.log_prob(X)
        out = float(np.mean(lp))
        zero = np.isneginf(lp)
        if zero.any():
            import warnings

            rest = f"{np.mean(lp[~zero]):.4f}" if (~zero).any() else "undefined"
            warnings.warn(f"{int(zero.sum())} of {len(lp)} rows have zero density under this "
                          f"{type(self).__name__} (outside its support), so the mean "
                          f"log-likelihood is -inf; the mean over the other rows is {rest} "
                          f"(a density_floor, where the learner has one, bounds such rows)",
                          RuntimeWarning, stacklevel=2)
        return out

    def sample_encoded(self, n: int, random_state=None, missing: bool = False,
                       within_support: bool = True) -> np.ndarray:
        """``n`` encoded rows (complete unless ``missing=True``): draws from the model's one
        law, in its support (:mod:`forestgen.data.support`: observed range, training decimals;
        numeric values also inside ranges declared in metadata). ``within_support`` is
        accepted for compatibility and changes nothing: there is no other law to draw from."""
        self.check_fitted()
        check_int("n", n, 0)
        rng = as_generator(random_state)
        if n == 0:
            return np.empty((0, self.schema_.d))
        sampler = self.component("sampler")
        Z = sampler.sample(self, int(n), rng, missing=missing)
        return constrain(Z if getattr(sampler, "in_support", False)
                         else rows_to_support(Z, self.schema_), self.schema_)

    def sample(self, n: int | None = None, random_state=None, conditions=None,
               on_empty: str | None = None, missing: bool = True) -> pd.DataFrame:
        """``n`` synthetic rows as a DataFrame with the training columns, dtypes and levels.

        ``conditions``: evidence to condition on (a dict for one condition set, or a DataFrame of
        per-row evidence with NaN = free; see :mod:`forestgen.inference`). ``on_empty``, for
        evidence of probability zero: ``"raise"`` (the error names the row and column;
        the default for a dict), ``"unconditional"`` (those rows drawn without their evidence)
        or ``"nan"`` (those rows keep their given values, every other entry missing; the default
        for a per-row DataFrame, so one impossible row does not fail the others, a level unseen
        at fit time included); both with a warning.
        ``missing``: reproduce the training data's missing values, blanking each entry with the
        missing rate of its column among the training rows of the sampled leaf (missing at random
        given the leaf); RFDE, DEF, GF.Boost and EOGT keep no missing rates and draw complete
        rows. ``log_prob`` treats missing entries as unobserved: it marginalises them
        and does not score the missingness itself. Conditional samples are complete here;
        NRGBoost, whose law holds each column's missing state, draws it in conditional samples
        too unless ``missing=False`` (:meth:`forestgen.NRGBoost.sample`).
        """
        self.check_fitted()
        if conditions is not None:
            from forestgen.inference.api import conditional_sample

            self.require("conditional_sample")
            return conditional_sample(self, n, conditions, random_state, on_empty=on_empty)
        if n is None:
            raise ValueError("n is required when no conditions are given")
        check_int("n", n, 0)
        blocks = list(self._sample_blocks(int(n), random_state, missing))
        return blocks[0] if len(blocks) == 1 else pd.concat(blocks, ignore_index=True)

    def _sample_blocks(self, n: int, random_state, missing: bool):
        """The rows of :meth:`sample` as DataFrames of at most ``SAMPLE_BLOCK`` rows, drawn in
        order from one Generator (so a streamed sample equals the in-memory one)."""
        rng = as_generator(random_state)
        for s in range(0, max(n, 1), SAMPLE_BLOCK):
            m = min(SAMPLE_BLOCK, n - s)
            yield self.encoder_.inverse_transform(self.sample_encoded(m, rng, missing))

    def _blocks_to_write(self, n: int, random_state, missing: bool):
        """The blocks :meth:`sample_to` writes: :meth:`_sample_blocks`, or where the table has
        constraints (kept by rejection in :meth:`sample` only) ``sample`` of each block."""
        from forestgen.inference.rules import rules_of

        rules = rules_of(self)
        if not rules or not rules.constraints:
            yield from self._sample_blocks(n, random_state, missing)
            return
        rng = as_generator(random_state)
        for s in range(0, max(n, 1), SAMPLE_BLOCK):
            yield self.sample(min(SAMPLE_BLOCK, n - s), rng, missing=missing)

    def sample_to(self, path: str | Path, n: int, random_state=None, missing: bool = True,
                  progress: bool = False) -> Path:
        """Write ``n`` synthetic rows to a Parquet (``.parquet``, needs ``pyarrow``) or CSV
        (``.csv``, ``.csv.gz``) file, ``SAMPLE_BLOCK`` rows at a time, so ``n`` may exceed
        memory. The rows equal ``sample(n, random_state, missing=missing)`` for the same seed
        (both draw blocks in order from one Generator; NRGBoost's ``sample`` runs its Gibbs
        chains over all ``n`` rows at once, so for it only the first block agrees). Under
        declared or detected constraints (:mod:`forestgen.data.rules`) each block is drawn by
        ``sample``, which keeps them by rejection, so again only the first block agrees.
        ``progress`` draws a bar on stderr. The file appears at ``path`` only when complete.
        """
        self.check_fitted()
        check_int("n", n, 0)
        path = Path(path)
        name = path.name.lower()
        if name.endswith(".parquet"):
            kind = "parquet"
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise ImportError("sample_to(.parquet) needs pyarrow: pip install pyarrow") \
                    from None
        elif name.endswith((".csv", ".csv.gz")):
            kind = "csv"
        else:
            raise ValueError(f"path must end in .parquet, .csv or .csv.gz, got {path.name!r}")
        from forestgen.progress import ProgressBar

        bar = ProgressBar(f"sample_to {path.name}", int(n), progress, unit="rows")
        tmp = path.with_name(f".{path.name}.partial")
        writer = None
        try:
            with open(tmp, "wb") as fh:
                for i, block in enumerate(self._blocks_to_write(int(n), random_state,
                                                                missing)):
                    if kind == "csv":
                        block.to_csv(fh, header=i == 0, index=False,
                                     compression="gzip" if name.endswith(".gz") else None)
                    else:
                        table = pa.Table.from_pandas(block, preserve_index=False)
                        if writer is None:
                            writer = pq.ParquetWriter(fh, table.schema)
                        elif not table.schema.equals(writer.schema):
                            table = table.cast(writer.schema)
                        writer.write_table(table)
                    bar.step(len(block))
                if writer is not None:
                    writer.close()
            tmp.replace(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        bar.close(f"{int(n)} rows written to {path}")
        return path

    def _fit_missing(self, Z: np.ndarray, leaves: np.ndarray,
                     pair_weight: np.ndarray | None = None) -> None:
        """Per-leaf missing rate of every column that had missing training values, and which
        of them are missing only where another is (:func:`forestgen.data.rules.missing_parents`)."""
        cols = np.nonzero(np.isnan(Z).any(axis=0))[0]
        L = self.forest_.n_leaves
        if len(cols) == 0:  # (no missing values: rates of no column, no counts to make)
            self._set_missing_rates(cols, np.ones(L), np.zeros((L, 0)))
            self.missing_parent_ = missing_parents(np.isnan(Z[:, cols]))
            return
        flat = leaves.ravel()
        B = leaves.shape[1]
        w = np.ones(flat.size) if pair_weight is None else np.asarray(pair_weight, float)
        tot = np.bincount(flat, weights=w, minlength=L)
        miss = np.zeros((L, len(cols)))
        for k, j in enumerate(cols):
            miss[:, k] = np.bincount(flat, weights=w * np.repeat(np.isnan(Z[:, j]), B),
                                     minlength=L)
        self._set_missing_rates(cols, tot, miss)
        self.missing_parent_ = missing_parents(np.isnan(Z[:, cols]))

    def _set_missing_rates(self, cols: np.ndarray, total: np.ndarray,
                           missing: np.ndarray) -> None:
        """Missing rate per leaf of columns ``cols`` from the (weighted) count of training
        rows per leaf ``total [L]`` and of those missing each column, ``missing [L, len(cols)]``
        (no nesting of missing columns known: :meth:`_fit_missing` finds it from the rows)."""
        self.missing_cols_ = np.asarray(cols, np.int64)
        self.missing_parent_ = None
        self.missing_rate_ = missing / np.maximum(total, 1e-300)[:, None]

    # ----------------------------------------------------------------- inference
    def expect(self, columns=None, conditions=None):
        """Conditional mean of numeric columns / most probable level of categorical ones
        (under constraints the conditions leave open, of 20,000 draws that keep them:
        :func:`forestgen.inference.rules.open_rows`)."""
        from forestgen.inference.api import expect

        self.require("expect")
        return expect(self, columns, conditions)

    def predict_proba(self, X, target=None):
        """P(target level | the other observed entries of each row), as a DataFrame."""
        from forestgen.inference.api import predict_proba

        self.require("predict")
        return predict_proba(self, X, self._require_target(target, "predict_proba"))

    def predict(self, X, target=None):
        """Prediction of any column from the other observed entries of each row."""
        from forestgen.inference.api import predict

        self.require("predict")
        return predict(self, X, self._require_target(target, "predict"))

    def _require_target(self, target, query: str):
        self.check_fitted()
        if target is None:
            raise ValueError(f"{type(self).__name__}.{query} needs target=<column>: any column "
                             f"can be predicted from the others")
        return target

    def impute(self, X, method: str = "expectation", n_imputations: int = 1, random_state=None):
        """Fill missing entries from the conditional distribution given each row's observed ones.

        ``method="expectation"``: conditional mean (numeric) / most probable level; ``"sample"``:
        one conditional draw per cell (``n_imputations`` draws give that many frames). The
        conditional is exact for the fitted mixture; with the tiny leaves of generation presets
        (``min_node_size=2``) the posterior concentrates on a few leaves and numeric estimates are
        noisy — for imputation fit with larger leaves (on adult, ``ARF(min_node_size=30)`` brings
        numeric NRMSE from 1.30 to 0.97, below mean imputation's 1.00, and categorical accuracy
        from 0.64 to 0.69; ``benchmarks/bench_imputation.py``).
        """
        from forestgen.inference.api import impute

        self.require("impute")
        return impute(self, X, method=method, n_imputations=n_imputations,
                      random_state=random_state)

    # ----------------------------------------------------------------- torch (forestgen.torch)
    def to_torch(self, *, dtype=None, device=None, validate_args: bool = False):
        """This model as a :class:`torch.distributions.Distribution` over encoded rows; ``dtype``
        and ``device`` are those of its samples, ``validate_args`` as in
        :class:`ForestDistribution`."""
        from forestgen.torch.distribution import ForestDistribution

        self.require("torch")
        return ForestDistribution(self, dtype=dtype, device=device, validate_args=validate_args)

    def as_dataset(self, batch_size: int = 256, n_batches: int | None = None, seed: int = 0,
                   **kwargs):
        """Synthetic rows as a torch dataset (:class:`~forestgen.torch.SyntheticDataset`):
        ``DataLoader(ds, batch_size=k)`` yields ``(k, d)`` batches; ``ds.batches()`` is the
        ``IterableDataset`` of whole drawn batches (finite or infinite)."""
        from forestgen.torch.datasets import SyntheticDataset

        return SyntheticDataset(self, batch_size=batch_size, n_batches=n_batches, seed=seed,
                                **kwargs)

    def warmup(self) -> GenerativeForest:
        """Run every query kernel once (Numba compilation), e.g. before DataLoader workers fork."""
        self.check_fitted()
        Z = self.sample_encoded(2, random_state=0)
        self.log_prob_encoded(Z)
        Z[0, 0] = np.nan
        self.log_prob_encoded(Z)
        return self

    # ----------------------------------------------------------------- persistence
    def _extra_arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _extra_meta(self) -> dict[str, Any]:
        return {}

    def _restore_extra(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        pass

    def save(self, path: str | Path, compress: bool = True) -> Path:
        """Write the model as one zip of an ``.npz`` of arrays plus a JSON metadata entry.

        The arrays stream into the file one by one, deflated (zlib level 1) unless
        ``compress=False``, which writes them as they are: a larger file (4x on the mixed
        table of ``benchmarks/bench_scale.py``) that saves several times faster.

        No pickle is involved, so loading a model file cannot execute code. The save is atomic
        (:func:`forestgen.modelfile.write_model_file`): the model is checked and encoded
        first, then written to a temporary file that replaces ``path`` only once complete, so
        an error or a killed process leaves any previous file at ``path`` intact.
        """
        self.check_fitted()
        arrays, meta = model_arrays(self, self._extra_arrays(), self._extra_meta())
        return write_model_file(path, arrays, meta, compress=compress)

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int | None = None,
             mmap: bool | str = "auto") -> GenerativeForest:
        """Load a model written by :meth:`save` (any learner; ``cls`` may be the base class).

        The file is validated before any kernel sees it (:mod:`forestgen.modelfile`): only a
        regular file is read, sizes are bounded before decompression (``max_bytes`` raises
        the cap for trusted large files), the checksum (CRC-32) of every array must match,
        array shapes and dtypes must match the metadata, and every tree must be a well-formed
        tree. Anything else raises :class:`~forestgen.modelfile.ModelFileError` naming the
        file and the part. A file saved with ``compress=False`` has its arrays memory-mapped
        (copy-on-write): with ``mmap="auto"`` (default) when it holds at least
        ``forestgen.modelfile.MMAP_MIN_BYTES`` (64 MiB; a smaller one is read), with
        ``mmap=True`` always, with ``mmap=False`` never. Every query of a mapped model first
        checks that its file has not changed on disk since (size, inode, modification time)
        and raises ``ModelFileError`` if it has.
        """
        arrays, meta = read_model_file(path, max_bytes, mmap=mmap)
        try:
            learner_cls = registry.get("learner", meta["learner"])
        except (KeyError, TypeError) as e:
            raise ModelFileError(f"{path}: unknown learner ({e})") from None
        if not issubclass(learner_cls, cls):
            raise TypeError(f"{path} holds a {learner_cls.__name__}, not a {cls.__name__}")
        try:
            model = learner_cls._from_file(arrays, meta)
        except ModelFileError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else e
            raise ModelFileError(f"{path}: {msg}") from None
        except Exception as e:  # anything else a malformed file provokes is still its fault
            raise ModelFileError(f"{path}: {type(e).__name__}: {e}") from None
        attach_mapping(model, arrays)
        return model

    @classmethod
    def _from_file(cls, arrays: dict[str, np.ndarray], meta: dict) -> GenerativeForest:
        model = cls(**from_json(meta["params"]))
        model.validate_params()
        model._restore_extra(*restore_fitted(model, arrays, meta))
        return model


#: queries that keep the table's logical rules (:mod:`forestgen.inference.rules`), wrapped
#: wherever a learner defines them
RULE_QUERIES = ("log_prob", "log_prob_encoded", "sample", "sample_encoded", "predict_proba",
                "predict", "impute", "expect")


def _keep_rules_in(cls) -> None:
    """Wrap each of ``cls``'s rule queries (its own or a mixin's) that is not wrapped yet."""
    for name in RULE_QUERIES:
        fn = getattr(cls, name, None)
        wrapped = None if fn is None else keeps_rules(name)(fn)  # a wrapped fn comes back
        if wrapped is not fn:
            setattr(cls, name, wrapped)


_keep_rules_in(GenerativeForest)


def fresh_leaf(spec: Any) -> LeafModel:
    """A new unfitted leaf model from a leaf slot's value: a registry name, a class or an
    instance (copied, with the leaf models among its parameters)."""
    return _fresh(registry.resolve("leaf", spec, LeafModel))


def _fresh(lm: LeafModel) -> LeafModel:
    """A new unfitted copy (the same instance must not be shared between columns), leaf
    models among its parameters copied too (a ``PointMassLeaf(base=TruncNormalLeaf())`` given
    once must not fit one base for every column)."""
    return type(lm)(**{k: _fresh(v) if isinstance(v, LeafModel) else v
                       for k, v in lm.get_params().items()})
