"""The leaf-mixture family: ``p(x) = sum_leaves w_leaf prod_j p_j(x_j | leaf)``.

Learners: :mod:`.arf` (ARF, Watson et al. 2023), :mod:`.gef` (GeF, Correia et al. 2020),
:mod:`.rfde` (RFDE, Wen & Hang 2022) and :mod:`.density_forest` (DEF). Their components
(leaf models, impurity and density splitters, the mixture ensembler, the ancestral sampler)
and the query engine (:mod:`forestgen.inference`) are shared with the intersection family,
whose GF.Boost compiles its cells into a leaf mixture, so they live in the generic packages.

The names below import their module on first use.
"""

from forestgen.lazy import lazy_attributes

_EXPORTS = {
    "ARF": "forestgen.families.mixture.arf",
    "GeF": "forestgen.families.mixture.gef",
    "RFDE": "forestgen.families.mixture.rfde",
    "DEF": "forestgen.families.mixture.density_forest",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)
