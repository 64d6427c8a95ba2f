"""Model families: what a learner's fitted model *is*, which component slots it fills and which
queries it can answer (declared, not assumed).

* :data:`LEAF_MIXTURE` — ``p(x) = sum_leaves w_leaf prod_j p_j(x_j | leaf)`` (ARF, GeF, RFDE,
  DEF): slots ``ensembler`` (``"mixture"``: leaf weights from coverage, combines per-leaf
  scores), ``sampler`` (``"ancestral"``) and one leaf model per column. Every query below is
  exact.
* :data:`ENERGY` — ``p(x) ∝ exp(sum_t f_t(x))`` (NRGBoost): slots ``ensembler``
  (``"additive_energy"`` of constant-energy leaves over a base measure), ``sampler``
  (``"gibbs"``) and ``normaliser`` (``"importance"``: an estimate of ``log Z``,
  :mod:`forestgen.families.energy.normaliser`). Marginals are exact only while the unobserved grid
  is small enough to enumerate (else estimated), so ``"marginal"`` is not declared.
* :data:`INTERSECTION` — the partition induced by all trees with one mass per cell (GF.Boost /
  EOGT), grown on the cell table (:mod:`forestgen.families.intersection.cells`): slots
  ``ensembler`` (``"intersection"``: compiles the cells into one tree with masses ``R(C)``,
  after which every query is exact) and ``sampler`` (``"ancestral"`` on the compiled cells).
  EOGT keeps only arc probabilities: ``log_prob`` (NaN marginals), ``sample``, ``impute`` and
  ``predict`` through the regions of its star-node walk.
* :data:`CHAIN` — ``p(x) = prod_t p(x_{o_t} | x_{o_<t})``, one conditional tree per column in an
  order (:class:`~forestgen.families.chain.chain.Chain`, synthpop's sequential CART): no
  ensembler or sampler slot (nothing to combine; sampling is ancestral). Every query but
  ``torch`` is exact (open entries through the compatible branches of the chain) up to
  ``max_branches`` branches per row, past which it is estimated (with a warning).

A learner sets ``model_family`` and may rule a slot out (``GenerativeForest.ruled_out``, e.g.
EOGT's sampler: its law *is* its star-node walk); a component in a slot declares the families
it ``serves``. :meth:`~forestgen.base.GenerativeForest.require` raises ``NotImplementedError``
naming the learner and the query for anything outside ``capabilities``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

QUERIES = ("log_prob", "marginal", "sample", "conditional_sample", "conditional_log_prob",
           "expect", "predict", "impute", "torch")


@dataclass(frozen=True)
class Family:
    """A model family: the registry names of the components that fill its ``slots`` by
    default, the ``contracts`` a component in the ``ensembler`` / ``sampler`` slot must serve
    (a name in the component's ``serves``) and the ``capabilities`` (names from
    :data:`QUERIES`) its learners answer."""

    name: str
    slots: dict = field(default_factory=dict)
    capabilities: frozenset = frozenset(QUERIES)
    contracts: dict = field(default_factory=dict)


LEAF_MIXTURE = Family("leaf mixture", {"ensembler": "mixture", "sampler": "ancestral"},
                      contracts={"ensembler": "leaf mixture", "sampler": "leaf mixture"})
ENERGY = Family("energy", {"ensembler": "additive_energy", "sampler": "gibbs",
                           "normaliser": "importance"},
                frozenset(QUERIES) - {"marginal"},
                contracts={"ensembler": "energy", "sampler": "energy"})
#: GF.Boost compiles its cells into one tree of uniform leaves, a leaf mixture: its sampler is
#: a leaf-mixture sampler; its ensembler compiles the cell table
INTERSECTION = Family("intersection", {"ensembler": "intersection", "sampler": "ancestral"},
                      contracts={"ensembler": "intersection", "sampler": "leaf mixture"})
#: a chain of conditional trees: its trees multiply, so no ensembler; ancestral sampling
CHAIN = Family("chain", {}, frozenset(QUERIES) - {"torch"})
