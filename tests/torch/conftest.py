"""Small fitted forests shared by the forestgen.torch tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF, load_adult

# keep adult's numeric columns continuous (truncated-normal leaves) whatever the encoder's
# ordinal-integer threshold is
ADULT_KINDS = {c: "continuous" for c in ("age", "fnlwgt", "capital-gain", "capital-loss",
                                         "hours-per-week")}


@pytest.fixture(scope="session")
def adult_model():
    """ARF on adult without its detected education -> education-num mapping, so that the torch
    paths are compared with the learner's own encoded-row queries (the rules layer on top is
    tested in test_rules_torch.py, on adult too)."""
    kinds = {**ADULT_KINDS, "detect_mappings": False}
    return ARF(n_trees=5, random_state=0).fit(load_adult(n=2000), kinds=kinds).warmup()


@pytest.fixture(scope="session")
def adult_test():
    return load_adult("test", n=1500)


def mixed_frame(n: int = 600, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = 2.0 * x1 + rng.normal(scale=0.5, size=n)
    cat = np.array(["a", "b", "c", "d"])[np.clip((x1 + 2).astype(int), 0, 3)]
    flag = rng.random(n) < 0.3 + 0.4 * (x1 > 0)
    level = rng.integers(0, 5, size=n)
    df = pd.DataFrame({"x1": x1, "x2": x2, "cat": cat, "flag": flag, "level": level})
    df.loc[rng.random(n) < 0.05, "x2"] = np.nan
    df.loc[rng.random(n) < 0.05, "cat"] = None
    return df


@pytest.fixture(scope="session")
def mixed_df():
    return mixed_frame()


@pytest.fixture(scope="session")
def mixed_model(mixed_df):
    return ARF(n_trees=4, random_state=1).fit(mixed_df).warmup()
