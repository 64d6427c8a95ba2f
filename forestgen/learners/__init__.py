"""Learners: thin compositions of the components with each paper's defaults. Each lives in its
family's package (:mod:`forestgen.families`); this module gathers them."""

from forestgen.families.chain.chain import Chain
from forestgen.families.energy.nrgboost import NRGBoost
from forestgen.families.intersection.eogt import EOGT
from forestgen.families.intersection.gfboost import GFBoost
from forestgen.families.mixture.anchored import Anchored
from forestgen.families.mixture.arf import ARF
from forestgen.families.mixture.density_forest import DEF
from forestgen.families.mixture.gef import GeF
from forestgen.families.mixture.rfde import RFDE

__all__ = ["Anchored", "ARF", "Chain", "DEF", "EOGT", "GFBoost", "GeF", "NRGBoost", "RFDE"]
