"""Random forest density estimation (Wen & Hang, ICML 2022). Spec: ``shared/papers/rfde.md``.

Each tree is a complete depth-``p`` random midpoint partition of a box fitted to the data
(Algorithm 1; :mod:`forestgen.tree.grow_midpoint`); a tree's density is
``N(cell) / (n · vol(cell))`` (eq. 4) and the forest is the plain average of ``T`` trees on all
``n`` rows (eq. 5): a uniform mixture of uniform boxes, exactly normalised and exactly sampleable.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from forestgen.base import EncodedTable, GenerativeForest
from forestgen.families.boxes import (
    BoxFloor,
    box_leaves,
    box_log_volume,
    column_layout,
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
from forestgen.logsumexp import logmeanexp
from forestgen.modelfile import check_array, check_box, check_count
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, TreeData, make_splitter
from forestgen.splitters.density import MidpointSplitter
from forestgen.tree.forest import grow_forest, tree_generators
from forestgen.tree.grow_midpoint import KIND_NOMINAL, KIND_ORDERED, route_codes
from forestgen.validation import (
    ParameterError,
    check_choice,
    check_int,
    check_real,
    seed_sequence,
)

MAX_DEPTH = 60


def theory_depth(n: int, d: int) -> int:
    """Theorem 2's ``p_n = d ln n / (1 + d ln 2)`` rounded (spec §2.2 fallback), at least 1."""
    return max(1, int(round(d * math.log(max(n, 2)) / (1.0 + d * math.log(2.0)))))


