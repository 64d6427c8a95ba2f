"""forestgen: tree ensembles as generative models."""

from forestgen import registry
from forestgen.base import GenerativeForest, NotFittedError
from forestgen.data import TableEncoder, load_adult
from forestgen.impute import ForestImputer
from forestgen.learners import ARF, DEF, EOGT, RFDE, GeF, GFBoost, NRGBoost

__version__ = "0.1.0"

__all__ = ["ARF", "DEF", "EOGT", "RFDE", "GeF", "GFBoost", "NRGBoost", "ForestImputer",
           "GenerativeForest",
           "NotFittedError",
           "TableEncoder", "load_adult", "registry", "__version__"]
