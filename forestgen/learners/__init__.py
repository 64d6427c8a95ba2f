"""Learners: thin compositions of the components with each paper's defaults."""

from forestgen.learners.arf import ARF
from forestgen.learners.density_forest import DEF
from forestgen.learners.gef import GeF
from forestgen.learners.gfboost import EOGT, GFBoost
from forestgen.learners.nrgboost import NRGBoost
from forestgen.learners.rfde import RFDE

__all__ = ["ARF", "DEF", "EOGT", "GFBoost", "GeF", "NRGBoost", "RFDE"]