# ---------------------------------------------------------------------------- learner
@register("learner", "rfde")
class RFDE(BoxFloor, GenerativeForest):
    """Random forest density estimation: a uniform mixture of ``n_trees`` random dyadic trees.

    Parameters
    ----------
    n_trees : ``T`` (default 100; the paper uses 500 on synthetic data, 100 on real data).
    depth : ``p``: an int, ``"cv"`` (default: K-fold held-out ANLL over ``depth_grid``,
        spec §2.2) or ``"theory"`` (``round(d ln n / (1 + d ln 2))``, Theorem 2).
    depth_grid : depths tried by ``"cv"`` (default ``1..20``; the paper uses 1..15).
    cv_folds, cv_trees : folds and trees used by the CV (the box and the tree seeds are shared
        by all folds, legitimate because the partition ignores the data).
    margin : widen the min/max box by ``margin`` × range per side (default 0, spec §1.1 [Q]).
    box : ``None`` (min/max box) or ``{column: (lower, upper)}`` fixed bounds for numeric
        columns (the paper's known-support setting).
    density_floor : densities below ``density_floor`` times the uniform density on the root
        box (its sides of the columns the density is over, as
        :func:`~forestgen.inference.density_columns` gives them) are reported as that by
        :meth:`log_prob`, :meth:`score_samples`, :meth:`score` and
        the depth CV (default ``1e-5``: on the unit cube the paper's Table-1 clip, spec §3.2;
        relative to the box so that it means the same on data in natural units). ``None``
        gives the honest ``-inf`` (also ``log_prob(X, floor=None)`` and always
        :meth:`log_prob_encoded`).
    smoothing : weight ``λ`` of the uniform density on the root box in the model,
        ``(1 - λ) f_forest + λ / vol(box)`` (default ``1e-3``, GF.Boost's default; the spec's
        "defensive mixture", §3.2 [D]): every point of the box keeps a positive density, so
        held-out rows in cells no tree covers still score, condition and impute. It is part
        of the model (sampling draws from the uniform part with probability ``λ``; the depth
        CV scores the smoothed model). ``0`` is the paper's model.
    prior_strength : pseudo-rows of the Dirichlet prior that shrinks each leaf's shares at the
        point masses of a column (numeric atoms, spike levels) toward the column's overall
        shares (default 1; ``0``: each leaf's own shares, which a cell of a few rows sets to 0
        or 1), as ARF's ``prior_strength`` does for its leaf pmfs.
    random_state, n_jobs : seeds (one hashed seed per tree, the first draw of the tree's
        Generator; results identical for any n_jobs).
    splitter : ``"midpoint"`` (default, Algorithm 1) or another unlabelled splitter that honours
        ``GrowLimits.max_depth``. ``depth="cv"`` works with any: the midpoint partition gets
        every depth from one routing per tree, another splitter grows ``cv_folds x
        len(depth_grid)`` forests of ``cv_trees`` trees.
    numeric_leaf, discrete_leaf : ``None`` (default: uniform in the cell, eq. 4) or a leaf
        model (name, class, instance) fitted on the training rows of each cell.
    ensembler, sampler : ``None`` (default: the leaf-mixture ensembler, leaf weights = cell shares,
        and the ancestral sampler) or a component serving ``"leaf mixture"`` (registry name,
        class or instance; see ``docs/components.md``).
        A split criterion is ruled out (``ruled_out``): the midpoint rule is data-independent.
    progress : print progress bars (depth CV, growth) on stderr.
    marginal_weight : ``"auto"`` (default), ``"held_out"`` or ``λ`` in ``[0, 1)`` (0: the
        paper's model) — weight of one more tree that never splits, whose one leaf carries
        the product of the column marginals fitted on all rows
        (:mod:`~forestgen.families.mixture.backoff`: EOGT's histogram per numeric column on
        the root box, with the grid cells of repeated values, and the smoothed pmf of each
        discrete column; both with torch hooks). A root-only tree under
        RFDE's own leaves would be the uniform box (``smoothing``); this one's leaf models
        sit beside the forest's in a :class:`~forestgen.families.mixture.stacked.StackedLeaf`.
        The model ``(1 - λ) f + λ prod_j f_j`` stays one normalised leaf mixture. ``"auto"``
        chooses ``λ`` as ARF's ``marginal_weight`` does: an RFDE fitted on 80% of the rows (of
        at most 10,000) scores the others at each weight (on a table of fewer than
        :data:`~forestgen.families.mixture.backoff.FOLD_ROWS` rows, one fitted per fold of
        :data:`~forestgen.families.mixture.backoff.LOOK_FOLDS`, every row scored once),
        and ``λ > 0`` is kept only where the
        marginals alone and the best weight that keeps the discrete columns' conditionals
        each beat the forest alone there by more than
        :data:`~forestgen.families.mixture.backoff.GUARD_Z` standard errors
        (:func:`~forestgen.families.mixture.backoff.choose_weight`; ``0`` elsewhere:
        the paper's model, bit for bit). ``marginal_weight_`` / ``marginal_weight_ll_`` keep
        the choice. A forestgen extension (issue 37; ``benchmarks/results/backoff_s47.md``).
    cell_shape : ``"auto"`` (default), ``"uniform"`` (the paper's cells, eq. 4), ``"marginal"``
        or a weight ``μ`` in ``[0, 1]`` — how a leaf spreads its mass over a numeric side of
        its cell: by the law ``q_j = (1 - μ) Unif(root interval) + μ g_j`` restricted to the
        cell, ``g_j`` the column's marginal histogram on the root box (the back-off leaf's,
        :func:`~forestgen.families.mixture.backoff.column_histograms`;
        :class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf`). ``μ = 0`` is the uniform
        cell. A depth-``p`` cell splits few of ``d`` columns; on the others it is the whole
        root interval, where the uniform density ignores how the column is distributed.
        Each leaf factor ``q_j(x) 1[x in cell] / Q_j(cell)`` integrates to one over its
        cell, so every leaf is a normalised density on its cell, the leaf weights and cells
        (the trees' dependence between columns) and the discrete columns' leaf pmfs are
        unchanged, and the forest stays one exactly normalised, exactly sampleable leaf
        mixture (draws: inverse CDF of ``q_j`` inside the cell). The defensive uniform
        component's leaf (``smoothing``) takes the same shape. ``"auto"`` chooses ``μ`` of
        :data:`~forestgen.families.mixture.backoff.SHAPES` on the held-out rows of the
        ``marginal_weight`` look (one fit serves both; the trees do not depend on ``μ``):
        the shape of highest held-out log-likelihood among those that keep the discrete
        columns' held-out conditionals (what ``predict_proba`` answers) within one standard
        error of the uniform cells' or lower by less than
        :data:`~forestgen.families.mixture.backoff.SHAPE_COND_SHARE` of the shape's gain in
        held-out log-likelihood (any shape where the column marginals beat the uniform
        cells there by more than one standard error: the floor first), kept if it beats the
        uniform cells by more than one standard error
        (:func:`~forestgen.families.mixture.backoff.choose_shape`), then
        ``λ`` under that shape. ``cell_shape_`` keeps the choice. With ``numeric_leaf`` /
        ``discrete_leaf`` given only ``"auto"`` (then 0) or 0. The depth CV scores uniform
        cells. A forestgen extension (issue 37; ``benchmarks/results/backoff_s50.md``).

    Notes
    -----
    Mixed data: discrete columns are split by halving their remaining levels (ordered columns
    by level order, nominal columns by a random even level subset) and carry a uniform pmf over
    the leaf's levels; ordinal integer columns (≤ 32 values) are discrete, wider integer columns
    are numeric with ``±0.5`` added to the box. Rows with missing values are dropped at fit, with a
    warning; the root box still spans every row's values, so with ``smoothing > 0`` each
    training row keeps a positive density.
    """

    method_name = "RFDE"
    edge_cells = frozenset({"empty"})  # finite boxes of positive width
    tree_data = frozenset({"nominal", "Z", "n_levels", "box_lo", "box_hi", "root_mask",
                           "max_depth"})
    #: a splitter growing density trees by a criterion (e.g. ``"density"``) is accepted;
    #: a criterion for the midpoint rule is not
    ruled_out = {"criterion": MidpointSplitter.NO_CRITERION}

    def __init__(self, *, n_trees: int = 100, depth: Any = "cv", depth_grid: Any = None,
                 cv_folds: int = 3, cv_trees: int = 50, margin: float = 0.0,
                 box: dict | None = None, density_floor: float | None = 1e-5,
                 smoothing: float = 1e-3, prior_strength: float = 1.0,
                 random_state: Any = None, n_jobs: int | None = -1, splitter: Any = "midpoint",
                 numeric_leaf: Any = None, discrete_leaf: Any = None, progress: bool = False,
                 ensembler: Any = None, sampler: Any = None,
                 marginal_weight: float | str = "auto", cell_shape: float | str = "auto"):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    # ------------------------------------------------------------------ validation
    def validate_params(self) -> None:
        super().validate_params()
        check_weight("RFDE", self.marginal_weight)
        check_shape("RFDE", self.cell_shape, self)
        if isinstance(self.depth, str):
            check_choice("depth", self.depth, ("cv", "theory"))
        else:
            check_int("depth", self.depth, 0, MAX_DEPTH)
        if self.depth_grid is not None:
            if isinstance(self.depth_grid, (str, bytes)) or not hasattr(self.depth_grid,
                                                                        "__iter__"):
                raise ParameterError(f"depth_grid must be a list of depths, got "
                                     f"{self.depth_grid!r}")
            for g in self.depth_grid:
                check_int("depth_grid values", g, 0, MAX_DEPTH)
        self._grid()
        check_int("cv_folds", self.cv_folds, 2)
        check_int("cv_trees", self.cv_trees, 1)
        check_real("margin", self.margin, 0.0)
        check_real("smoothing", self.smoothing, 0.0, 1.0, high_open=True)
        check_real("prior_strength", self.prior_strength, 0.0)
        if self.box is not None and not isinstance(self.box, dict):
            raise ParameterError(f"box must be None or a dict {{column: (lower, upper)}}, got "
                                 f"{self.box!r}")

    def _grid(self) -> list[int]:
        g = range(1, 21) if self.depth_grid is None else self.depth_grid
        out = [int(v) for v in g]
        if not out:
            raise ValueError("depth_grid is empty")
        return out

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, *, kinds: dict | None = None, cell_shapes=None) -> RFDE:
        """Fit on a DataFrame / ndarray / tensor. ``kinds`` overrides inferred column kinds.
        ``cell_shapes`` (the held-out choice of ``cell_shape``): weights ``μ`` whose leaf
        models are all fitted (``shape_leaf_models_``: ``μ`` -> leaf models, of the same
        trees); the model is the first's (``cell_shape_``)."""
        self.validate_params()
        Z = self.fit_encoder(X, kinds, min_rows=0)
        schema = self.encoder_.schema
        table = EncodedTable(self.encoder_, Z)  # every row, for the back-off's cheap look
        self.box_lo_, self.box_hi_ = root_box(Z, schema, float(self.margin), self.box)
        Z = drop_missing_rows(Z, schema, "RFDE")
        self._layout = column_layout(schema)
        root = seed_sequence(self.random_state)
        self._rngs = tree_generators(root, int(self.n_trees))
        # a tree's hashed seed is the first draw of its Generator (MidpointSplitter)
        self.seeds_ = np.array([copy.deepcopy(r).integers(0, 2**63 - 1) for r in self._rngs],
                               np.int64)
        self._splitter = make_splitter(self.splitter, "RFDE", False, MidpointSplitter)
        n, d = Z.shape
        if self.depth == "cv":
            cv = self._cv_scores if isinstance(self._splitter, MidpointSplitter) else \
                self._cv_scores_grown
            self.cv_scores_ = cv(Z, self._grid())
            self.depth_ = int(min(self.cv_scores_, key=lambda p: (self.cv_scores_[p], p)))
        elif self.depth == "theory":
            self.depth_ = theory_depth(n, d)
        else:
            self.depth_ = int(self.depth)
        self.n_train_ = n
        self.cell_shape_, self.marginal_weight_, self.marginal_weight_ll_ = resolve_backoff(
            self, X, kinds, root, encoded=table)
        shapes = (self.cell_shape_,) if cell_shapes is None else tuple(map(float, cell_shapes))
        self.cell_shape_ = shapes[0]
        self._grow(Z, self.marginal_weight_, shapes)
        return self

    def _grow(self, Z: np.ndarray, marginal_weight: float = 0.0,
              shapes: tuple = (0.0,)) -> None:
        schema = self.encoder_.schema
        nominal, nlev = discrete_levels(schema)
        n, d = Z.shape
        data = TreeData(None, None, nominal, None, Z=Z, n_levels=nlev, box_lo=self.box_lo_,
                        box_hi=self.box_hi_, root_mask=root_mask(schema))
        n_levels = np.where(nominal, nlev, 0)
        T = len(self._rngs)
        bar = ProgressBar(f"RFDE depth {self.depth_}", T, self.progress)
        self.forest_ = grow_forest(self._splitter, data, None, np.ones((T, n)), self._rngs,
                                   GrowLimits(max_depth=self.depth_), n_levels=n_levels,
                                   n_jobs=self.n_jobs, on_tree_done=bar.step)
        bar.close(f"{self.forest_.n_leaves} leaves")
        del self._rngs
        log_w = self.component("ensembler").checked_log_weights(
            self.forest_.leaf_mass, self.forest_.leaf_tree, T)
        codes = (self._leaf_codes(self.forest_.boxes(d, n_levels))
                 if isinstance(self._splitter, MidpointSplitter) else None)
        self.forest_, self.leaf_log_weight_ = with_uniform_component(
            self.forest_, log_w, float(self.smoothing), self.box_lo_, self.box_hi_,
            root_mask(schema))
        boxes = self.forest_.boxes(d, n_levels)
        hists = (column_histograms(Z, schema, self.box_lo_, self.box_hi_)
                 if marginal_weight > 0 or max(shapes) > 0 else None)
        lists = [box_leaves(self, Z, boxes, self.forest_.leaf_mass * n, None, mu, hists)
                 for mu in shapes]
        self.leaf_models_ = lists[0]
        if marginal_weight > 0:  # the back-off tree: the column marginals on the root box
            check_mixture(self, "RFDE")
            self.forest_, self.leaf_log_weight_, self.leaf_models_ = append_marginal_tree(
                self, Z, marginal_weight,
                marginal_box(self.forest_, schema, self.box_lo_, self.box_hi_),
                hists=hists, also=lists[1:])
            lists[0] = self.leaf_models_
        if len(shapes) > 1:
            self.shape_leaf_models_ = dict(zip(shapes, lists))
        # the uniform component's and the back-off tree's leaves (the root box, heap code 1)
        # follow the trees' leaves
        self.leaf_code_ = None if codes is None else np.r_[
            codes, np.ones(self.forest_.n_leaves - len(codes), np.int64)]

    def _leaf_codes(self, boxes) -> np.ndarray:
        """Heap code of every leaf's depth-``p`` cell, by routing a point of the cell."""
        kind, nlev, nom_off, n_nom = self._layout
        f = self.forest_
        pts = np.where(kind == KIND_ORDERED, np.floor(boxes.lower) + 1.0,
                       0.5 * (boxes.lower + boxes.upper))
        for j in np.nonzero(kind == KIND_NOMINAL)[0]:
            o = boxes.nom_off[j]
            pts[:, j] = np.argmax(boxes.mask[:, o:o + nlev[j]], axis=1)
        out = np.empty(f.n_leaves, np.int64)
        for t in range(f.n_trees):
            a, b = f.leaf_offsets[t], f.leaf_offsets[t + 1]
            codes, _ = route_codes(pts[a:b], kind, self.box_lo_, self.box_hi_,
                                   root_mask(self.encoder_.schema), nlev, nom_off, n_nom,
                                   np.int64(self.seeds_[t]), self.depth_)
            out[a:b] = codes[:, -1]
        return out

    # ------------------------------------------------------------------ depth selection
    def _cv_scores(self, Z: np.ndarray, grid: list[int]) -> dict[int, float]:
        """Held-out ANLL per depth, K-fold (spec §2.2), floored as in :meth:`log_prob`
        (``density_floor``, or ``1e-5`` when it is ``None``, relative to the root box)."""
        kind, nlev, nom_off, n_nom = self._layout
        n = len(Z)
        K, fold, T, log_floor = self._cv_setup(n)
        P = max(grid)
        # acc[k][p] collects per-tree log densities of the validation rows of fold k
        acc = {k: {p: [] for p in grid} for k in range(K)}
        bar = ProgressBar(f"RFDE depth CV ({K} folds, depths {min(grid)}..{P})", T,
                          self.progress)
        for t in range(T):
            codes, logv = route_codes(Z, kind, self.box_lo_, self.box_hi_,
                                      root_mask(self.encoder_.schema), nlev, nom_off, n_nom,
                                      np.int64(self.seeds_[t]), P)
            for k in range(K):
                tr = fold != k
                n_tr = int(tr.sum())
                for p in grid:
                    c_tr = np.sort(codes[tr, p])
                    c_va = codes[~tr, p]
                    cnt = (np.searchsorted(c_tr, c_va, side="right")
                           - np.searchsorted(c_tr, c_va, side="left"))
                    with np.errstate(divide="ignore"):
                        acc[k][p].append(np.log(cnt) - math.log(n_tr) - logv[~tr, p])
            bar.step()
        scores = {}
        for p in grid:
            tot = 0.0
            for k in range(K):
                lp = self._smoothed(logmeanexp(np.stack(acc[k][p]), axis=0))
                tot += float(-np.sum(np.maximum(lp, log_floor)))
            scores[p] = tot / n
        bar.close(f"depth {min(scores, key=lambda p: (scores[p], p))}")
        return scores

    def _smoothed(self, lp: np.ndarray) -> np.ndarray:
        """The forest's log densities ``lp`` mixed with the uniform component (``smoothing``)."""
        lam = float(self.smoothing)
        if lam <= 0:
            return lp
        log_u = math.log(lam) - box_log_volume(self.encoder_.schema, self.box_lo_, self.box_hi_)
        return np.logaddexp(math.log1p(-lam) + lp, log_u)

    def _cv_setup(self, n: int) -> tuple[int, np.ndarray, int, float]:
        """Folds ``K``, each row's fold, trees ``T`` per fit and the log density floor."""
        K = min(int(self.cv_folds), n)
        if K < 2:
            raise ValueError(f"depth='cv' needs at least 2 rows, got {n}")
        rng = np.random.default_rng(np.random.SeedSequence(int(self.seeds_[0])).spawn(1)[0])
        fold = rng.permutation(n) % K
        T = min(int(self.cv_trees), len(self.seeds_))
        floor = self.density_floor if self.density_floor is not None else 1e-5
        log_floor = math.log(floor) - box_log_volume(self.encoder_.schema, self.box_lo_,
                                                     self.box_hi_)
        return K, fold, T, log_floor

    def _cv_scores_grown(self, Z: np.ndarray, grid: list[int]) -> dict[int, float]:
        """The same held-out ANLL for any splitter honouring ``GrowLimits.max_depth``: per fold
        and depth, ``cv_trees`` trees (the final fit's first tree generators, the same root
        box) are grown on the training part and score the held-out part. For the midpoint
        splitter this equals :meth:`_cv_scores`, which gets every depth from one routing."""
        n = len(Z)
        K, fold, T, log_floor = self._cv_setup(n)
        sub = copy.copy(self)
        tot = dict.fromkeys(grid, 0.0)
        for k in range(K):
            tr = fold != k
            for p in grid:
                sub.depth_ = p
                sub._rngs = [copy.deepcopy(r) for r in self._rngs[:T]]
                sub._grow(Z[tr])
                lp = sub.log_prob_encoded(Z[~tr])
                tot[p] += float(-np.sum(np.maximum(lp, log_floor)))
        return {p: tot[p] / n for p in grid}

    # ------------------------------------------------------------------ queries
    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row; densities below ``density_floor`` (default ``1e-5``) times the
        uniform density on the root box's sides of the columns the density is over
        (:func:`~forestgen.inference.density_columns`) are floored there, unless
        ``floor=None`` (honest ``-inf``) or another ``floor`` (same relative units) is
        given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    def score_samples(self, X) -> np.ndarray:
        """Anomaly score basis (Algorithm 2): floored log density; low = anomalous."""
        return self.log_prob(X)

    def leaf_cells(self, t: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(heap codes, lower, upper)`` of tree ``t``'s non-empty depth-``p`` cells (interval
        bounds per column; a discrete column's bounds are in level-code units)."""
        self.check_fitted()
        a, b = self.forest_.leaf_offsets[t], self.forest_.leaf_offsets[t + 1]
        schema = self.encoder_.schema
        nominal, nlev = discrete_levels(schema)
        boxes = self.forest_.boxes(schema.d, np.where(nominal, nlev, 0))
        return self.leaf_code_[a:b], boxes.lower[a:b], boxes.upper[a:b]

    # ------------------------------------------------------------------ persistence
    def _extra_arrays(self):
        out = {"seeds": self.seeds_, "box_lo": self.box_lo_, "box_hi": self.box_hi_}
        if self.leaf_code_ is not None:
            out["leaf_code"] = self.leaf_code_
        return out

    def density_faces(self, j: int) -> np.ndarray:
        """Where the density of numeric column ``j`` can jump besides the leaf cells: the bin
        faces of the back-off leaf's histogram (``marginal_weight``; empty without one)."""
        return density_faces(self, j)

    def _extra_meta(self):
        return {"depth": int(self.depth_), "n_train": int(self.n_train_),
                "marginal_weight": float(self.marginal_weight_),
                "cell_shape": float(self.cell_shape_)}

    def _restore_extra(self, arrays, meta):
        d, L = self.encoder_.schema.d, self.forest_.n_leaves
        self.seeds_ = check_array("extra.seeds", arrays["seeds"], "iu", low=0)
        check_box("extra.", arrays["box_lo"], arrays["box_hi"], d)
        self.box_lo_ = arrays["box_lo"]
        self.box_hi_ = arrays["box_hi"]
        self.depth_ = check_count("extra depth", meta["depth"])
        self.leaf_code_ = arrays.get("leaf_code")
        if self.leaf_code_ is not None:
            check_array("extra.leaf_code", self.leaf_code_, "iu", (L,), low=1,
                        high=2 ** min(self.depth_ + 1, 62))
        self.n_train_ = check_count("extra n_train", meta["n_train"], 1)
        self._layout = column_layout(self.encoder_.schema)
        self.marginal_weight_ = float(meta.get("marginal_weight", 0.0))  # 0 before stop 47
        self.marginal_weight_ll_ = {}
        self.cell_shape_ = float(meta.get("cell_shape", 0.0))  # 0 before stop 50


def infinite_forest_density(model: RFDE, X_train: np.ndarray, X: np.ndarray,
                            depth: int | None = None) -> np.ndarray:
    """``E_Z f_{D,E}(x)``: the T = ∞ limit of RFDE (spec §1.5) for all-numeric data.

    ``k_p(u, v) = p! d^-p [z^p] prod_j sum_{s <= min(L_j, p)} z^s / s!`` where ``L_j`` counts the
    leading dyadic halvings of the unit box under which ``u_j`` and ``v_j`` stay together;
    ``f(x) = 2^p / (n vol B) sum_i k_p(u(x), u(X_i))``. Cost ``O(m n d p^2)``; a test oracle.
    """
    p = model.depth_ if depth is None else int(depth)
    lo, hi = model.box_lo_, model.box_hi_
    X_train = np.asarray(X_train, float)
    X = np.asarray(X, float)
    d = X.shape[1]
    U = (X_train - lo) / (hi - lo)
    V = (X - lo) / (hi - lo)
    fact = np.array([math.factorial(s) for s in range(p + 1)], float)
    out = np.zeros(len(V))
    for q, v in enumerate(V):
        if np.any((v <= 0) | (v > 1)):
            continue
        # L[i, j]: halvings (up to p) under which U[i, j] and v[j] share the dyadic interval
        L = np.zeros(U.shape, np.int64)
        same = np.ones(U.shape, bool)
        for s in range(1, p + 1):
            cu = np.ceil(U * 2**s)
            cv = np.ceil(v * 2**s)
            same &= cu == cv
            L += same
        k = np.zeros(len(U))
        for i in range(len(U)):
            poly = np.zeros(p + 1)
            poly[0] = 1.0
            for j in range(d):
                f = np.zeros(p + 1)
                f[: L[i, j] + 1] = 1.0 / fact[: L[i, j] + 1]
                poly = np.convolve(poly, f)[: p + 1]
            k[i] = fact[p] * poly[p] / d**p
        out[q] = 2.0**p / (len(U) * np.prod(hi - lo)) * k.sum()
    return out
