"""The Table 1 benchmark's model selection (benchmarks/bench_nrgboost_table1.py): the per-round
validation curve is the R² of ``truncated(T).predict`` and the shrinkage search finds a maximum."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_nrgboost_table1 import golden, r2, validation_curve  # noqa: E402

from forestgen import NRGBoost  # noqa: E402


def table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    g = rng.choice(["a", "b"], size=n)
    y = np.round(2 * x + (g == "a") + rng.normal(scale=0.5, size=n)).clip(-4, 4).astype(int)
    return pd.DataFrame({"x": x, "g": g, "y": y, "z": x + rng.normal(size=n)})


def test_validation_curve_is_the_truncated_models_r2():
    tr, va = table(300, 0), table(80, 1)
    for target in ("y", "z"):  # an integer target (its levels) and a numeric one (bin means)
        m = NRGBoost(n_trees=6, max_leaves=8, pool_size=2000, n_normaliser_samples=100,
                     random_state=0).fit(tr)
        curve = validation_curve(m, va, target)
        assert len(curve) == m.n_trees_
        y = va[target].to_numpy(float)
        for T in (1, 3, m.n_trees_):
            pred = m.truncated(T).predict(va, target).to_numpy(float)
            assert math.isclose(curve[T - 1], r2(y, pred), abs_tol=1e-9)


def test_golden_section_finds_the_maximum_with_n_evaluations():
    seen = []

    def f(v):
        seen.append(v)
        return -(v - 0.3) ** 2

    golden(f, -2.0, 1.0, 12)
    assert len(seen) == 12
    assert abs(max(seen, key=lambda v: -(v - 0.3) ** 2) - 0.3) < 0.02
