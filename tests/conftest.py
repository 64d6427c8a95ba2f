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


def natural_table(n: int = 600, seed: int = 0) -> pd.DataFrame:
    """A small real-shaped table in natural units (diamonds / fair / census-like columns):
    positive skewed floats with 2 decimals, a wide-range integer price, a 1..5 rating, an
    ordered categorical, a zero-inflated float (68% zeros) and a float with 10% NaN."""
    rng = np.random.default_rng(seed)
    carat = np.round(rng.gamma(2.0, 0.35, n) + 0.2, 2)
    levels = ["Fair", "Good", "Very Good", "Premium", "Ideal"]
    cut = pd.Categorical(rng.choice(levels, n, p=[.05, .1, .25, .25, .35]), categories=levels,
                         ordered=True)
    price = np.round(np.exp(8.0 + 1.6 * np.log(carat) + rng.normal(0, 0.3, n))).astype(np.int64)
    rating = np.clip(np.round(3.5 + rng.normal(0, 1, n)), 1, 5).astype(np.int64)
    affairs = np.where(rng.uniform(size=n) < 0.68, 0.0, rng.choice([0.5, 1.0, 3.0, 7.0, 12.0], n))
    weight = rng.lognormal(11, 0.5, n).round(1)
    weight[rng.uniform(size=n) < 0.1] = np.nan
    return pd.DataFrame({"carat": carat, "cut": cut, "price": price, "rating": rating,
                         "affairs": affairs, "weight": weight})


@pytest.fixture(scope="session")
def natural() -> pd.DataFrame:
    return natural_table()


def _registry_doubles() -> set[tuple[str, str]]:
    from forestgen import registry

    return {(kind, name) for kind, names in registry.available().items() for name in names
            if not getattr(registry.get(kind, name), "__module__", "").startswith("forestgen")}


@pytest.fixture(scope="module", autouse=True)
def _registry_left_as_found():
    """A test module leaves no component of its own in the global registry (register test
    doubles with :func:`forestgen.registry.registered`), so test order does not matter."""
    before = _registry_doubles()
    yield
    left = _registry_doubles() - before
    assert not left, f"test doubles left in the registry: {sorted(left)}"
