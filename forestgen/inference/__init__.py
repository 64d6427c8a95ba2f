"""Exact probabilistic queries on forest mixtures: conditioning, marginals, expectations,
prediction of any column and imputation (ARF spec ``arf.md`` §3).

A forest with factorised leaves is the mixture ``p(x) = sum_k pi_k prod_j f_kj(x_j)`` over all
leaves ``k`` of all trees (a smooth, decomposable probabilistic circuit), so conditioning and
marginalising are exact: given evidence ``e`` the leaf posterior is
``w_k(e) ∝ pi_k prod_{j in E} g_kj(e_j)``, normalised over **all leaves of all trees** (pooled,
not per tree), and ``p(x_U | e) = sum_k w_k(e) prod_{j in U} f_kj(x_j)``. Every query below works
from ``leaf_log_weight_``, ``forest_``, ``leaf_models_`` and ``encoder_`` and so serves every
:class:`~forestgen.base.GenerativeForest` learner.

Evidence language
-----------------
One language for ``model.sample(..., conditions=)``, ``model.log_prob(X, conditions=)``,
``model.expect(columns, conditions=)``; the rows given to ``predict_proba`` / ``predict`` /
``impute`` are per-row evidence of the same kind.

**One condition set: a dict** ``{column: condition}``

=============================  ==========================================================
condition                      meaning
=============================  ==========================================================
``1.5`` (numeric column)       equality: a *density* condition, ``g = f_kj(1.5)``
``(low, high)``                closed interval ``low <= x <= high`` for every column kind;
                               ``None`` for an open end: ``(30, None)``. A *probability*
                               condition (truncated CDF difference; on an ordinal-integer
                               column the levels with ``low <= value <= high``). Sampled
                               values satisfy it after decoding (rounding to the training
                               decimals snaps inside the interval).
``"Female"`` (discrete col.)   equality on a level (its pmf value)
``{"a", "b"}`` (set or list)   level set: ``g = P_k(x_j in {a, b})``
``Not({"a"})`` / ``Not("a")``  every level except those given (:class:`Not`)
=============================  ==========================================================

Columns not named are free. ``model.sample(500, conditions={"sex": "Female", "age": (30, 40),
"income": {">50K"}})`` draws a leaf from the posterior, then the free columns from the leaf;
evidence columns take the given value, or are drawn inside the interval / level set.

**Per-row evidence: a DataFrame** whose columns are a subset of the model's; ``NaN`` / ``None``
cells are free. Each row is its own condition set (one draw or one query per row; ``n``
defaults to the number of rows). Plain values are equalities; object columns may also hold
intervals (tuples), level sets (sets/lists) and :class:`Not` cells.

**Errors.** An unknown column, a value of the wrong type, NaN as a condition, an empty or
reversed interval, a level not seen at fit time, an empty level set, intervals on nominal
columns and level sets on continuous ones raise ``ValueError`` / ``KeyError`` naming the column.
Evidence with zero probability under the model (e.g. outside every leaf's support) raises
:class:`ZeroProbabilityError` naming the offending column(s) — or the evidence columns if they
are only *jointly* impossible. ``sample(..., on_empty="unconditional")`` instead draws such rows
unconditionally (the whole row; evidence ignored), and ``on_empty="nan"`` returns them with
their given values and every other entry missing (integer and bool columns become nullable),
each with a ``RuntimeWarning``. With a per-row DataFrame ``"nan"`` is the default, so one
impossible row does not fail the others (as in the per-row queries, which answer NaN for it);
with a dict the default is to raise.

**Semantics notes.** Equality on a discrete column uses the leaf model's ``log_prob`` (with the
categorical leaf's probability floor, so identities with ``model.log_prob`` hold exactly); level
sets use the exact pmf. ``log_prob(X, conditions=e)`` is ``log p(x_U | e)`` where ``U`` are the
observed columns of each row that carry no evidence (``X``'s entries in evidence columns are
ignored). Expectations: the conditional mean for numeric and ordinal-integer columns, the most
probable level of the posterior mixture pmf for categorical, bool and binary columns (a MAP per
column, not a joint MAP). Queries run in chunks of at most a few million (row, leaf) pairs.
"""

from forestgen.inference.api import (
    conditional_log_prob,
    conditional_sample,
    density_columns,
    evidence_log_prob,
    expect,
    impute,
    interval_log_mass,
    leaf_posterior,
    predict,
    predict_proba,
)
from forestgen.inference.conditions import Evidence, Not, ZeroProbabilityError, parse_conditions

__all__ = ["Not", "ZeroProbabilityError", "Evidence", "parse_conditions", "conditional_sample",
           "conditional_log_prob", "density_columns", "evidence_log_prob", "expect",
           "interval_log_mass", "predict_proba", "predict", "impute", "leaf_posterior"]
