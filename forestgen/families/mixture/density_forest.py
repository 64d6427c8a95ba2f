"""Density estimation forests (DEF; Bravo, "NRGBoost", ICLR 2025, App. B and D.3.4; density
estimation trees of Ram & Gray, KDD 2011). Spec: ``shared/papers/nrgboost_def.md`` §2.2-2.3, §4.

Each tree is a density estimation tree grown best-first on a bootstrap resample with the ISE or
the KL (likelihood) gain; a leaf carries density ``P̂(X_j) / V(X_j)`` (uniform on its cell with
respect to the reference measure) and the forest is the uniform mixture of the trees —
normalised and exactly sampleable (spec §5.1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen.base import EncodedTable, GenerativeForest
from forestgen.data.binning import Binner
from forestgen.families.boxes import (
    BoxFloor,
    box_leaves,
    discrete_levels,
    drop_missing_rows,
    root_box,
    root_mask,
    with_uniform_component,
)
from forestgen.families.mixture.backoff import (
    append_marginal_tree,
    check_mixture,
    check_shape,
    check_weight,
    column_histograms,
    density_faces,
    marginal_box,
    resolve_backoff,
)
from forestgen.inference.api import density_columns
from forestgen.modelfile import check_box, check_count
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, TreeData, make_splitter, resolve_max_features
from forestgen.splitters.density import DensitySplitter
from forestgen.tree.forest import grow_forest, tree_generators
from forestgen.validation import (
    check_bool,
    check_choice,
    check_int,
    check_real,
    seed_sequence,
)


@register("learner", "def")
class DEF(BoxFloor, GenerativeForest):
    """Density estimation forest: a uniform mixture of bagged best-first density trees.

    Parameters
    ----------
    n_trees : ``T`` (default 100; the paper uses 1000).
    criterion : ``"kl"`` (likelihood gain ``P log(P/V)``, default) or ``"ise"``
        (``P^2 / V``; Ram & Gray's integrated squared error).
    max_leaves : leaves per tree (default 256; the paper tunes ``2^8..2^14``).
    min_samples_leaf : minimum bootstrap-weighted rows in each child (default 1; the paper
        tunes ``[0, 1, 3, 10, 30]``; 0 allows empty, zero-density leaves).
    max_features : fraction of columns drawn per node (``max(1, round(frac·d))``; default 1.0;
        the paper tunes ``d^-1/2, d^-1/4, 1``), or an int count.
    bootstrap : resample ``n`` rows with replacement per tree (default True, spec §4.4).
    reference : reference measure ``V`` of numeric columns in the split gain: ``"width"``
        (Lebesgue length, default; consistent with the uniform-in-cell leaf density) or
        ``"counting"`` (one unit per quantile bin, the spec's rank-space option). Discrete
        columns always use the counting measure.
    max_bins : quantile bins per numeric column (default 255, spec §1.1).
    density_floor : as in :class:`~forestgen.families.mixture.rfde.RFDE` (default ``1e-5`` times the
        uniform density on the root box, so held-out rows in empty leaves keep a finite score;
        ``None`` gives the honest ``-inf`` where the density is 0).
    smoothing, prior_strength : as in :class:`~forestgen.families.mixture.rfde.RFDE` (defaults
        ``1e-3`` and 1): the model is ``(1 - smoothing)`` times the forest plus ``smoothing``
        times the uniform density on the root box (the spec's optional ``ε``-uniform component,
        §6.7, on by default here so that held-out rows in empty regions of many-column tables
        keep a positive density and impute), and each leaf's shares at point masses shrink
        toward the column's overall shares. ``smoothing=0, prior_strength=0``: the paper's
        model.
    splitter : ``"density"`` (default: :class:`DensitySplitter` with ``criterion``), another
        unlabelled splitter (name, class, instance) that records each leaf's mass
        (``TreeRecord.leaf_mass``: the leaf weights), or an ``@numba.njit`` gain of ``[P, V]``.
    numeric_leaf, discrete_leaf : ``None`` (default: uniform in the cell, the paper's leaf) or a
        leaf model (name, class, instance) fitted on each tree's bootstrap rows in its cell.
    ensembler, sampler : ``None`` (default: the leaf-mixture ensembler, leaf weights = leaf masses,
        and the ancestral sampler) or a component serving ``"leaf mixture"`` (registry name,
        class or instance; see ``docs/components.md``).
    random_state, n_jobs : one Generator per tree; identical results for any ``n_jobs``.
    progress : print a progress bar over trees on stderr.
    marginal_weight : ``"auto"`` (default), ``"held_out"`` or ``λ`` in ``[0, 1)`` (0: the
        paper's model): the back-off toward the column marginals of
        :class:`~forestgen.families.mixture.rfde.RFDE` (one more tree whose leaf carries the
        product of the marginals, weight chosen on held-out rows by
        :func:`~forestgen.families.mixture.backoff.choose_weight`, ``λ = 0`` unless the
        marginals beat the forest there and backing off does without lowering the discrete
        columns' conditionals).
        A forestgen extension (issue 37).
    cell_shape : ``"auto"`` (default), ``"uniform"`` (the paper's cells), ``"marginal"`` or a
        weight ``μ`` in ``[0, 1]``: each numeric side of a leaf cell carries the column law
        ``(1 - μ) Unif(root interval) + μ g_j`` restricted to the cell, ``g_j`` the column's
        marginal histogram; ``"auto"`` chooses ``μ`` on the held-out rows of the
        ``marginal_weight`` look (five folds on a table of fewer than 1,000 rows), keeping
        the discrete columns' held-out conditionals (within one standard error, or a tenth
        of the shape's gain) unless the column marginals beat the uniform cells there (the
        floor first), as
        :class:`~forestgen.families.mixture.rfde.RFDE`'s ``cell_shape`` (which states why
        the model stays one normalised leaf mixture). ``cell_shape_`` keeps the choice.
        A forestgen extension (issue 37).

    Notes
    -----
    Leaves: numeric columns uniform on the leaf cell (``cell_shape="uniform"``; the root box
    is the training min/max; integer-valued numeric columns get ±0.5), discrete columns
    uniform over the allowed levels.
    Rows with missing values are dropped at fit, with a warning (the root box still spans
    every row's values); missing values at query time are marginalised.
    """

    method_name = "DEF"
    edge_cells = frozenset({"empty"})  # finite boxes of positive width
    tree_data = frozenset({"Xb", "n_bins", "nominal", "thresholds", "Z", "n_levels", "box_lo",
                           "box_hi", "vref", "root_mask"})

    def __init__(self, *, n_trees: int = 100, criterion: str = "kl", max_leaves: int = 256,
                 min_samples_leaf: float = 1.0, max_features: Any = 1.0, bootstrap: bool = True,
                 reference: str = "width", max_bins: int = 255,
                 density_floor: float | None = 1e-5, smoothing: float = 1e-3,
                 prior_strength: float = 1.0, random_state: Any = None,
                 n_jobs: int | None = -1, splitter: Any = "density", numeric_leaf: Any = None,
                 discrete_leaf: Any = None, progress: bool = False, ensembler: Any = None,
                 sampler: Any = None, marginal_weight: float | str = "auto",
                 cell_shape: float | str = "auto"):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    def validate_params(self) -> None:
        super().validate_params()
        check_weight("DEF", self.marginal_weight)
        check_shape("DEF", self.cell_shape, self)
        check_choice("criterion", self.criterion, ("kl", "ise"))
        check_int("max_leaves", self.max_leaves, 1)
        check_real("min_samples_leaf", self.min_samples_leaf, 0.0)
        mf = self.max_features
        if not (isinstance(mf, float) and 0.0 < mf <= 1.0):
            check_int("max_features", mf, 1)
        check_bool("bootstrap", self.bootstrap)
        check_choice("reference", self.reference, ("width", "counting"))
        check_int("max_bins", self.max_bins, 2)
        check_real("smoothing", self.smoothing, 0.0, 1.0, high_open=True)
        check_real("prior_strength", self.prior_strength, 0.0)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None, cell_shapes=None) -> DEF:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds.
        ``cell_shapes``: as :meth:`RFDE.fit <forestgen.families.mixture.rfde.RFDE.fit>`'s."""
        self.validate_params()
        Z = self.fit_encoder(X, kinds, min_rows=0)
        schema = self.encoder_.schema
        table = EncodedTable(self.encoder_, Z)  # every row, for the back-off's cheap look
        self.box_lo_, self.box_hi_ = root_box(Z, schema)
        Z = drop_missing_rows(Z, schema, "DEF")
        n, d = Z.shape
        mtry = resolve_max_features(self.max_features, d)
        nominal, nlev = discrete_levels(schema)
        binner = Binner.fit(Z, nominal, nlev, int(self.max_bins))
        data = TreeData(binner.transform(Z), binner.n_bins, binner.nominal, binner.thresholds,
                        Z=Z, n_levels=nlev, box_lo=self.box_lo_, box_hi=self.box_hi_,
                        vref=self._reference(binner, schema, nominal, nlev),
                        root_mask=root_mask(schema))
        seed = seed_sequence(self.random_state)
        rngs = tree_generators(seed, int(self.n_trees))
        W = np.empty((len(rngs), n))
        for b, r in enumerate(rngs):
            W[b] = (np.bincount(r.integers(0, n, size=n), minlength=n).astype(float)
                    if self.bootstrap else np.ones(n))
        splitter = make_splitter(self.splitter, "DEF", False, DensitySplitter,
                                 criterion=self.criterion)
        limits = GrowLimits(max_features=mtry, max_leaves=int(self.max_leaves),
                            min_samples_leaf=float(self.min_samples_leaf))
        n_levels = np.where(nominal, nlev, 0)
        bar = ProgressBar("DEF", len(rngs), self.progress)
        self.forest_ = grow_forest(splitter, data, None, W, rngs, limits, n_levels=n_levels,
                                   n_jobs=self.n_jobs, on_tree_done=bar.step)
        bar.close(f"{self.forest_.n_leaves} leaves")
        mass = self.forest_.leaf_mass
        if mass.shape != (self.forest_.n_leaves,):
            raise ValueError(f"DEF needs each leaf's mass; splitter {splitter!r} does not "
                             "record TreeRecord.leaf_mass")
        log_w = self.component("ensembler").checked_log_weights(
            mass, self.forest_.leaf_tree, len(rngs))
        self.forest_, self.leaf_log_weight_ = with_uniform_component(
            self.forest_, log_w, float(self.smoothing), self.box_lo_, self.box_hi_,
            root_mask(schema))
        # the uniform component's leaf holds every row once
        W = np.vstack([W, np.ones((self.forest_.n_trees - len(W), n))])
        self.n_train_ = n
        self.cell_shape_, self.marginal_weight_, self.marginal_weight_ll_ = resolve_backoff(
            self, X, kinds, seed, encoded=table)
        shapes = (self.cell_shape_,) if cell_shapes is None else tuple(map(float, cell_shapes))
        self.cell_shape_ = shapes[0]
        hists = (column_histograms(Z, schema, self.box_lo_, self.box_hi_)
                 if self.marginal_weight_ > 0 or max(shapes) > 0 else None)
        boxes = self.forest_.boxes(d, n_levels)
        pair_weight = np.ascontiguousarray(W.T).ravel()
        lists = [box_leaves(self, Z, boxes, self.forest_.leaf_mass * n, pair_weight, mu, hists)
                 for mu in shapes]
        self.leaf_models_ = lists[0]
        if self.marginal_weight_ > 0:  # the back-off tree: the column marginals on the box
            check_mixture(self, "DEF")
            self.forest_, self.leaf_log_weight_, self.leaf_models_ = append_marginal_tree(
                self, Z, self.marginal_weight_,
                marginal_box(self.forest_, schema, self.box_lo_, self.box_hi_),
                hists=hists, also=lists[1:])
            lists[0] = self.leaf_models_
        if len(shapes) > 1:
            self.shape_leaf_models_ = dict(zip(shapes, lists))
        return self

    def _reference(self, binner: Binner, schema, nominal, nlev) -> np.ndarray:
        """Per-bin reference mass ``[d, max_bins]``, normalised to 1 per column."""
        d = schema.d
        B = int(binner.n_bins.max())
        v = np.zeros((d, B))
        for j, spec in enumerate(schema.columns):
            nb = int(binner.n_bins[j])
            if nominal[j]:
                v[j, :nb] = 1.0
            elif spec.is_discrete:
                edges = np.r_[self.box_lo_[j], binner.thresholds[j], self.box_hi_[j]]
                v[j, :nb] = np.diff(np.floor(edges))
            elif self.reference == "counting":
                v[j, :nb] = 1.0
            else:
                edges = np.r_[self.box_lo_[j], binner.thresholds[j], self.box_hi_[j]]
                v[j, :nb] = np.diff(edges)
            if not np.all(v[j, :nb] > 0):
                raise ValueError(f"column {spec.name!r}: a bin has zero reference mass")
            v[j, :nb] /= v[j, :nb].sum()
        return v

    # ------------------------------------------------------------------ queries
    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row, floored at ``density_floor`` (relative to the root box's sides
        of the columns the density is over, :func:`~forestgen.inference.density_columns`)
        unless ``floor=None`` (exact, ``-inf`` in empty leaves / outside the box) or another
        ``floor`` is given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    def _extra_arrays(self):
        return {"box_lo": self.box_lo_, "box_hi": self.box_hi_}

    def density_faces(self, j: int) -> np.ndarray:
        """Where the density of numeric column ``j`` can jump besides the leaf cells: the bin
        faces of the back-off leaf's histogram (``marginal_weight``; empty without one)."""
        return density_faces(self, j)

    def _extra_meta(self):
        return {"n_train": int(self.n_train_), "marginal_weight": float(self.marginal_weight_),
                "cell_shape": float(self.cell_shape_)}

    def _restore_extra(self, arrays, meta):
        check_box("extra.", arrays["box_lo"], arrays["box_hi"], self.encoder_.schema.d)
        self.box_lo_ = arrays["box_lo"]
        self.box_hi_ = arrays["box_hi"]
        self.n_train_ = check_count("extra n_train", meta["n_train"], 1)
        self.marginal_weight_ = float(meta.get("marginal_weight", 0.0))  # 0 before stop 47
        self.marginal_weight_ll_ = {}
        self.cell_shape_ = float(meta.get("cell_shape", 0.0))  # 0 before stop 50
