"""The additive-energy family: NRGBoost (Bravo, ICLR 2025; spec ``nrgboost_def.md``).

``p(x) ∝ exp(sum_t f_t(x))`` on a finite grid. Everything private to the family lives here:

* :mod:`.nrgboost` — the learner (paper defaults and its boosting loop);
* :mod:`.queries` — its query engine (density, conditionals, Gibbs sampling, imputation);
* :mod:`.grid` — the finite grid the energy lives on;
* :mod:`.splitter` and :mod:`.grow` — the energy split gain and its tree grower;
* :mod:`.leaf` — constant-energy leaves (``P/Q - 1``);
* :mod:`.ensembler` — the additive energy (trees, steps, line search);
* :mod:`.leaf_sets` — leaf bitsets for the Gibbs slice;
* :mod:`.gibbs` — the Gibbs sampler and the importance-weighted sample pool;
* :mod:`.normaliser` — estimates of ``log Z``;
* :mod:`.distribution` — the model as a torch distribution.

The names below import their module on first use.
"""

from forestgen.lazy import lazy_attributes

_EXPORTS = {
    "NRGBoost": "forestgen.families.energy.nrgboost",
    "Grid": "forestgen.families.energy.grid",
    "EnergySplitter": "forestgen.families.energy.splitter",
    "ConstantEnergyLeaf": "forestgen.families.energy.leaf",
    "AdditiveEnergy": "forestgen.families.energy.ensembler",
    "EnergyTrees": "forestgen.families.energy.ensembler",
    "GibbsSampler": "forestgen.families.energy.gibbs",
    "SamplePool": "forestgen.families.energy.gibbs",
    "AISNormaliser": "forestgen.families.energy.normaliser",
    "ImportanceNormaliser": "forestgen.families.energy.normaliser",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
