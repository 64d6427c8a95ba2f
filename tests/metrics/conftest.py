"""Shared fixtures for forestgen.metrics tests (small adult subsamples)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                 "hours-per-week"]


@pytest.fixture(autouse=True)
def _single_openmp_thread():
    """The test box is small and shared: OpenMP spin-waiting makes tiny HGB fits crawl."""
    import sklearn.ensemble  # noqa: F401  (load sklearn's OpenMP runtime before limiting it)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@pytest.fixture(scope="session")
def adult() -> pd.DataFrame:
    """The bundled UCI adult training split (the same rows as ``shared/data/adult``)."""
    from forestgen.data import load_adult

    return load_adult()


@pytest.fixture(scope="session")
def adult_split(adult: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Disjoint random pieces: real A (4000), fresh real B (4000), holdout H (2000)."""
    idx = np.random.default_rng(0).permutation(len(adult))
    pick = {"A": idx[:4000], "B": idx[4000:8000], "H": idx[8000:10000]}
    return {k: adult.iloc[v].reset_index(drop=True) for k, v in pick.items()}

