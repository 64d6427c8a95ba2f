"""The intersection family: generative forests (Nock & Guillame-Bert 2023; spec
``generative_forests.md``), trained by GF.Boost or as an ensemble of generative trees (EOGT).

The density lives on the partition induced by all trees. Everything private to the family
lives here:

* :mod:`.gfboost` and :mod:`.eogt` — the learners (paper defaults and the boosting loop);
* :mod:`.splitter` — the Bayes-risk split rule (``BayesRiskSplitter``);
* :mod:`.cells` — the cell table of the joint partition grown during training;
* :mod:`.ensembler` — compiles the cells into one tree with masses ``R(C)``
  (:mod:`.joint_tree` — the joint partition as one tree tiling the box);
* :mod:`.backoff` — GF.Boost's imputation walk with back-off to coarser regions;
* :mod:`.star`, :mod:`.regions`, :mod:`.forced` — EOGT's star-node sampler, the regions of
  its walk compatible with a row, and the walk forced to point values;
* :mod:`.region_atoms` — point masses inside EOGT's regions;
* :mod:`.region_queries` — EOGT's query engine through those regions (density, sampling),
  with :mod:`.region_conditionals` (conditional sampling and log density) and
  :mod:`.region_predictions` (imputation and prediction) mixed in.

The names below import their module on first use.
"""

from forestgen.lazy import lazy_attributes

_EXPORTS = {
    "GFBoost": "forestgen.families.intersection.gfboost",
    "EOGT": "forestgen.families.intersection.eogt",
    "BayesRiskSplitter": "forestgen.families.intersection.splitter",
    "CellTable": "forestgen.families.intersection.cells",
    "IntersectionEnsembler": "forestgen.families.intersection.ensembler",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
