"""Ensemblers: how trees are grown together and how their outputs combine."""

from forestgen.ensemble.additive_energy import AdditiveEnergy, EnergyTrees
from forestgen.ensemble.bagging import draw_weights
from forestgen.ensemble.base import Ensembler
from forestgen.ensemble.intersection import IntersectionEnsembler
from forestgen.ensemble.mixture import MixtureEnsembler, segment_logsumexp
from forestgen.ensemble.normaliser import AISNormaliser, ImportanceNormaliser

__all__ = ["AISNormaliser", "AdditiveEnergy", "EnergyTrees", "Ensembler", "ImportanceNormaliser",
           "IntersectionEnsembler", "MixtureEnsembler", "draw_weights", "segment_logsumexp"]
