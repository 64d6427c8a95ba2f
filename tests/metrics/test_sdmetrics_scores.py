"""SDMetrics-comparable scores agree with the ``sdmetrics`` package.

``sdmetrics_fixtures/reference.json`` holds SDMetrics 0.32's own ``QualityReport`` output on the
stored table pairs (``benchmarks/bench_sdmetrics_agreement.py reference``, run in a separate
environment because sdmetrics needs pandas < 3); if ``sdmetrics`` is importable here, the
reference is also recomputed live.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm
from forestgen.metrics.sdmetrics_scores import (
    contingency_similarity,
    correlation_similarity,
    ks_complement,
    tv_complement,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_sdmetrics_agreement as agreement  # noqa: E402


def test_agrees_with_recorded_sdmetrics_output():
    diffs = agreement.differences()
    assert len(diffs) == 6  # 3 tables x (SDMetrics 0.32 thresholds, every pair)
    for name, d in diffs.items():
        for key in ("overall", "column_shapes", "column_pair_trends", "max_column", "max_pair"):
            assert d[key] < 1e-12, (name, key, d[key])


@pytest.mark.skipif(importlib.util.find_spec("sdmetrics") is None,
                    reason="sdmetrics not installed (it needs pandas < 3)")
def test_agrees_with_live_sdmetrics():  # pragma: no cover - depends on the environment
    from sdmetrics.reports.single_table import QualityReport

    real, syn, meta = agreement.read_pair("mixed")
    rep = QualityReport()
    rep.generate(real, syn, meta, verbose=False)
    assert abs(fm.sdmetrics_quality(real, syn, meta).overall - rep.get_score()) < 1e-12


def test_closed_forms():
    assert ks_complement([1.0, 2.0, 3.0, np.nan], [1.0, 2.0, 3.0]) == 1.0
    assert ks_complement([0.0, 1.0], [2.0, 3.0]) == 0.0
    # real {a: .5, b: .5}; synthetic {a: .25, c: .75}; c gets a real count of 1e-6
    tv = tv_complement(["a", "b", "a", "b"], ["a", "c", "c", "c"])
    p_a, p_b, p_c = 2 / (4 + 1e-6), 2 / (4 + 1e-6), 1e-6 / (4 + 1e-6)
    assert tv == pytest.approx(1 - 0.5 * (abs(p_a - .25) + abs(p_b) + abs(p_c - .75)), abs=1e-15)
    x = np.arange(10.0)
    real = pd.DataFrame({"a": x, "b": x})
    syn = pd.DataFrame({"a": x, "b": -x})
    assert correlation_similarity(real, syn) == pytest.approx(0.0)
    assert np.isnan(correlation_similarity(real.assign(b=1.0), syn))  # constant column
    assert np.isnan(correlation_similarity(pd.DataFrame({"a": x, "b": x[::-1] * 0 + x % 2}),
                                           syn, real_correlation_threshold=0.5))
    cat = pd.DataFrame({"a": ["u", "v", "u", None], "b": [1, 2, 1, 2]})
    assert contingency_similarity(cat, cat) == 1.0
    assert contingency_similarity(cat, cat.assign(b=[2, 1, 2, 1])) == pytest.approx(0.0)


def test_quality_scores_rank_a_better_generator_higher():
    rng = np.random.default_rng(0)
    n = 2000
    # bounded support: SDMetrics bins each table on its own range, so heavy tails would move
    # the bin edges between real and synthetic data
    x = rng.uniform(size=n)
    real = pd.DataFrame({"x": x, "y": x + 0.3 * rng.uniform(size=n),
                         "c": np.where(x > 0.5, "hi", "lo")})
    good = real.sample(frac=1.0, replace=True, random_state=1).reset_index(drop=True)
    shuffled = good.copy()
    shuffled["y"] = rng.permutation(shuffled["y"].to_numpy())
    s_good, s_bad = fm.sdmetrics_quality(real, good), fm.sdmetrics_quality(real, shuffled)
    assert s_good.column_shapes == pytest.approx(s_bad.column_shapes)  # same marginals
    assert s_good.column_pair_trends > 0.95 > 0.8 > s_bad.column_pair_trends
    assert s_good.overall == pytest.approx((s_good.column_shapes + s_good.column_pair_trends) / 2)


def test_report_shows_sdmetrics_scores():
    real = pd.DataFrame({"x": np.arange(200.0), "y": np.arange(200.0) * 2,
                         "c": ["a", "b"] * 100})
    rep = fm.report(real, real, metrics=["sdmetrics"])
    assert rep.value("sdmetrics_overall") == 1.0
    assert rep.value("sdmetrics_column_pair_trends") == 1.0
    assert "SDMetrics: overall 1.000" in rep.summary()


def test_bad_metadata_names_the_column():
    real = pd.DataFrame({"x": [1.0, 2.0], "c": ["a", "b"]})
    with pytest.raises(ValueError, match="no entry for column 'c'"):
        fm.sdmetrics_quality(real, real, {"columns": {"x": {"sdtype": "numerical"}}})
