"""forestgen: tree ensembles as generative models."""

from forestgen import registry
from forestgen.base import GenerativeForest, NotFittedError
from forestgen.data import TableEncoder, load_adult
from forestgen.learners import ARF, DEF, RFDE, GeF, NRGBoost

__version__ = "0.1.0"

__all__ = ["ARF", "DEF", "RFDE", "GeF", "NRGBoost", "GenerativeForest", "NotFittedError",
           "TableEncoder", "load_adult", "registry", "__version__"]
