"""NRGBoost single-column inference (Bravo, ICLR 2025, Table 1 and Table 12; spec §7).

R² of ``predict(X, target)`` (the conditional mean of the target's single-column conditional,
spec §6.2) on abalone (Rings) and California housing (median house value, sklearn's derived
features): 5 folds of a random permutation; 20% of each training fold held out for validation
(spec §7.1-7.2). NRGBoost (spec §3.9 / D.3.6): up to ``--n-trees`` rounds with the best round
picked on validation R² (every round, from cumulative per-tree energies, checked against
``truncated(best).predict``); ``max_leaves`` tried in the order of ``--leaves`` with the
paper's early exit (stop when a value does not improve the best validation R²); the shrinkage
either fixed (``--shrinkage``) or a golden-section search on ``log gamma`` over [0.01, 0.5]
with ``--golden`` evaluations (the paper: 6). XGBoost (``_peer_xgboost.py``, reference venv):
``--xgb-trials`` random-search trials of the spec's §7.3 space. Table 12: the same california
models with Longitude missing at test time — NRGBoost marginalises it exactly (enumeration of
its bins); XGBoost is given NaN (its default branch) and the training mean (the paper's "mean").
"""

from __future__ import annotations

import argparse
import math
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
GAMMA_RANGE = (0.01, 0.5)  # the paper's shrinkage search range (D.3.6)
MISSING = "Longitude"  # Table 12's missing covariate on california


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


