"""forestgen: tree ensembles as generative models.

The public names below are imported on first use (:mod:`forestgen.lazy`), so importing the
package (or running ``forestgen --help``) stays fast.
"""

from typing import TYPE_CHECKING

from forestgen import openmp_policy as _openmp_policy  # noqa: F401 - before any OpenMP loads
from forestgen.lazy import lazy_attributes

__version__ = "0.1.0"

_EXPORTS = {
    "Anchored": "forestgen.learners", "ARF": "forestgen.learners",
    "Chain": "forestgen.learners", "DEF": "forestgen.learners",
    "EOGT": "forestgen.learners",
    "RFDE": "forestgen.learners", "GeF": "forestgen.learners", "GFBoost": "forestgen.learners",
    "NRGBoost": "forestgen.learners", "ForestImputer": "forestgen.impute",
    "AutoForest": "forestgen.auto",
    "GenerativeForest": "forestgen.base", "NotFittedError": "forestgen.base",
    "TableEncoder": "forestgen.data", "load_adult": "forestgen.data",
}

__all__ = ["AutoForest", "Anchored", "ARF", "Chain", "DEF", "EOGT", "RFDE", "GeF", "GFBoost",
           "NRGBoost",
           "ForestImputer", "GenerativeForest",
           "NotFittedError",
           "TableEncoder", "load_adult", "registry", "__version__"]

__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers and IDEs see the eager names
    from forestgen import registry
    from forestgen.auto import AutoForest
    from forestgen.base import GenerativeForest, NotFittedError
    from forestgen.data import TableEncoder, load_adult
    from forestgen.impute import ForestImputer
    from forestgen.learners import ARF, DEF, EOGT, RFDE, Anchored, Chain, GeF, GFBoost, NRGBoost
