"""Quality metrics for synthetic tabular data.

Fidelity (marginals, associations, C2ST, MMD, energy, sliced Wasserstein), coverage
(alpha-precision / beta-recall, k-NN precision / recall), utility (TSTR), privacy (DCR / NNDR),
density (test log-likelihood), optimal transport (exact EMD / Sinkhorn) and a one-call
:func:`report`. Inputs are pandas DataFrames (mixed numeric / categorical / bool / missing) or
numpy arrays.

torchmetrics wrappers live in :mod:`forestgen.metrics.torchmetrics` (imported lazily, so
``import forestgen.metrics`` does not import torch).
"""

from forestgen.metrics.coverage import (
    AlphaPrecisionResult,
    NNPrecisionRecall,
    alpha_precision_beta_recall,
    nn_precision_recall,
)
from forestgen.metrics.density import LogLikelihoodResult, log_likelihood
from forestgen.metrics.fidelity import (
    AssociationGap,
    C2STResult,
    SmallSampleWarning,
    association_gap,
    c2st,
    energy_distance,
    ks_statistic,
    marginal_distances,
    mmd,
    sliced_wasserstein,
)
from forestgen.metrics.privacy import DCRResult, dcr
from forestgen.metrics.report import QualityReport, report
from forestgen.metrics.sdmetrics_scores import (
    SDMetricsScores,
    column_pair_trends,
    column_shapes,
    sdmetrics_quality,
)
from forestgen.metrics.transport import ground_cost, ot_cost
from forestgen.metrics.utility import TSTRResult, tstr

__all__ = [
    "AlphaPrecisionResult",
    "AssociationGap",
    "C2STResult",
    "DCRResult",
    "LogLikelihoodResult",
    "NNPrecisionRecall",
    "QualityReport",
    "SDMetricsScores",
    "SmallSampleWarning",
    "TSTRResult",
    "alpha_precision_beta_recall",
    "association_gap",
    "c2st",
    "column_pair_trends",
    "column_shapes",
    "dcr",
    "energy_distance",
    "ground_cost",
    "ks_statistic",
    "log_likelihood",
    "marginal_distances",
    "mmd",
    "nn_precision_recall",
    "ot_cost",
    "report",
    "sdmetrics_quality",
    "sliced_wasserstein",
    "tstr",
]
