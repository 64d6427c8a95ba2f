"""Shared fixtures. Real benchmark data lives in ../shared/data beside the repository."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def toeplitz_cov(d: int, rho: float = 0.9) -> np.ndarray:
    idx = np.arange(d)
    return rho ** np.abs(idx[:, None] - idx[None, :])


@pytest.fixture(scope="session")
def adult_small() -> pd.DataFrame:
    from forestgen.data import load_adult

    return load_adult(n=3000, random_state=0)


@pytest.fixture(scope="session")
def mixed_2d() -> pd.DataFrame:
    """Two correlated Gaussians plus a 3-level categorical whose level shifts the mean."""
    rng = np.random.default_rng(0)
    n = 600
    c = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    shift = pd.Series(c).map({"a": 0.0, "b": 2.0, "c": -2.0}).to_numpy()
    x1 = rng.normal(size=n) + shift
    x2 = 0.8 * x1 + 0.6 * rng.normal(size=n)
    return pd.DataFrame({"x1": x1, "x2": x2, "c": c})
