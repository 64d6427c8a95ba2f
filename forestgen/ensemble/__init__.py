"""Ensemblers: how trees are grown together and how their outputs combine."""

from forestgen.ensemble.bagging import draw_weights
from forestgen.ensemble.base import Ensembler
from forestgen.ensemble.mixture import MixtureEnsembler, segment_logsumexp

__all__ = ["Ensembler", "MixtureEnsembler", "draw_weights", "segment_logsumexp"]
