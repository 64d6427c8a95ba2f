"""Generative forests from supervised random forests (Correia, Peharz & de Campos, NeurIPS 2020).

"Joints in Random Forests": every decision tree of a random forest grown on (X, y) becomes a
probabilistic circuit (a GeDT, Alg. 1) by giving each sum node the share of training rows routed
to each child and each leaf a density over (X, Y) fitted on the rows that reach it. In flattened
form (spec §1.2) a tree is ``p_t(x, y) = sum_l w_l 1[x in A_l] p_l(y) prod_i p_li(x_i)`` with
``w_l`` the in-bag count share of leaf ``l``. Missing features are marginalised exactly: a split on
a missing feature keeps both branches and the feature's leaf factors drop out (spec §3.2), which
is what :meth:`ForestArrays.reach` computes. Spec: ``shared/papers/gef.md``.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pandas as pd

from forestgen import registry
from forestgen.base import EncodedTable, GenerativeForest
from forestgen.data.binning import Binner
from forestgen.data.encoder import TableEncoder
from forestgen.data.metadata import as_metadata_dict, split_kinds
from forestgen.data.support import clamp_query_rows, free_unseen_levels
from forestgen.ensemble.bagging import draw_weights
from forestgen.families.mixture.backoff import (
    MARGINAL_ALPHA,
    append_marginal_tree,
    check_mixture,
    check_weight,
    density_faces,
    resolve_weight,
    root_tree,
)
from forestgen.inference.api import density_columns
from forestgen.leaves.base import ColumnCell, LeafModel, leaf_stats
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.modelfile import check_count
from forestgen.progress import ProgressBar
from forestgen.registry import register
from forestgen.splitters.base import GrowLimits, TreeData, make_splitter
from forestgen.splitters.impurity import ImpuritySplitter
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.forest import grow_forest, tree_generators
from forestgen.tree.record import TreeRecord
from forestgen.validation import (
    check_choice,
    check_int,
    check_max_features,
    check_real,
    seed_sequence,
)

__all__ = ["GeF", "GeFGaussianLeaf"]

MODES = ("gef", "gef+", "friedman")
ROW_CHUNK = 512  # rows per reach() call in class queries
PAIR_CHUNK = 250_000  # (row, leaf) pairs per class-score batch (memory: pairs x classes)


@register("leaf", "gef_gaussian")
class GeFGaussianLeaf(TruncNormalLeaf):
    """GeF's continuous leaf factor (spec §1.3, authors' code): a Gaussian with the leaf's
    weighted mean and *population* SD floored at ``min_std`` times the column's global SD,
    truncated to the leaf cell ``(lower, upper]`` (so each tree integrates to 1, spec pitfall 4).

    A leaf with one row gets SD ``min_std * global SD``; a leaf where the column was never
    observed gets the global mean and that SD (the code's N(0, 1) on standardised data).
    """

    discrete = False

    def __init__(self, *, min_std: float = 1.0):
        self.min_std = min_std

    def _fit_scaled(self, x, leaf, cell: ColumnCell, weight=None) -> None:
        if not self.min_std > 0:
            raise ValueError(f"min_std must be > 0, got {self.min_std}")
        L = len(cell.lower)
        obs = x[~np.isnan(x)]
        gmean = float(obs.mean()) if obs.size else 0.0
        gstd = float(obs.std()) if obs.size else 0.0
        if not gstd > 0:  # constant column: any positive scale keeps the factor proper
            gstd = max(1.0, abs(gmean)) * 1e-3
        cnt, mu, var = leaf_stats(x, leaf, L, weight)
        with np.errstate(invalid="ignore", divide="ignore"):
            pop = np.where(cnt > 1, var * (cnt - 1.0) / cnt, 0.0)
        pop = np.where(np.isfinite(pop), np.maximum(pop, 0.0), 0.0)
        floor = self.min_std * gstd
        self.mu_ = np.where(cnt > 0, mu, gmean).astype(np.float64)
        self.sigma_ = np.maximum(np.sqrt(pop), floor).astype(np.float64)
        self.lo_ = np.asarray(cell.lower, np.float64).copy()
        self.hi_ = np.asarray(cell.upper, np.float64).copy()
        self.count_ = cnt


def _declared_class_kind(kinds: Any, name: Any) -> str | None:
    """``"categorical"`` where ``kinds`` (kind overrides or SDV-style metadata) declares the
    class column ``name`` a label column (its declared levels, without training rows
    included, are then kept: they lie outside the support); else its declared kind or
    ``None``."""
    plain, meta = split_kinds(kinds)
    if name in plain:
        return plain[name]
    entry = meta.get(name)
    if entry is None:
        return None
    if entry.get("sdtype") in ("categorical", "ordinal", "boolean"):
        return "categorical"
    return entry.get("sdtype")


@register("learner", "gef")
class GeF(GenerativeForest):
    """Generative forest (GeF / GeF+) built from a supervised random forest.

    Fit like a scikit-learn classifier: ``GeF().fit(X, y)`` or ``GeF().fit(df, target="col")``.
    Internally the class is one more discrete column of the encoded table (in its own place for
    ``fit(df, target=...)``, so samples and imputations keep the table's column order; last for
    ``fit(X, y)``), so the inherited ``log_prob``/``sample``/conditional queries work on the
    joint p(x, y); the splitter never splits on it.

    Parameters (defaults follow the spec's [ours] column, §2.2)
    ----------
    n_trees : 100.
    max_features : 0.3 → ⌊0.3 m⌋ (at least 1) candidate features per node; also ``"sqrt"``,
        ``"log2"``, ``None`` or an int.
    min_samples_leaf : 1 (weighted in-bag rows per child). Growth stops at pure nodes
        (sklearn-compatible purity stop 1.0; the code's 0.99 majority stop is not offered).
    max_depth : None (unpruned).
    sampling : ``"stratified"`` bootstrap per class (the authors' code, default), ``"bootstrap"``
        or ``"none"``. Leaf weights and all leaf factors come from each tree's in-bag multiset
        (bootstrap counts as weights), so Theorem 1 holds exactly.
    leaf : ``"factorised"`` — p_l(x, y) = p_l(y) prod_i p_li(x_i). The richer GeF(LSPN) leaf is
        not implemented; a joint leaf would plug in at :meth:`_pair_class_scores`.
    numeric_leaf : registry name/class/instance for numeric columns (``"gef_gaussian"``:
        :class:`GeFGaussianLeaf` with ``min_std``; ``"truncnorm"``, ``"uniform"`` also work).
    discrete_leaf : for categorical feature columns (``"categorical"`` with ``alpha``).
    min_std : 1.0 — SD floor of ``gef_gaussian`` leaves, in units of the column's global SD.
    alpha : 1e-6 — smoothing of categorical feature leaves over the levels the cell allows.
    class_alpha : 1e-6 — smoothing of the class pmf (the authors' code and spec §2.2's paper
        mode), so a held-out row whose class no reached leaf has seen keeps a positive density;
        ``0`` gives exact random-forest equivalence (Theorem 1, spec pitfall 10), as
        :meth:`from_sklearn` uses unless told otherwise. The difference is about 1e-6 in
        ``predict_proba``.
    mode : ``"gef"`` (average of per-tree class posteriors, Table 1's GeF), ``"gef+"``
        (posterior of the uniform tree mixture) or ``"friedman"`` (the baseline of spec §3.4:
        raw class counts of reachable leaves).
    max_bins : 255 quantile bins per numeric column for split search.
    splitter : ``"gini"`` (default, the paper's random forest), another labelled splitter
        (name, class or instance) or an ``@numba.njit`` gain function.
    ensembler, sampler : ``None`` (default: the leaf-mixture ensembler, leaf weights = in-bag
        count shares, and the ancestral sampler) or a component serving ``"leaf mixture"``
        (registry name, class or instance; see ``docs/components.md``).
    random_state, n_jobs : seed and threads (results identical for any ``n_jobs``).
    progress : print a progress bar over trees on stderr.
    density_floor : a row of density zero — a held-out value outside the support
        (:mod:`forestgen.data.support`: observed ranges, support levels) — scores
        ``density_floor`` (default ``1e-5``) times the uniform density on the support of the
        columns its density is over (:func:`~forestgen.inference.density_columns`) in
        ``log_prob`` instead of ``-inf``; every other row keeps its exact density. ``None`` or
        ``log_prob(..., floor=None)``: exact. A forestgen extension (no floor in the paper).
    marginal_weight : ``"auto"`` (default), ``"held_out"`` or ``λ`` in ``[0, 1)`` (0: the
        paper's model): the back-off toward the column marginals of
        :class:`~forestgen.families.mixture.rfde.RFDE` (one more tree, unsplit, whose leaf
        carries a histogram per numeric feature, the smoothed pmf of each discrete one and
        the class shares smoothed by ``class_alpha``; a level no training row holds scores
        there as in GeF's discrete leaves, their ``floor``; weight chosen on held-out rows by
        :func:`~forestgen.families.mixture.backoff.choose_weight`, ``λ = 0`` unless the
        marginals beat the forest there and backing off does without lowering the
        conditionals of the class and the discrete features). With ``λ > 0`` the class queries count
        that tree as one more tree (``mode="gef"`` averages its posterior, the class prior,
        with the others'). A forestgen extension (issue 37: at ``λ = 0`` GeF scores Cars93's
        held-out rows below the column marginals).

    Differences from the authors' code: numeric thresholds come from histogram bins, not the
    largest left value; no standardisation / clipping to ±6 SD (the Gaussian floor is relative
    to each column's SD instead); categorical leaves renormalise over the cell's levels
    (pitfall 12); missing categorical split variables are marginalised (pitfall 3). Numeric
    columns with point masses (``ColumnSpec.atoms``, a forestgen extension) shrink each leaf's
    atom shares toward the column's with :data:`~forestgen.base.ATOM_PRIOR` pseudo-rows (as
    ARF's default), so a held-out value at an atom a leaf never saw, or off the atoms in a
    leaf holding only atoms, keeps a positive leaf factor.
    """

    method_name = "GeF"
    splitter_labelled = True  # the target column's classes
    tree_data = frozenset({"Xb", "n_bins", "nominal", "thresholds"})

    def atom_prior(self) -> float:
        """Pseudo-rows of the point-mass prior: :data:`~forestgen.base.ATOM_PRIOR`."""
        from forestgen.base import ATOM_PRIOR

        return ATOM_PRIOR

    def __init__(self, *, n_trees: int = 100, max_features: Any = 0.3,
                 min_samples_leaf: float = 1.0, max_depth: int | None = None,
                 sampling: str = "stratified", leaf: str = "factorised",
                 numeric_leaf: Any = "gef_gaussian", discrete_leaf: Any = "categorical",
                 min_std: float = 1.0, alpha: float = 1e-6, class_alpha: float = 1e-6,
                 mode: str = "gef", max_bins: int = 255, random_state: Any = None,
                 n_jobs: int | None = -1, splitter: Any = "gini", progress: bool = False,
                 ensembler: Any = None, sampler: Any = None,
                 density_floor: float | None = 1e-5, marginal_weight: float | str = "auto"):
        """Parameters: see the class docstring (stored by ``GenerativeForest``)."""

    # ------------------------------------------------------------------ validation
    def validate_params(self) -> None:
        super().validate_params()
        check_weight("GeF", self.marginal_weight)
        check_max_features(self.max_features)
        check_real("min_samples_leaf", self.min_samples_leaf, 0.0, low_open=True)
        check_int("max_depth", self.max_depth, 0, allow_none=True)
        check_choice("sampling", self.sampling, ("stratified", "bootstrap", "none"))
        if self.leaf != "factorised":
            if self.leaf in ("learnspn", "lspn"):
                raise NotImplementedError("GeF(LSPN) leaves (LearnSPN inside leaves) are not "
                                          "implemented; use leaf='factorised'")
            check_choice("leaf", self.leaf, ("factorised",))
        check_real("min_std", self.min_std, 0.0, low_open=True)
        check_real("alpha", self.alpha, 0.0)
        check_real("class_alpha", self.class_alpha, 0.0)
        check_choice("mode", self.mode, MODES)
        check_int("max_bins", self.max_bins, 2)

    def _resolve_max_features(self, m: int) -> int:
        mf = self.max_features
        if isinstance(mf, float) and not isinstance(mf, bool):
            if not 0.0 < mf <= 1.0:
                raise ValueError(f"max_features fraction must be in (0, 1], got {mf}")
            return max(1, int(np.floor(mf * m)))
        from forestgen.splitters.base import resolve_max_features

        return resolve_max_features(mf, m)

    def _leaf_prototypes(self) -> tuple[LeafModel, LeafModel]:
        def make(spec, kwargs):
            if isinstance(spec, str) and spec in kwargs:
                return registry.resolve("leaf", spec, LeafModel, **kwargs[spec])
            return registry.resolve("leaf", spec, LeafModel)

        num = make(self.numeric_leaf, {"gef_gaussian": {"min_std": self.min_std}})
        dis = make(self.discrete_leaf, {"categorical": {"alpha": self.alpha}})
        if num.discrete:
            raise ValueError(f"numeric_leaf {self.numeric_leaf!r} is a discrete leaf model")
        if not dis.discrete:
            raise ValueError(f"discrete_leaf {self.discrete_leaf!r} is not a discrete leaf model")
        return num, dis

    # ------------------------------------------------------------------ input assembly
    @staticmethod
    def _split_xy(X, y, target) -> tuple[pd.DataFrame, pd.Series, Any]:
        """Features as a DataFrame, labels as a Series, and the class column's name."""
        if target is not None:
            if y is not None:
                raise ValueError("pass either y or target=<column>, not both")
            if not isinstance(X, pd.DataFrame):
                raise ValueError("target=<column> needs X as a DataFrame")
            if target not in X.columns:
                cols = list(X.columns)
                more = f" and {len(cols) - 10} more" if len(cols) > 10 else ""
                raise ValueError(f"target column {target!r} is not in X (columns: "
                                 f"{cols[:10]}{more})")
            # positional from here on: any index (permuted, filtered) keeps rows and labels paired
            return (X.drop(columns=[target]).reset_index(drop=True),
                    X[target].reset_index(drop=True), target)
        if y is None:
            raise ValueError("GeF is supervised: pass y, or target=<column> of a DataFrame X")
        if isinstance(X, pd.DataFrame):
            feats = X.reset_index(drop=True)
        else:
            if type(X).__module__.split(".")[0] == "torch":
                X = X.detach().cpu().numpy()
            arr = np.asarray(X)
            if arr.ndim != 2:
                raise ValueError(f"X must be 2-D, got shape {arr.shape}")
            feats = pd.DataFrame(arr)
            if arr.dtype == object:
                feats = feats.infer_objects()
        if type(y).__module__.split(".")[0] == "torch":
            y = y.detach().cpu().numpy()
        if not isinstance(y, pd.Series):
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1:
                raise ValueError(f"y must be 1-D, got shape {y.shape}")
        ys = y.reset_index(drop=True) if isinstance(y, pd.Series) else pd.Series(y)
        if len(ys) != len(feats):
            raise ValueError(f"y has {len(ys)} entries but X has {len(feats)} rows")
        name = ys.name if isinstance(y, pd.Series) and y.name is not None else "class"
        if name in feats.columns:
            if isinstance(y, pd.Series) and y.name is not None:
                raise ValueError(f"y is named {name!r}, which is also a column of X")
            while name in feats.columns:
                name = f"_{name}"
        return feats, ys.rename(name), name

    @staticmethod
    def _check_labels(ys: pd.Series, name, kind: Any = None) -> None:
        """A class column needs no NaN, two classes and, unless ``kinds`` declares it
        ``"categorical"``, no non-integer floats: GeF's class pmf has no mass on a value it did
        not see, so a continuous target would score every new value -inf (issue 11)."""
        if (kind != "categorical" and pd.api.types.is_float_dtype(ys.dtype)
                and not np.all(np.mod(ys.dropna().to_numpy(float), 1.0) == 0)):
            raise ValueError(
                f"the class column {name!r} holds continuous values ({ys.nunique()} distinct "
                f"non-integer floats): GeF models a class, and a value not seen in training "
                f"would have probability 0; bin it first (e.g. pd.cut) or pass "
                f"kinds={{{name!r}: 'categorical'}} to treat each value as a class")
        if ys.isna().any():
            raise ValueError(f"the class column {name!r} has {int(ys.isna().sum())} missing "
                             "values; drop those rows first")
        if ys.nunique() < 2:
            raise ValueError(f"GeF needs at least 2 classes in the class column {name!r}, got "
                             f"{ys.nunique()}")

    def _frame(self, X) -> pd.DataFrame:
        """Query input as a DataFrame of all encoded columns; a missing class column is NaN."""
        schema = self.schema_
        names = schema.names
        feat_names = [nm for j, nm in enumerate(names) if j != self.target_index_]
        if isinstance(X, pd.DataFrame):
            df = X
        else:
            if type(X).__module__.split(".")[0] == "torch":
                X = X.detach().cpu().numpy()
            arr = np.asarray(X)
            if arr.ndim == 1:
                arr = arr[None, :]
            if arr.ndim != 2 or arr.shape[1] not in (len(feat_names), len(names)):
                raise ValueError(f"expected {len(feat_names)} feature columns (or "
                                 f"{len(names)} with the class), got shape {arr.shape}")
            cols = feat_names if arr.shape[1] == len(feat_names) else names
            df = pd.DataFrame(arr, columns=pd.Index(cols, dtype=object))
            if arr.dtype == object:
                df = df.infer_objects()
        target = names[self.target_index_]
        if target not in df.columns:
            df = df.copy()
            df[target] = np.nan
        return df

    def encode_rows(self, X, missing_columns: str = "nan") -> np.ndarray:
        self.check_fitted()
        return super().encode_rows(self._frame(X), missing_columns)

    def _encode_features(self, X) -> np.ndarray:
        """Encoded rows with the class entry set to missing (class marginalised / queried)."""
        Z = self.encode_rows(X)
        Z[:, self.target_index_] = np.nan
        return Z

    # ------------------------------------------------------------------ fit
    def log_prob(self, X, conditions=None, *, floor: Any = "default") -> np.ndarray:
        """Log density per row (see :meth:`GenerativeForest.log_prob`); a row outside the
        support scores ``density_floor`` times the uniform density on the support of the
        columns its density is over (:func:`~forestgen.inference.density_columns`) unless
        ``floor=None`` (exact: ``-inf``) or another ``floor`` is given."""
        out = super().log_prob(X, conditions)
        return self.apply_density_floor(out, floor, lambda: density_columns(self, X, conditions))

    def fit(self, X, y=None, *, target=None, kinds: dict | None = None) -> GeF:
        """Grow the supervised forest on (X, y) and fit the factorised leaves (spec §2.1).

        ``X``: DataFrame / ndarray / tensor of features (NaN allowed). ``y``: class labels, or
        ``target``: the class column of a DataFrame ``X``. ``kinds`` overrides inferred kinds.
        A float class column with non-integer values (a continuous target) raises
        ``ValueError`` naming it, unless ``kinds`` declares it ``"categorical"``.
        """
        self.validate_params()
        if isinstance(X, EncodedTable):  # a held-out copy: the full fit's encoder and rows
            frame, name = X, target
            Z = self.fit_encoder(X)
        else:
            feats, ys, name = self._split_xy(X, y, target)
            declared = _declared_class_kind(kinds, name)
            self._check_labels(ys, name, declared)
            if feats.shape[1] == 0:
                raise ValueError("X has no feature columns")
            frame = feats.copy()
            frame[name] = ys.to_numpy() if not isinstance(ys.dtype, pd.CategoricalDtype) else ys
            if target is not None:  # keep the table's own column order (class column in place)
                frame = frame[list(X.columns)]
            if not isinstance(ys.dtype, pd.CategoricalDtype) and declared != "categorical":
                kinds = {**as_metadata_dict(kinds or {}), name: "categorical"}
            self.encoder_ = TableEncoder(kinds=kinds).fit(frame)
            Z = self.encoder_.transform(frame)
        n, d = Z.shape
        c = int(self.encoder_.schema.index(name))
        self.target_index_ = c
        schema = self.encoder_.schema
        y_codes = Z[:, c].astype(np.int64)
        K = int(schema.n_levels[c])
        feat_idx = np.delete(np.arange(d), c)
        nominal = schema.nominal_mask[feat_idx]
        binner = Binner.fit(Z[:, feat_idx], nominal, schema.n_levels[feat_idx], self.max_bins)
        data = TreeData(binner.transform(Z[:, feat_idx]), binner.n_bins, binner.nominal,
                        binner.thresholds)
        splitter = make_splitter(self.splitter, "GeF", True, ImpuritySplitter)
        limits = GrowLimits(max_features=self._resolve_max_features(d - 1),
                            max_depth=self.max_depth,
                            min_samples_leaf=float(self.min_samples_leaf), n_classes=K)
        seed = seed_sequence(self.random_state)
        rngs = tree_generators(seed, self.n_trees)
        mode = "bootstrap" if self.sampling == "stratified" else self.sampling
        strata = y_codes if self.sampling == "stratified" else None
        W = np.stack([draw_weights(n, r, mode=mode, strata=strata) for r in rngs])
        bar = ProgressBar("GeF", len(rngs), self.progress)
        forest = grow_forest(splitter, data, y_codes, W, rngs, limits, n_jobs=self.n_jobs,
                             on_tree_done=bar.step)
        bar.close(f"{forest.n_leaves} leaves")
        # feature ids of the grower index the feature sub-table; ForestArrays index all columns
        n_levels_full = np.zeros(d, np.int32)
        n_levels_full[feat_idx] = forest.n_levels
        feature = np.where(forest.feature >= 0, feat_idx[np.maximum(forest.feature, 0)], -1)
        self.forest_ = dataclasses.replace(forest, feature=feature.astype(np.int32),
                                           n_levels=n_levels_full)
        self.marginal_weight_, self.marginal_weight_ll_ = resolve_weight(
            self, frame, kinds, seed, {"target": name}, EncodedTable(self.encoder_, Z))
        self._fit_generative(Z, W, self.marginal_weight_)
        self.fit_info_ = {"source": "gef", "inbag": "bootstrap counts"
                          if self.sampling != "none" else "all rows"}
        return self

    def _fit_generative(self, Z: np.ndarray, W: np.ndarray, marginal_weight: float = 0.0
                        ) -> None:
        """Leaf weights (in-bag count shares, Thm 1) and leaf factors from the in-bag multisets
        ``W [B, n]`` of the rows ``Z``; with ``marginal_weight > 0`` the back-off tree
        (:mod:`~forestgen.families.mixture.backoff`) follows, its leaf holding every row once
        (the class column's marginal: its class shares, smoothed by ``class_alpha``)."""
        forest = self.forest_
        leaves = forest.apply(Z)
        self.leaf_log_weight_ = self.component("ensembler").leaf_log_weights(
            leaves, forest.n_leaves, forest.leaf_tree, forest.n_trees, mask=W.T)
        schema = self.encoder_.schema
        boxes = forest.boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
        num, dis = self._leaf_prototypes()
        pair_w = np.ascontiguousarray(W.T).ravel()
        target_leaf = CategoricalLeaf(alpha=self.class_alpha, floor=0.0)
        self.leaf_models_ = self.fit_leaves(Z, leaves, boxes, num, dis, pair_w,
                                            overrides={self.target_index_: target_leaf})
        self.marginal_weight_ = float(marginal_weight)
        if marginal_weight > 0:
            check_mixture(self, "GeF")
            c = self.target_index_
            counts = np.bincount(Z[:, c].astype(np.int64), minlength=int(schema.n_levels[c]))
            # a level no training row holds scores in the back-off leaf as in GeF's own
            # discrete leaves (their floor), not zero: else one unseen level (Cars93's Model,
            # unique per car) leaves the marginals no mass on any new row
            floor = float(getattr(dis, "floor", 0.0))
            over = {j: CategoricalLeaf(alpha=MARGINAL_ALPHA, floor=floor)
                    for j, spec in enumerate(schema.columns) if spec.is_discrete and j != c}
            over[c] = CategoricalLeaf(alpha=self.class_alpha, floor=0.0)
            self.forest_, self.leaf_log_weight_, self.leaf_models_ = append_marginal_tree(
                self, Z, marginal_weight, root_tree(forest, counts), overrides=over)
            leaves = np.hstack([leaves, np.full((len(Z), 1), forest.n_leaves, leaves.dtype)])
            pair_w = np.ascontiguousarray(np.vstack([W, np.ones((1, len(Z)))]).T).ravel()
        self._fit_missing(Z, leaves, pair_w)

    # ------------------------------------------------------------------ scikit-learn import
    @classmethod
    def from_sklearn(cls, rf, X, y, **params) -> GeF:
        """Turn a fitted ``sklearn.ensemble.RandomForestClassifier`` into a GeF (spec §7).

        Structure, leaf weights (``weighted_n_node_samples`` shares) and class pmfs come from
        the sklearn trees, so ``predict_proba`` on complete rows equals ``rf.predict_proba``
        (Theorem 1; ``class_alpha`` defaults to 0 here). Feature factors are fitted on the
        given ``X`` routed through each tree, weighted by the tree's bootstrap counts when they
        can be recovered (checked against the trees' own leaf counts; otherwise every row
        counts once; see ``fit_info_``).

        sklearn compares ``float32(x) <= threshold``; thresholds are moved to the float64
        value with the same outcome for every float64 x (spec pitfall 7). ``X`` must be
        numeric (what sklearn accepted); every feature is treated as continuous.
        """
        if not hasattr(rf, "estimators_") or not hasattr(rf, "classes_"):
            raise ValueError("rf must be a fitted sklearn RandomForestClassifier")
        if getattr(rf, "n_outputs_", 1) != 1:
            raise ValueError("multi-output forests are not supported")
        params.setdefault("class_alpha", 0.0)
        model = cls(n_trees=len(rf.estimators_), **params)
        model.validate_params()
        feats, ys, name = cls._split_xy(X, y, None)
        for col in feats.columns:
            dt = feats[col].dtype
            if not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt)):
                raise ValueError(f"from_sklearn needs numeric features; column {col!r} has "
                                 f"dtype {dt}")
        if feats.shape[1] != rf.n_features_in_:
            raise ValueError(f"X has {feats.shape[1]} columns, the forest was fitted on "
                             f"{rf.n_features_in_}")
        if ys.isna().any():
            raise ValueError(f"the class column {name!r} has missing values")
        classes = list(rf.classes_)
        unknown = ~ys.isin(classes)
        if unknown.any():
            raise ValueError(f"class label {ys[unknown].iloc[0]!r} is not in rf.classes_")
        feats = feats.astype(np.float64)
        frame = feats.copy()
        frame[name] = pd.Categorical(ys.to_numpy(), categories=classes)
        kinds = {col: "continuous" for col in feats.columns}
        model.encoder_ = TableEncoder(kinds=kinds).fit(frame)
        Z = model.encoder_.transform(frame)
        n, d = Z.shape
        model.target_index_ = d - 1
        K = len(classes)
        trees, leaf_pmf, leaf_cnt, leaf_pos = [], [], [], []
        for est in rf.estimators_:
            t = est.tree_
            is_leaf = t.children_left < 0
            thr = np.where(is_leaf, np.nan, _float32_threshold(t.threshold))
            nan_left = getattr(t, "missing_go_to_left", np.zeros(t.node_count, np.uint8))
            wn = t.weighted_n_node_samples.astype(np.float64)
            frac = t.value[:, 0, :].astype(np.float64)
            trees.append(TreeRecord(
                feature=np.where(is_leaf, -1, t.feature).astype(np.int32),
                threshold=thr, nan_left=np.asarray(nan_left, np.uint8),
                left=np.where(is_leaf, -1, t.children_left).astype(np.int32),
                right=np.where(is_leaf, -1, t.children_right).astype(np.int32),
                cat_off=np.full(t.node_count, -1, np.int64), cat_left=np.zeros(0, np.uint8),
                class_weight=frac / np.maximum(frac.sum(1, keepdims=True), 1e-300) * wn[:, None],
            ))
            leaf_pmf.append(frac[is_leaf])
            leaf_cnt.append(wn[is_leaf])
            leaf_pos.append(np.nonzero(is_leaf)[0])
        model.forest_ = ForestArrays.from_trees(trees, np.zeros(d, np.int32))
        forest = model.forest_
        pmf = np.concatenate(leaf_pmf)  # leaves in node order per tree = global leaf order
        cnt = np.concatenate(leaf_cnt)
        W, how = _sklearn_inbag(rf, forest, Z, n)
        model._fit_generative(Z, W)
        model.marginal_weight_ll_ = {}
        # Theorem 1: leaf weights and class pmfs from the sklearn trees' own statistics
        model.leaf_log_weight_ = model.component("ensembler").checked_log_weights(
            cnt, forest.leaf_tree, forest.n_trees)
        if model.class_alpha > 0:
            counts = pmf / np.maximum(pmf.sum(1, keepdims=True), 1e-300) * cnt[:, None]
            p = (counts + model.class_alpha) / (cnt[:, None] + K * model.class_alpha)
        else:
            p = pmf / pmf.sum(1, keepdims=True)
        cls_leaf = CategoricalLeaf.from_pmf(p, cnt, alpha=model.class_alpha, floor=0.0)
        model.leaf_models_[model.target_index_] = cls_leaf
        model.fit_info_ = {"source": "sklearn", "inbag": how}
        return model

    # ------------------------------------------------------------------ class queries
    @property
    def classes_(self) -> np.ndarray:
        """Class labels in the column order of :meth:`predict_proba`."""
        spec = self.schema_.columns[self.target_index_]
        return np.asarray(spec.categories, dtype=object if any(
            isinstance(c, str) for c in spec.categories) else None)

    @property
    def target_(self) -> Any:
        """Name of the class column."""
        return self.schema_.names[self.target_index_]

    def _feature_pair_scores(self, Z: np.ndarray, ptr: np.ndarray, leaf: np.ndarray
                             ) -> np.ndarray:
        """log w_l + sum over *observed* features of log f_li(x_i) per (row, reached leaf)."""
        rows = np.repeat(np.arange(len(Z)), np.diff(ptr))
        s = self.leaf_log_weight_[leaf].copy()
        for j, lm in enumerate(self.leaf_models_):
            if j == self.target_index_:
                continue
            ok_rows = ~np.isnan(Z[:, j])
            if not ok_rows.any():
                continue
            if ok_rows.all():
                s += lm.log_prob(leaf, Z[rows, j])
            else:
                ok = ok_rows[rows]
                s[ok] += lm.log_prob(leaf[ok], Z[rows[ok], j])
        return s

    def _pair_class_scores(self, Z: np.ndarray, ptr: np.ndarray, leaf: np.ndarray,
                           mode: str) -> np.ndarray:
        """``[P, K]`` log scores of (row, reached leaf) pairs per class.

        ``gef``/``gef+``: log w_l + sum over observed features of log f_li(x_i) + log p_l(y)
        (the single place where a joint, non-factorised leaf model would plug in).
        ``friedman``: log of the leaf's raw in-bag class counts (no weights, no densities).
        """
        if mode == "friedman":
            counts = self.forest_.leaf_value[leaf]
            with np.errstate(divide="ignore"):
                return np.log(counts)
        s = self._feature_pair_scores(Z, ptr, leaf)
        with np.errstate(divide="ignore"):
            logp = np.log(self.leaf_models_[self.target_index_].probs(leaf))
        return s[:, None] + logp

    def class_proba_encoded(self, Z: np.ndarray, modes=("gef",)) -> dict[str, np.ndarray]:
        """Class posteriors ``{mode: [n, K]}`` of encoded rows (class entry ignored), sharing
        one reach pass and one feature-score pass between ``gef`` and ``gef+``."""
        for mode in modes:
            if mode not in MODES:
                raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        Z = np.array(Z, dtype=np.float64, copy=True)
        Z[:, self.target_index_] = np.nan
        n = len(Z)
        K = int(self.schema_.n_levels[self.target_index_])
        out = {m: np.empty((n, K)) for m in modes}
        leaf_tree = self.forest_.leaf_tree
        self.require_normalised("class posterior")
        ens = self.component("ensembler")
        for s in range(0, n, ROW_CHUNK):
            Zc = Z[s:s + ROW_CHUNK]
            ptr, leaf = self.forest_.reach(Zc)
            i = 0
            while i < len(Zc):
                j = int(np.searchsorted(ptr, ptr[i] + PAIR_CHUNK, side="right")) - 1
                j = min(max(j, i + 1), len(Zc))
                sub_ptr = ptr[i:j + 1] - ptr[i]
                sub_leaf = leaf[ptr[i]:ptr[j]]
                tree = leaf_tree[sub_leaf]
                S = None
                for mode in modes:
                    if mode == "friedman":
                        Sm = self._pair_class_scores(Zc[i:j], sub_ptr, sub_leaf, mode)
                    else:
                        if S is None:
                            S = self._pair_class_scores(Zc[i:j], sub_ptr, sub_leaf, mode)
                        Sm = S
                    out[mode][s + i:s + j] = _combine(ens, Sm, sub_ptr, tree, mode)
                i = j
        for mode in modes:
            bad = ~np.isfinite(out[mode]).all(1)
            if bad.any():  # no tree gives the observed features positive density: the prior
                warnings.warn(f"GeF: {int(bad.sum())} row(s) have features of zero density "
                              f"under every tree; their class probabilities are the prior",
                              RuntimeWarning, stacklevel=3)
                empty = np.full((1, self.schema_.d), np.nan)
                ptr, leaf = self.forest_.reach(empty)
                S = self._pair_class_scores(empty, ptr, leaf, mode)
                out[mode][bad] = _combine(ens, S, ptr, leaf_tree[leaf], mode)[0]
        return out

    def predict_proba(self, X, target=None, mode: str | None = None):
        """Class probabilities given each row's observed features; NaN features are
        marginalised exactly (spec §3.2–3.3). Returns a DataFrame (the rows' index, one column
        per class in :attr:`classes_` order), like the generic any-column path.

        ``mode``: ``"gef"`` (average of per-tree posteriors), ``"gef+"`` (mixture posterior)
        or ``"friedman"``; default: the model's ``mode``. A class column in ``X`` is ignored.
        With ``target`` naming another column, delegates to the generic inference layer.
        """
        self.check_fitted()
        if target is not None and target != self.target_:
            return super().predict_proba(X, target)
        mode = self.mode if mode is None else mode
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        Z = self._query_rows(X, "predict_proba")
        P = self.class_proba_encoded(Z, (mode,))[mode]
        index = X.index if isinstance(X, pd.DataFrame) else pd.RangeIndex(len(P))
        return pd.DataFrame(P, index=index, columns=pd.Index(list(self.classes_), dtype=object))

    def predict_proba_modes(self, X, modes=MODES) -> dict[str, np.ndarray]:
        """``{mode: predict_proba(X, mode=mode)}`` for several modes in one pass (held-out
        values outside the training range answered at its nearest end, as there)."""
        self.check_fitted()
        return self.class_proba_encoded(self._query_rows(X, "predict_proba_modes"),
                                        tuple(modes))

    def _query_rows(self, X, query: str) -> np.ndarray:
        """The encoded feature rows of a class query: numeric values outside the training range
        at its nearest end, levels unseen at fit left free (marginalised), each with a
        warning (:mod:`forestgen.data.support`)."""
        Z = clamp_query_rows(self, self.encode_rows(X), query, skip={self.target_index_})
        return free_unseen_levels(self, Z, query, skip={self.target_index_})

    def predict(self, X, target=None, mode: str | None = None):
        """Most probable class label per row (see :meth:`predict_proba`): a Series indexed
        like ``X``, named and typed like the class column, as every learner's ``predict``."""
        self.check_fitted()
        if target is not None and target != self.target_:
            return super().predict(X, target)
        from forestgen.inference.api import point_series

        proba = self.predict_proba(X, mode=mode)
        return point_series(self, self.target_index_,
                            np.argmax(proba.to_numpy(), axis=1).astype(np.float64), True,
                            proba.index)

    # ------------------------------------------------------------------ densities
    def score_samples_features(self, X) -> np.ndarray:
        """log p(x) under GeF+ with the class marginalised (and NaN features too), spec §3.5."""
        return self.log_prob_encoded(self._encode_features(X))

    def outlier_score(self, X) -> np.ndarray:
        """Outlier score ``-log p(x)`` (higher = more anomalous)."""
        return -self.score_samples_features(X)

    # ------------------------------------------------------------------ persistence
    def density_faces(self, j: int) -> np.ndarray:
        """Where the density of numeric column ``j`` can jump besides the leaf cells: the bin
        faces of the back-off leaf's histogram (``marginal_weight``; empty without one)."""
        return density_faces(self, j)

    def _extra_meta(self) -> dict[str, Any]:
        return {"target_index": int(self.target_index_), "fit_info": self.fit_info_,
                "marginal_weight": float(getattr(self, "marginal_weight_", 0.0))}

    def _restore_extra(self, arrays, meta) -> None:
        schema = self.encoder_.schema
        self.target_index_ = check_count("extra target_index", meta["target_index"])
        if self.target_index_ >= schema.d or not schema.columns[self.target_index_].is_discrete:
            raise ValueError(f"extra target_index {self.target_index_} is not a discrete "
                             f"column of the {schema.d}")
        self.fit_info_ = meta.get("fit_info", {})
        self.marginal_weight_ = float(meta.get("marginal_weight", 0.0))  # 0 before stop 47
        self.marginal_weight_ll_ = {}


# ---------------------------------------------------------------------- helpers
def _normalise_log(L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-normalised probabilities of log scores ``L [G, K]`` and a validity mask."""
    m = L.max(1, keepdims=True)
    ok = np.isfinite(m[:, 0])
    P = np.exp(L - np.where(ok[:, None], m, 0.0))
    P /= np.where(ok[:, None], P.sum(1, keepdims=True), 1.0)
    P[~ok] = 0.0
    return P, ok


def _combine(ens, S: np.ndarray, ptr: np.ndarray, tree: np.ndarray, mode: str) -> np.ndarray:
    """Class posteriors per row from pair scores ``S [P, K]`` (rows are CSR segments ``ptr``),
    combined over leaves by the model's ensembler ``ens``."""
    n = len(ptr) - 1
    K = S.shape[1]
    out = np.full((n, K), np.nan)
    lens = np.diff(ptr)
    has = lens > 0
    if not has.any():
        return out
    row = np.repeat(np.arange(n), lens)
    if mode == "gef+":
        P, ok = _normalise_log(ens.combine(ptr, S)[has])
        P[~ok] = np.nan
        out[has] = P
        return out
    # gef / friedman: posterior per (row, tree), then the average over trees with p_t(x_o) > 0
    brk = np.ones(len(S), bool)
    brk[1:] = (row[1:] != row[:-1]) | (tree[1:] != tree[:-1])
    starts = np.nonzero(brk)[0]
    P, ok = _normalise_log(ens.combine(np.r_[starts, len(S)], S))
    g_row = row[starts]
    cnt = np.bincount(g_row, weights=ok.astype(float), minlength=n)
    tot = np.zeros((n, K))
    np.add.at(tot, g_row, P)
    with np.errstate(invalid="ignore", divide="ignore"):
        res = tot / cnt[:, None]
    res[cnt == 0] = np.nan
    return res


def _float32_threshold(t: np.ndarray) -> np.ndarray:
    """float64 threshold t' with ``x <= t'`` iff ``float32(x) <= t`` for every float64 x
    (round-to-nearest-even casting, as scikit-learn routes float32 inputs)."""
    t = np.asarray(t, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = t.astype(np.float32)
        f = np.where(f.astype(np.float64) > t, np.nextafter(f, np.float32(-np.inf)), f)
        g = np.nextafter(f, np.float32(np.inf))
        mid = (f.astype(np.float64) + g.astype(np.float64)) / 2.0
        even = (f.view(np.uint32) & 1) == 0
        out = np.where(even, mid, np.nextafter(mid, -np.inf))
    return np.where(np.isnan(t), t, out)


def _sklearn_inbag(rf, forest: ForestArrays, Z: np.ndarray, n: int) -> tuple[np.ndarray, str]:
    """Per-tree row counts ``[B, n]``: sklearn's bootstrap multisets when they can be rebuilt
    and match every leaf's ``weighted_n_node_samples``; else every row once."""
    B = forest.n_trees
    ones = np.ones((B, n))
    if not getattr(rf, "bootstrap", False):
        W, how = ones, "all rows (no bootstrap)"
    else:
        try:
            from sklearn.ensemble._forest import (
                _generate_sample_indices,
                _get_n_samples_bootstrap,
            )

            nb = _get_n_samples_bootstrap(n, rf.max_samples, None)
            W = np.stack([np.bincount(_generate_sample_indices(e.random_state, n, nb, None),
                                      minlength=n).astype(float) for e in rf.estimators_])
            how = "sklearn bootstrap counts"
        except Exception:  # private helper changed: fall back to every row
            return ones, "all rows (bootstrap not recoverable)"
    leaves = forest.apply(Z)
    got = np.bincount(leaves.ravel(), weights=W.T.ravel(), minlength=forest.n_leaves)
    want = np.concatenate([e.tree_.weighted_n_node_samples[e.tree_.children_left < 0]
                           for e in rf.estimators_])
    if not np.allclose(got, want):
        return ones, "all rows (given X does not reproduce the trees' leaf counts)"
    return W, how
