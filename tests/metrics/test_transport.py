"""Optimal-transport cost (lifelike metric): closed forms on small tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen.metrics import ground_cost, ot_cost


def test_identical_tables_cost_nothing():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=40), "c": rng.choice(list("abc"), 40)})
    assert ot_cost(df, df.sample(frac=1.0, random_state=1)) == pytest.approx(0.0, abs=1e-12)


def test_shift_costs_shift_over_std_and_categories_cost_one():
    rng = np.random.default_rng(1)
    x = rng.normal(size=60)
    real = pd.DataFrame({"x": x, "c": ["a"] * 60})
    fake = pd.DataFrame({"x": x + 0.7, "c": ["b"] * 60})
    # a translation is transported row to row; every categorical entry differs
    assert ot_cost(real, fake) == pytest.approx(0.7 / x.std() + 1.0, rel=1e-9)
    sk = ot_cost(real, fake, method="sinkhorn", epsilon=0.01)
    assert ot_cost(real, fake) - 1e-9 <= sk <= ot_cost(real, fake) + 0.05


def test_ground_cost_and_bad_method():
    x = np.arange(12.0)
    real = pd.DataFrame({"x": x, "c": ["a", "b"] * 6})
    M = ground_cost(real, real)
    assert M[0, 1] == pytest.approx(1.0 / x.std() + 1.0)
    assert M[0, 2] == pytest.approx(2.0 / x.std())
    with pytest.raises(ValueError, match="method"):
        ot_cost(real, real, method="wasserstein")
