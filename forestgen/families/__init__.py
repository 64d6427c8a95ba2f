"""Model families: what a learner's fitted model *is*, which component slots it fills and which
queries it can answer (declared, not assumed).

* :data:`LEAF_MIXTURE` — ``p(x) = sum_leaves w_leaf prod_j p_j(x_j | leaf)`` (ARF, GeF, RFDE,
  DEF): slots ``ensembler`` (``"mixture"``: combines per-leaf scores), ``sampler``
  (``"ancestral"``) and one leaf model per column. Every query below is exact.
* :data:`ENERGY` — ``p(x) ∝ exp(sum_t f_t(x))`` (NRGBoost): slots ``ensembler``
  (``"additive_energy"`` of constant-energy leaves over a base measure), ``sampler``
  (``"gibbs"``) and ``normaliser`` (``"importance"``: an estimate of ``log Z``,
  :mod:`forestgen.families.energy.normaliser`). Marginals are exact only while the unobserved grid
  is small enough to enumerate (else estimated), so ``"marginal"`` is not declared.
* :data:`INTERSECTION` — the partition induced by all trees with one mass per cell (GF.Boost /
  EOGT): slots ``partition`` (the cell table, :mod:`forestgen.families.intersection.cells`),
  ``ensembler`` (``"intersection"``: compiles the cells into one tree with masses ``R(C)``, after
  which every query is exact) and ``sampler`` (``"ancestral"`` on the compiled cells). EOGT keeps
  only arc probabilities: ``log_prob`` (NaN marginals), ``sample``, ``impute`` and ``predict``
  through the regions of its star-node walk.

A learner sets ``model_family``; :meth:`~forestgen.base.GenerativeForest.require` raises
``NotImplementedError`` naming the learner and the query for anything outside
``capabilities``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QUERIES = ("log_prob", "marginal", "sample", "conditional_sample", "conditional_log_prob",
           "expect", "predict", "impute", "torch")


@dataclass(frozen=True)
class Family:
    """A model family: its component ``slots`` (slot -> registry kind or description) and the
    ``capabilities`` (names from :data:`QUERIES`) its learners answer."""

    name: str
    slots: dict = field(default_factory=dict)
    capabilities: frozenset = frozenset(QUERIES)


LEAF_MIXTURE = Family("leaf mixture",
                      {"ensembler": "mixture", "sampler": "ancestral", "leaves": "leaf"})
ENERGY = Family("energy", {"ensembler": "additive_energy", "sampler": "gibbs",
                           "normaliser": "importance"},
                frozenset(QUERIES) - {"marginal"})
INTERSECTION = Family("intersection", {"partition": "cell table of all trees",
                                       "ensembler": "intersection", "sampler": "ancestral"})
