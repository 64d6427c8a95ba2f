"""Quality metrics for synthetic tabular data.

Fidelity (marginals, associations, C2ST, MMD, energy, sliced Wasserstein), coverage
(alpha-precision / beta-recall, k-NN precision / recall), utility (TSTR), privacy (DCR / NNDR),
density (test log-likelihood), optimal transport (exact EMD / Sinkhorn) and a one-call
:func:`report`. Inputs are pandas DataFrames (mixed numeric / categorical / bool / missing) or
numpy arrays.

torchmetrics wrappers live in :mod:`forestgen.metrics.torchmetrics` (imported lazily, so
``import forestgen.metrics`` does not import torch); the names below are imported on first
use too (:mod:`forestgen.lazy`).
"""

from typing import TYPE_CHECKING

from forestgen.lazy import lazy_attributes

_EXPORTS = {
    "AlphaPrecisionResult": "forestgen.metrics.coverage",
    "NNPrecisionRecall": "forestgen.metrics.coverage",
    "alpha_precision_beta_recall": "forestgen.metrics.coverage",
    "nn_precision_recall": "forestgen.metrics.coverage",
    "LogLikelihoodResult": "forestgen.metrics.density",
    "log_likelihood": "forestgen.metrics.density",
    "AssociationGap": "forestgen.metrics.fidelity",
    "BelowChanceWarning": "forestgen.metrics.fidelity",
    "C2STResult": "forestgen.metrics.fidelity",
    "SmallSampleWarning": "forestgen.metrics.fidelity",
    "association_gap": "forestgen.metrics.fidelity",
    "c2st": "forestgen.metrics.fidelity",
    "energy_distance": "forestgen.metrics.fidelity",
    "ks_statistic": "forestgen.metrics.fidelity",
    "marginal_distances": "forestgen.metrics.fidelity",
    "mmd": "forestgen.metrics.fidelity",
    "sliced_wasserstein": "forestgen.metrics.fidelity",
    "DCRResult": "forestgen.metrics.privacy",
    "dcr": "forestgen.metrics.privacy",
    "QualityReport": "forestgen.metrics.quality",
    "report": "forestgen.metrics.quality",
    "RuleViolations": "forestgen.metrics.rules",
    "rule_violations": "forestgen.metrics.rules",
    "SDMetricsScores": "forestgen.metrics.sdmetrics_scores",
    "column_pair_trends": "forestgen.metrics.sdmetrics_scores",
    "column_shapes": "forestgen.metrics.sdmetrics_scores",
    "sdmetrics_quality": "forestgen.metrics.sdmetrics_scores",
    "ground_cost": "forestgen.metrics.transport",
    "ot_cost": "forestgen.metrics.transport",
    "TSTRResult": "forestgen.metrics.utility",
    "tstr": "forestgen.metrics.utility",
}

__all__ = [
    "AlphaPrecisionResult",
    "AssociationGap",
    "BelowChanceWarning",
    "C2STResult",
    "DCRResult",
    "LogLikelihoodResult",
    "NNPrecisionRecall",
    "QualityReport",
    "RuleViolations",
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
    "rule_violations",
    "sdmetrics_quality",
    "sliced_wasserstein",
    "tstr",
]

__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)

if TYPE_CHECKING:  # static analysers and IDEs see the eager names
    from forestgen.metrics.coverage import (
        AlphaPrecisionResult,
        NNPrecisionRecall,
        alpha_precision_beta_recall,
        nn_precision_recall,
    )
    from forestgen.metrics.density import LogLikelihoodResult, log_likelihood
    from forestgen.metrics.fidelity import (
        AssociationGap,
        BelowChanceWarning,
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
    from forestgen.metrics.quality import QualityReport, report
    from forestgen.metrics.rules import RuleViolations, rule_violations
    from forestgen.metrics.sdmetrics_scores import (
        SDMetricsScores,
        column_pair_trends,
        column_shapes,
        sdmetrics_quality,
    )
    from forestgen.metrics.transport import ground_cost, ot_cost
    from forestgen.metrics.utility import TSTRResult, tstr