def split(n: int, folds: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold ``k``'s (train, validation, test) row indices: test = the k-th of ``folds`` parts
    of a seed-0 permutation, validation = 20% of the rest (a seed-k shuffle)."""
    perm = np.random.default_rng(0).permutation(n)
    te = np.array_split(perm, folds)[k]
    rest = np.setdiff1d(perm, te)
    rest = rest[np.random.default_rng(k).permutation(len(rest))]
    n_va = len(rest) // 5
    return rest[n_va:], rest[:n_va], te


def validation_curve(m: NRGBoost, va: pd.DataFrame, target: str) -> np.ndarray:
    """Validation R² of ``predict`` after every round 1..T (the truncated models' conditional
    means over the target's values), from cumulative per-tree energies of every
    (row, target value) pair: one pass over the trees instead of one model per round."""
    spec = m.schema_.columns[list(m.schema_.names).index(target)]
    j = list(m.schema_.names).index(target)
    C, _ = m.grid_.codes(m.encoder_.transform(va))
    if (np.delete(C, j, axis=1) < 0).any():
        raise ValueError("validation rows with unobserved covariates: use predict")
    nv = int(m.grid_.n_values[j])
    vals = (np.asarray(spec.categories, float) if spec.is_discrete else m.grid_.bin_means(j))
    X = np.repeat(C, nv, axis=0)
    X[:, j] = np.tile(np.arange(nv), len(C))
    e = m.energy_
    logit = e.base_energy(X).reshape(len(C), nv)
    y = va[target].to_numpy(float)
    out = np.empty(m.n_trees_)
    for t in range(m.n_trees_):
        logit += e.tree_energy(X, t, t + 1).reshape(len(C), nv)
        p = np.exp(logit - logit.max(axis=1, keepdims=True))
        out[t] = r2(y, (p @ vals) / p.sum(axis=1))
    return out


def golden(f, lo: float, hi: float, n: int) -> None:
    """Golden-section search for the maximum of ``f`` on ``[lo, hi]`` with ``n`` evaluations
    (``f`` records its own results)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(n - 2):
        if fc >= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)


def tune(tr, va, target, args, seed: int) -> tuple[NRGBoost, int, list[dict]]:
    """The paper's NRGBoost tuning (D.3.6): ``max_leaves`` in order with early exit, the
    shrinkage by golden-section search on its log (or fixed); each candidate's score is its
    best-round validation R². Returns (best model, its best round, every candidate)."""
    tried: list[dict] = []
    best: dict = {"score": -np.inf}

    def evaluate(leaves: int, gamma: float) -> float:
        nonlocal best
        c0 = time.process_time()
        kw = {} if args.refill_trees is None else {
            "refill_trees": None if args.refill_trees == "paper" else int(args.refill_trees)}
        m = NRGBoost(n_trees=args.n_trees, max_leaves=leaves, learning_rate=gamma,
                     pool_size=args.pool_size, p_refresh=args.p_refresh, random_state=seed,
                     n_normaliser_samples=1000, **kw).fit(tr)
        curve = validation_curve(m, va, target)
        rec = {"leaves": leaves, "gamma": gamma, "score": float(curve.max()),
               "round": int(np.argmax(curve)) + 1, "cpu_s": time.process_time() - c0}
        tried.append(rec)
        print(f"  leaves {leaves} gamma {gamma:.4f}: val R² {rec['score']:.4f} at round "
              f"{rec['round']} ({rec['cpu_s']:.0f} CPU s)", flush=True)
        if rec["score"] > best["score"]:
            best = dict(rec, model=m)
        return rec["score"]

    for leaves in args.leaves:
        before = best["score"]
        if args.golden:
            golden(lambda lg, n=leaves: evaluate(n, math.exp(lg)), *np.log(GAMMA_RANGE),
                   args.golden)
        else:
            evaluate(leaves, args.shrinkage)
        if best["score"] <= before:
            break  # the paper's early exit: this leaf count did not improve
    return best["model"], best["round"], tried


def xgboost(args, name, df, target, tr, va, te, k) -> tuple[np.ndarray, float]:
    """XGBoost's test predictions (full rows; on california then Longitude NaN and Longitude
    = training mean) and the search's CPU seconds; NaN when ``--xgb-trials 0``."""
    Xte = numeric(te, target)
    if name == "california":
        col = list(df.drop(columns=[target]).columns).index(MISSING)
        Xnan, Xmean = Xte.copy(), Xte.copy()
        Xnan[:, col] = np.nan
        Xmean[:, col] = tr[MISSING].mean()
        Xte = np.vstack([Xte, Xnan, Xmean])
    if args.xgb_trials == 0:
        return np.full(len(Xte), np.nan), float("nan")
    with tempfile.TemporaryDirectory() as tmp:
        job, out = Path(tmp) / "job.npz", Path(tmp) / "out.npz"
        np.savez(job, Xtr=numeric(tr, target), ytr=tr[target].to_numpy(float),
                 Xva=numeric(va, target), yva=va[target].to_numpy(float), Xte=Xte,
                 seed=k, trials=args.xgb_trials)
        subprocess.run([args.peer_python, str(PEER), str(job), str(out)], check=True)
        got = np.load(out)
        return got["pred"], float(got["cpu_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="abalone,california")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--max-folds", type=int, default=None, help="stop after this fold")
    ap.add_argument("--first-fold", type=int, default=1, help="start at this fold (1-based)")
    ap.add_argument("--n-trees", type=int, default=200)
    ap.add_argument("--leaves", default="64,256,1024,4096",
                    help="max_leaves values, tried in order with early exit")
    ap.add_argument("--golden", type=int, default=6,
                    help="golden-section evaluations of log(shrinkage) in [0.01, 0.5] per "
                         "leaf count; 0 = use --shrinkage")
    ap.add_argument("--shrinkage", type=float, default=0.15)
    ap.add_argument("--pool-size", type=int, default=80_000)
    ap.add_argument("--p-refresh", type=float, default=0.1)
    ap.add_argument("--refill-trees", default=None,
                    help="NRGBoost refill_trees: an int, or 'paper' (None: the paper's refill); "
                         "default: the learner's default")
    ap.add_argument("--xgb-trials", type=int, default=100, help="0 = no XGBoost")
    ap.add_argument("--peer-python", default="/work/peers/nrgboost/bin/python")
    ap.add_argument("--out", default="nrgboost_table1")
    ap.add_argument("--note", default="", help="a line for the results file (e.g. the load)")
    args = ap.parse_args()
    args.leaves = [int(v) for v in args.leaves.split(",")]
    argv = sys.argv[1:]
    if "--note" in argv:  # the note is printed on its own line
        del argv[argv.index("--note"):argv.index("--note") + 2]
    cmd = "python benchmarks/bench_nrgboost_table1.py " + " ".join(argv)
    rows, fold_rows, cand_rows = [], [], []

    def save(partial: bool) -> None:  # after every fold: a cut-off run keeps its results
        note = ["**Partial: the run was still going when this was written.**"] if partial else []
        write_result(args.out, "NRGBoost single-column inference (Table 1 / Table 12 protocol)",
                     note + ([args.note] if args.note else []) + [
                         md_table(["data", "test inputs", "folds", "NRGBoost R²", "XGBoost R²",
                                   "XGBoost R² (Longitude = training mean)"], rows),
                         "Per fold (NRGBoost: the selected candidate; CPU s = all its fits):",
                         md_table(["data", "fold", "NRGBoost R²", "XGBoost R²",
                                   "NRGBoost R² (Longitude missing)",
                                   "XGBoost R² (Longitude NaN)", "XGBoost R² (Longitude mean)",
                                   "max_leaves", "shrinkage", "best round", "NRGBoost CPU s",
                                   "XGBoost CPU s"], fold_rows),
                         "Every NRGBoost candidate (validation R² at its best round):",
                         md_table(["data", "fold", "max_leaves", "shrinkage", "val R²",
                                   "best round", "CPU s"], cand_rows)],
                     command=cmd)

    def ms(v) -> str:
        v = np.asarray(v)
        if np.isnan(v).all():
            return "not run"
        return f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0:.3f}"

    for name in args.datasets.split(","):
        df, target = load(name)
        res: dict[str, list] = {"nrg": [], "xgb": [], "nrg_miss": [], "xgb_nan": [],
                                "xgb_mean": []}
        for k in range(args.first_fold - 1, args.max_folds or args.folds):
            tr_i, va_i, te_i = split(len(df), args.folds, k)
            tr, va, te = df.iloc[tr_i], df.iloc[va_i], df.iloc[te_i]
            print(name, "fold", k + 1, flush=True)
            model, best_round, tried = tune(tr, va, target, args, seed=k)
            mb = model.truncated(best_round)
            chosen = max(tried, key=lambda r: r["score"])
            y = te[target].to_numpy(float)
            pv = mb.predict(va, target).to_numpy(float)  # the curve's figure, by predict
            assert abs(r2(va[target].to_numpy(float), pv) - chosen["score"]) < 1e-6
            res["nrg"].append(r2(y, mb.predict(te, target).to_numpy(float)))
            cand_rows += [[name, k + 1, r["leaves"], r["gamma"], r["score"], r["round"],
                           r["cpu_s"]] for r in tried]
            c0 = time.perf_counter()
            pred, xgb_cpu = xgboost(args, name, df, target, tr, va, te, k)
            n = len(y)
            res["xgb"].append(r2(y, pred[:n]))
            if name == "california":
                res["xgb_nan"].append(r2(y, pred[n:2 * n]))
                res["xgb_mean"].append(r2(y, pred[2 * n:3 * n]))
                tm = te.copy()
                tm[MISSING] = np.nan
                res["nrg_miss"].append(r2(y, mb.predict(tm, target).to_numpy(float)))
            nan = float("nan")
            last = {key: v[-1] for key, v in res.items() if v}
            print(name, k + 1, last, f"xgb {time.perf_counter() - c0:.0f}s", flush=True)
            fold_rows.append([name, k + 1, last["nrg"], last["xgb"], last.get("nrg_miss", nan),
                              last.get("xgb_nan", nan), last.get("xgb_mean", nan),
                              chosen["leaves"], chosen["gamma"], best_round,
                              sum(r["cpu_s"] for r in tried), xgb_cpu])
            save(partial=True)
        n = len(res["nrg"])
        rows.append([name, "full data", n, ms(res["nrg"]), ms(res["xgb"]), ""])
        if res["nrg_miss"]:
            rows.append([name, f"{MISSING} missing", n, ms(res["nrg_miss"]),
                         ms(res["xgb_nan"]) + " (NaN)", ms(res["xgb_mean"])])
    save(partial=False)


if __name__ == "__main__":
    main()
