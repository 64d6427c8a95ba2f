"""Bundled example data sets."""

from __future__ import annotations

import functools
from importlib import resources

import numpy as np
import pandas as pd

__all__ = ["list_datasets", "load_adult"]

_ADULT_FILES = {"train": "adult.csv.gz", "test": "adult_test.csv.gz"}
_ADULT_INT_COLUMNS = (
    "age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week",
)


def list_datasets() -> list[str]:
    """Names of the bundled data sets."""
    return ["adult"]


@functools.lru_cache(maxsize=4)
def _read_adult(split: str) -> pd.DataFrame:
    ref = resources.files("forestgen.data").joinpath("bundled", _ADULT_FILES[split])
    with ref.open("rb") as fh:
        df = pd.read_csv(
            fh, compression="gzip", na_values=["?"], keep_default_na=False,
            skipinitialspace=True,
        )
    for col in _ADULT_INT_COLUMNS:
        df[col] = df[col].astype(np.int64)
    return df


def load_adult(
    split: str = "train", n: int | None = None, random_state: int | None = None
) -> pd.DataFrame:
    """Load the UCI Adult census data (train: 32561 rows, test: 16281 rows, 15 columns).

    Integer columns are ``int64``; categorical columns use pandas' default string dtype
    (``str`` in pandas >= 3, ``object`` before), with ``"?"`` read as missing (NaN).
    ``n`` draws a subsample of ``n`` rows without replacement; it is reproducible for a
    given ``random_state`` (``None`` means seed 0).
    """
    if split not in _ADULT_FILES:
        raise ValueError(f"unknown split {split!r}; expected one of {sorted(_ADULT_FILES)}")
    df = _read_adult(split).copy()
    if n is not None:
        if not 0 <= n <= len(df):
            raise ValueError(f"n must be between 0 and {len(df)}, got {n}")
        seed = 0 if random_state is None else random_state
        df = df.sample(n=n, random_state=seed).reset_index(drop=True)
    return df
