"""NRGBoost single-column inference (Bravo, ICLR 2025, Table 1 and Table 12; spec §7).

R² of ``predict(X, target)`` (conditional mean over bin midpoints, spec §6.2) on abalone (Rings)
and California housing (median house value, sklearn's derived features), K-fold CV with 20% of
each training fold held out for validation, next to XGBoost (``_peer_xgboost.py``, run in the
reference venv). NRGBoost uses the package defaults (256 leaves, shrinkage 0.15, ...) with
the best round picked on validation R² among checkpoints (``NRGBoost.truncated``) instead of
the paper's tuning of max_leaves and shrinkage. Table 12: the same California models with
Longitude missing at test time — NRGBoost marginalises it exactly; XGBoost sees NaN.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import data_path, md_table, write_result  # noqa: E402
from forestgen import NRGBoost  # noqa: E402

PEER = Path(__file__).with_name("_peer_xgboost.py")


def load(name: str) -> tuple[pd.DataFrame, str]:
    if name == "abalone":
        return pd.read_csv(data_path("abalone", "abalone.csv")), "Rings"
    raw = pd.read_csv(data_path("california_housing", "cal_housing.csv"))
    df = pd.DataFrame({
        "MedInc": raw.median_income, "HouseAge": raw.housing_median_age,
        "AveRooms": raw.total_rooms / raw.households,
        "AveBedrms": raw.total_bedrooms / raw.households, "Population": raw.population,
        "AveOccup": raw.population / raw.households, "Latitude": raw.latitude,
        "Longitude": raw.longitude, "MedHouseVal": raw.median_house_value / 1e5})
    return df, "MedHouseVal"


def r2(y, p) -> float:
    return float(1 - np.sum((y - p) ** 2) / np.sum((y - np.mean(y)) ** 2))


def numeric(df: pd.DataFrame, target: str) -> np.ndarray:
    X = df.drop(columns=[target]).copy()
    for c in X.columns:
        if not pd.api.types.is_numeric_dtype(X[c]):
            X[c] = X[c].astype("category").cat.codes
    return X.to_numpy(float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="abalone,california")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--max-folds", type=int, default=None, help="run only the first folds")
    ap.add_argument("--n-trees", type=int, default=200)
    ap.add_argument("--checkpoint", type=int, default=20)
    ap.add_argument("--pool-size", type=int, default=80_000)
    ap.add_argument("--xgb-trials", type=int, default=100)
    ap.add_argument("--peer-python", default="/work/peers/nrgboost/bin/python")
    ap.add_argument("--out", default="nrgboost_table1")
    ap.add_argument("--note", default="", help="a line for the results file (e.g. the load)")
    args = ap.parse_args()
    rows, fold_rows = [], []
    argv = sys.argv[1:]
    if "--note" in argv:  # the note is printed on its own line
        del argv[argv.index("--note"):argv.index("--note") + 2]
    cmd = "python benchmarks/bench_nrgboost_table1.py " + " ".join(argv)

    def save(partial: bool) -> None:  # after every fold: a cut-off run keeps its results
        note = ["**Partial: the run was still going when this was written.**"] if partial else []
        write_result(args.out, "NRGBoost single-column inference (Table 1 / Table 12 protocol)",
                     note + ([args.note] if args.note else []) + [
                         f"Command: `{cmd}`",
                         md_table(["data", "test inputs", "folds", "NRGBoost R²", "XGBoost R²",
                                   "NRGBoost best round (mean)"], rows),
                         "Per fold:",
                         md_table(["data", "fold", "NRGBoost R²", "XGBoost R²",
                                   "NRGBoost R² (Longitude missing)",
                                   "XGBoost R² (Longitude missing)", "best round",
                                   "NRGBoost fit s"], fold_rows)])

    for name in args.datasets.split(","):
        df, target = load(name)
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(df))
        folds = np.array_split(perm, args.folds)
        res = {"nrg": [], "xgb": [], "nrg_miss": [], "xgb_miss": [], "trees": []}
        for k, te_idx in enumerate(folds[: args.max_folds or args.folds]):
            rest = np.setdiff1d(perm, te_idx)
            rest = rest[np.random.default_rng(k).permutation(len(rest))]
            n_va = len(rest) // 5
            va, tr = df.iloc[rest[:n_va]], df.iloc[rest[n_va:]]
            te = df.iloc[te_idx]
            t0 = time.perf_counter()
            m = NRGBoost(n_trees=args.n_trees, random_state=k, pool_size=args.pool_size,
                         n_normaliser_samples=1000).fit(tr)
            fit_s = time.perf_counter() - t0
            best = (-np.inf, m.n_trees_)
            for T in range(args.checkpoint, m.n_trees_ + 1, args.checkpoint):
                score = r2(va[target].to_numpy(float),
                           m.truncated(T).predict(va, target).to_numpy(float))
                if score > best[0]:
                    best = (score, T)
            mb = m.truncated(best[1])
            y = te[target].to_numpy(float)
            res["nrg"].append(r2(y, mb.predict(te, target).to_numpy(float)))
            res["trees"].append(best[1])
            with tempfile.TemporaryDirectory() as tmp:
                job, out = Path(tmp) / "job.npz", Path(tmp) / "out.npz"
                Xte = numeric(te, target)
                if name == "california":
                    Xmiss = Xte.copy()
                    Xmiss[:, list(df.drop(columns=[target]).columns).index("Longitude")] = np.nan
                    Xte = np.vstack([Xte, Xmiss])
                np.savez(job, Xtr=numeric(tr, target), ytr=tr[target].to_numpy(float),
                         Xva=numeric(va, target), yva=va[target].to_numpy(float), Xte=Xte,
                         seed=k, trials=args.xgb_trials)
                subprocess.run([args.peer_python, str(PEER), str(job), str(out)], check=True)
                pred = np.load(out)["pred"]
            res["xgb"].append(r2(y, pred[: len(y)]))
            if name == "california":
                res["xgb_miss"].append(r2(y, pred[len(y):]))
                tm = te.copy()
                tm["Longitude"] = np.nan
                res["nrg_miss"].append(r2(y, mb.predict(tm, target).to_numpy(float)))
            print(name, k, {key: v[-1] for key, v in res.items() if v}, f"fit {fit_s:.0f}s",
                  flush=True)
            fold_rows.append([name, k + 1, res["nrg"][-1], res["xgb"][-1],
                              res["nrg_miss"][-1] if res["nrg_miss"] else float("nan"),
                              res["xgb_miss"][-1] if res["xgb_miss"] else float("nan"),
                              best[1], fit_s])
            save(partial=True)

        def ms(v):
            v = np.asarray(v)
            return f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0:.3f}"

        n = len(res["nrg"])
        rows.append([name, "full data", n, ms(res["nrg"]), ms(res["xgb"]),
                     f"{np.mean(res['trees']):.0f}"])
        if res["nrg_miss"]:
            rows.append([name, "Longitude missing", n, ms(res["nrg_miss"]), ms(res["xgb_miss"]),
                         ""])
    save(partial=False)


if __name__ == "__main__":
    main()
