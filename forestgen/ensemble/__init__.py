"""Ensemblers shared by several families: how trees are grown together and how their outputs
combine. A family's own ensembler lives in its package (:mod:`forestgen.families`)."""

from forestgen.ensemble.bagging import draw_weights
from forestgen.ensemble.base import Ensembler
from forestgen.ensemble.mixture import MixtureEnsembler
from forestgen.logsumexp import segment_logsumexp

__all__ = ["Ensembler", "MixtureEnsembler", "draw_weights", "segment_logsumexp"]
