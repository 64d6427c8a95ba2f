"""Metrics refuse frames too small to score, naming the frame, instead of making a score up
(stop 67's probe: an empty synthetic frame gave an association gap of 0.24 and an SDMetrics
quality of 0.5, ``dcr`` and alpha-precision failed inside NumPy, and three synthetic rows far
from the data had k-NN recall 1.0 because their k-th neighbour did not exist)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm


def _real(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "y": x + rng.normal(0, 0.3, n),
                         "c": np.where(x > 0, "a", "b")})


@pytest.mark.parametrize("metric, least", [
    (lambda r, s: fm.association_gap(r, s), 2),
    (lambda r, s: fm.sdmetrics_quality(r, s), 2),
    (lambda r, s: fm.dcr(r, s), 1),
    (lambda r, s: fm.alpha_precision_beta_recall(r, s), 1),
    (lambda r, s: fm.nn_precision_recall(r, s, k=3), 4),
    (lambda r, s: fm.c2st(r, s), 1),
])
def test_too_few_synthetic_rows_are_refused_by_name(metric, least):
    real = _real()
    with pytest.raises(ValueError, match=rf"synthetic has {least - 1} row\(s\)"):
        metric(real, real.head(least - 1))
    if least > 1:
        with pytest.raises(ValueError, match="synthetic has 0 row"):
            metric(real, real.head(0))


def test_knn_recall_of_a_few_far_rows_is_not_one():
    """With more than k synthetic rows the k-th neighbour exists: far rows cover nothing."""
    real = _real()
    far = real.head(4).assign(x=50.0, y=60.0)
    res = fm.nn_precision_recall(real, far, k=3)
    assert res.precision == 0.0 and res.recall == 0.0
