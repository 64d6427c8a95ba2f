"""Same results before and after a refactoring: fit small models of all seven learners and dump
their query results (``log_prob``, NaN marginals, samples, conditional samples and
``log_prob``, imputations), or compare two dumps entry by entry.

    PYTHONPATH=<checkout A> python benchmarks/framework_bitcheck.py dump a.npz
    PYTHONPATH=<checkout B> python benchmarks/framework_bitcheck.py dump b.npz
    python benchmarks/framework_bitcheck.py compare a.npz b.npz

scikit-learn's diabetes table (300 rows, ``sex`` as text), 60 query rows with 40% / 30%
missing ``bmi`` / ``sex``; small forests, fixed seeds.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np


def dump(out: str, which: list[str] | None = None) -> None:
    from sklearn.datasets import load_diabetes

    from forestgen.learners import ARF, DEF, EOGT, RFDE, GeF, GFBoost, NRGBoost

    warnings.filterwarnings("ignore")
    df = load_diabetes(as_frame=True).frame.iloc[:300].copy()
    df["sex"] = df["sex"].map(lambda v: "m" if v > 0 else "f")
    rng = np.random.default_rng(0)
    q = df.iloc[:60].copy()
    qn = q.copy()
    qn.loc[rng.random(len(q)) < 0.4, "bmi"] = np.nan
    qn.loc[rng.random(len(q)) < 0.3, "sex"] = np.nan
    learners = {
        "ARF": lambda: ARF(n_trees=5, random_state=0),
        "GeF": lambda: GeF(n_trees=5, random_state=0),
        "RFDE": lambda: RFDE(n_trees=5, random_state=0),
        "DEF": lambda: DEF(n_trees=5, random_state=0),
        "NRGBoost": lambda: NRGBoost(n_trees=5, random_state=0),
        "GFBoost": lambda: GFBoost(n_trees=5, n_iter=40, random_state=0),
        "EOGT": lambda: EOGT(n_trees=5, n_iter=40, random_state=0),
    }
    res = {}
    for name, make in learners.items():
        if which and name not in which:
            continue
        m = make().fit(df, target="sex") if name == "GeF" else make().fit(df)
        res[f"{name}.lp"] = m.log_prob(q)
        res[f"{name}.lpn"] = m.log_prob(qn)
        res[f"{name}.sample"] = m.encoder_.transform(m.sample(50, random_state=1))
        try:
            c = m.sample(20, random_state=2, conditions={"sex": "m"})
            res[f"{name}.csample"] = m.encoder_.transform(c)
            res[f"{name}.clp"] = m.log_prob(q[["age", "bmi", "bp"]], conditions={"sex": "m"})
        except NotImplementedError:
            pass
        try:
            res[f"{name}.impute"] = m.encoder_.transform(m.impute(qn, random_state=3))
        except NotImplementedError:
            pass
        print(name, "done", flush=True)
    np.savez(out, **res)


def compare(a_path: str, b_path: str) -> None:
    a, b = np.load(a_path), np.load(b_path)
    if set(a.files) != set(b.files):
        print("different entries:", sorted(set(a.files) ^ set(b.files)))
    for k in sorted(set(a.files) & set(b.files)):
        x, y = a[k], b[k]
        if np.array_equal(x, y, equal_nan=True):
            print(f"{k:22s} identical")
        elif x.shape != y.shape:
            print(f"{k:22s} shapes {x.shape} / {y.shape}")
        else:
            print(f"{k:22s} max diff {np.nanmax(np.abs(x - y)):.3g}")


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3].split(",") if len(sys.argv) > 3 else None)
    else:
        compare(sys.argv[2], sys.argv[3])
