"""Generative Forests (GF.Boost, EOGT) on the paper's protocols (Nock & Guillame-Bert 2023;
spec ``shared/papers/generative_forests.md`` §5).

* ``lifelike`` (§5.4): 5-fold CV; train on 4 folds, generate as many rows as the test fold, score
  the optimal-transport cost to the test fold (exact EMD and Sinkhorn, ε = 0.05, ground cost =
  L1 on numeric columns standardised with the whole domain's statistics + 0/1 per categorical
  column; :func:`forestgen.metrics.ot_cost`). GF.Boost (T=200, J=500 and T=500, J=2000), EOGT
  (T=200, J=500) and forestgen's ARF (100 trees) on the same folds; paired t-tests against the
  main GF. Domains: the four 2-D Gaussian toys (ring, circ, grid, rand; built as described in
  §5.1 — exact parameters are not in the paper), iris (scikit-learn) and abalone
  (``shared/data/abalone``).
* ``impute`` (§5.3): abalone with 20 % of the cells masked completely at random; models are
  trained on the incomplete table and impute it (transductive, as the reference code). GF.Boost
  for a few (T, J): the paper's back-off walk (``impute(walk="backoff")``, the default:
  max density, also expectation and sampling) and the model's exact conditional
  (``walk="exact"``, which collapses for large forests), ARF (min_node_size=30, conditional
  expectation), scikit-learn's IterativeImputer with random forests (100 trees, 5 rounds; Sex
  as ordinal codes, rounded) and column marginals. perr on Sex, RMSE on numeric columns
  z-scored by their standard deviation (mean over columns).
* ``timing``: fit and sample times of GF.Boost / EOGT with rows and J on abalone.

    python benchmarks/bench_gfboost.py --part lifelike
    python benchmarks/bench_gfboost.py --part impute
    python benchmarks/bench_gfboost.py --part timing
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from _common import data_path, md_table, write_result
from scipy import stats

from forestgen import ARF, EOGT, GFBoost
from forestgen.metrics import ot_cost

# ---------------------------------------------------------------------------- domains


def ring(rng: np.random.Generator, n: int = 1600) -> pd.DataFrame:
    """8 equal spherical Gaussians evenly spaced on a circle (radius 2, σ = 0.2)."""
    k = rng.integers(0, 8, n)
    ang = 2 * np.pi * k / 8
    X = np.c_[2 * np.cos(ang), 2 * np.sin(ang)] + rng.normal(0, 0.2, (n, 2))
    return pd.DataFrame(X, columns=["x", "y"])


def circ(rng: np.random.Generator, n: int = 2200) -> pd.DataFrame:
    """A Gaussian mode (σ = 0.3, 10 % of rows) inside a circle (radius 2, radial σ = 0.1)."""
    c = rng.random(n) < 0.1
    ang = rng.uniform(0, 2 * np.pi, n)
    r = 2 + rng.normal(0, 0.1, n)
    X = np.c_[r * np.cos(ang), r * np.sin(ang)]
    X[c] = rng.normal(0, 0.3, (int(c.sum()), 2))
    return pd.DataFrame(X, columns=["x", "y"])


def grid(rng: np.random.Generator, n: int = 2500) -> pd.DataFrame:
    """25 equal spherical Gaussians on a 5 x 5 grid (spacing 1, σ = 0.1)."""
    k = rng.integers(0, 25, n)
    X = np.c_[k % 5, k // 5].astype(float) + rng.normal(0, 0.1, (n, 2))
    return pd.DataFrame(X, columns=["x", "y"])


def rand(rng: np.random.Generator, n: int = 3800) -> pd.DataFrame:
    """16 Gaussians around a ring with random radii (1-3), weights (Dirichlet(2)) and
    covariances (random rotation, axis σ uniform in 0.05-0.3)."""
    w = rng.dirichlet(np.full(16, 2.0))
    radius = rng.uniform(1, 3, 16)
    ang = 2 * np.pi * np.arange(16) / 16
    k = rng.choice(16, n, p=w)
    out = np.empty((n, 2))
    for c in range(16):
        idx = np.flatnonzero(k == c)
        th = rng.uniform(0, np.pi)
        Rm = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
        L = Rm @ np.diag(rng.uniform(0.05, 0.3, 2))
        out[idx] = radius[c] * np.r_[np.cos(ang[c]), np.sin(ang[c])] + rng.normal(
            size=(len(idx), 2)) @ L.T
    return pd.DataFrame(out, columns=["x", "y"])


def iris() -> pd.DataFrame:
    from sklearn.datasets import load_iris

    b = load_iris(as_frame=True)
    df = b.data.copy()
    df["species"] = pd.Categorical(np.asarray(b.target_names)[b.target])
    return df


def abalone() -> pd.DataFrame:
    df = pd.read_csv(data_path("abalone", "abalone.csv"))
    df["Sex"] = df["Sex"].astype("category")
    return df


def domains(seed: int) -> dict[str, tuple[pd.DataFrame, str | None]]:
    rng = np.random.default_rng(seed)
    return {"ring": (ring(rng), None), "circ": (circ(rng), None), "grid": (grid(rng), None),
            "rand": (rand(rng), None), "iris": (iris(), "species"), "aba": (abalone(), None)}


# paper Table 7 (GF T=500, J=2000; ARF sizes 1-4) and Table A25 (GF T=200, J=500)
PAPER = {"ring": (0.285, 0.283, "0.289 / 0.286 / 0.288 / 0.286"),
         "circ": (0.351, 0.356, "0.354 / 0.356 / 0.350 / 0.355"),
         "grid": (0.390, 0.392, "0.394 / 0.391 / 0.392 / 0.394"),
         "rand": (0.286, 0.290, "0.286 / 0.290 / 0.289 / 0.288"),
         "aba": (0.490, 0.476, "0.505 / 0.484 / 0.503 / 0.481")}


def folds(df: pd.DataFrame, label: str | None, k: int, seed: int):
    from sklearn.model_selection import KFold, StratifiedKFold

    if label is not None:
        return list(StratifiedKFold(k, shuffle=True, random_state=seed).split(df, df[label]))
    return list(KFold(k, shuffle=True, random_state=seed).split(df))


#: the paper's generative forest: uniform cells and the spec's uniform smoothing (GF.Boost's
#: defaults back off toward the column marginals since issue 37; this page reproduces the paper)
PAPER = {"cell_shape": "uniform", "smooth_toward": "uniform", "smoothing": 1e-3}


def models(quick: bool) -> dict[str, callable]:
    big = (200, 500) if quick else (500, 2000)
    return {
        f"GF T={big[0]} J={big[1]}": lambda s: GFBoost(n_trees=big[0], n_iter=big[1],
                                                       random_state=s, **PAPER),
        "GF T=200 J=500": lambda s: GFBoost(n_trees=200, n_iter=500, random_state=s, **PAPER),
        "EOGT T=200 J=500": lambda s: EOGT(n_trees=200, n_iter=500, random_state=s),
        "ARF 100 trees": lambda s: ARF(n_trees=100, random_state=s, n_jobs=1),
    }


def lifelike(args) -> str:
    doms = domains(args.seed)
    names = [d for d in args.domains.split(",")] if args.domains else list(doms)
    makers = models(args.quick)
    main = next(iter(makers))
    rows, detail = [], []
    for name in names:
        df, label = doms[name]
        res = {m: {"emd": [], "sk": [], "fit": [], "sample": []} for m in makers}
        for f, (tr, te) in enumerate(folds(df, label, args.folds, args.seed)):
            train, test = df.iloc[tr], df.iloc[te]
            for mname, make in makers.items():
                t0 = time.perf_counter()
                model = make(args.seed + f).fit(train)
                t1 = time.perf_counter()
                synth = model.sample(len(test), random_state=args.seed + f)
                t2 = time.perf_counter()
                res[mname]["emd"].append(ot_cost(test, synth, reference=df, max_rows=None))
                res[mname]["sk"].append(ot_cost(test, synth, method="sinkhorn", reference=df,
                                                max_rows=None))
                res[mname]["fit"].append(t1 - t0)
                res[mname]["sample"].append(t2 - t1)
                print(f"{name} fold {f} {mname}: emd {res[mname]['emd'][-1]:.4f} "
                      f"sinkhorn {res[mname]['sk'][-1]:.4f} "
                      f"fit {t1 - t0:.1f}s sample {t2 - t1:.1f}s", flush=True)
        for mname in makers:
            e = np.asarray(res[mname]["emd"])
            s = np.asarray(res[mname]["sk"])
            p = (float(stats.ttest_rel(res[main]["emd"], e).pvalue) if mname != main
                 else float("nan"))
            rows.append([name, mname, f"{e.mean():.3f} ± {e.std(ddof=1):.3f}",
                         f"{s.mean():.3f} ± {s.std(ddof=1):.3f}", p,
                         float(np.mean(res[mname]["fit"])), float(np.mean(res[mname]["sample"]))])
        if name in PAPER:
            gf, gf_small, arf = PAPER[name]
            detail.append([name, gf, gf_small, arf])
    table = md_table(["domain", "model", "EMD (mean ± sd, 5 folds)", "Sinkhorn ε=0.05",
                      f"p (paired t, EMD vs {main})", "fit s", "sample s"], rows)
    paper = md_table(["domain", "paper GF T=500 J=2000", "paper GF T=200 J=500",
                      "paper ARF1-4"], detail)
    return "\n\n".join([
        "## lifelike: OT cost of generated vs test fold (lower is better)", table,
        "Paper (Table 7 / A25; Sinkhorn with an unstated ε and cost, R `forge` ARF):", paper,
        "The toys are rebuilt from the paper's one-line descriptions (its parameters are not "
        "published), so only the ordering of the models is comparable with the paper, not the "
        "absolute costs."])


# ---------------------------------------------------------------------------- imputation


def mcar(df: pd.DataFrame, rate: float, rng: np.random.Generator) -> pd.DataFrame:
    out = df.copy()
    mask = rng.random(df.shape) < rate
    for j, c in enumerate(df.columns):
        out[c] = out[c].astype(object) if df[c].dtype.name == "category" else out[c]
        out.loc[mask[:, j], c] = np.nan
    out["Sex"] = pd.Categorical(out["Sex"], categories=df["Sex"].cat.categories)
    return out


def impute_scores(full: pd.DataFrame, masked: pd.DataFrame, imp: pd.DataFrame):
    num = [c for c in full.columns if c != "Sex"]
    m = masked["Sex"].isna().to_numpy()
    perr = float(np.mean(imp["Sex"].astype(str).to_numpy()[m] != full["Sex"].astype(str)
                         .to_numpy()[m]))
    rmse = []
    for c in num:
        mc = masked[c].isna().to_numpy()
        sd = full[c].std()
        rmse.append(math.sqrt(np.mean(((imp[c].to_numpy(float)[mc] - full[c].to_numpy(float)
                                        [mc]) / sd) ** 2)))
    return perr, float(np.mean(rmse))


def iterative_rf(masked: pd.DataFrame, seed: int) -> pd.DataFrame:
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.experimental import enable_iterative_imputer  # noqa: F401
    from sklearn.impute import IterativeImputer

    cats = list(masked["Sex"].cat.categories)
    X = masked.copy()
    X["Sex"] = masked["Sex"].cat.codes.replace(-1, np.nan).astype(float)
    imp = IterativeImputer(RandomForestRegressor(100, random_state=seed, n_jobs=1),
                           max_iter=5, random_state=seed)
    out = pd.DataFrame(imp.fit_transform(X.to_numpy(float)), columns=X.columns)
    codes = np.clip(np.rint(out["Sex"]), 0, len(cats) - 1).astype(int)
    out["Sex"] = pd.Categorical(np.asarray(cats)[codes], categories=cats)
    return out


def marginal(masked: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    out = masked.copy()
    for c in masked.columns:
        m = masked[c].isna().to_numpy()
        obs = masked[c][~m].to_numpy()
        out.loc[m, c] = obs[rng.integers(0, len(obs), int(m.sum()))]
    return out


def imputers(masked: pd.DataFrame, rep: int, rng: np.random.Generator) -> dict:
    """The imputation methods compared, each a no-argument callable returning ``(frame, model
    or None)``."""
    fitted = {}

    def gf(T, J, method="max_density", walk="backoff", **kw):
        key = (T, J, tuple(sorted(kw.items())))
        if key not in fitted:  # one fit per (T, J, options), imputed several ways
            fitted[key] = GFBoost(n_trees=T, n_iter=J, random_state=rep, **PAPER,
                                  **kw).fit(masked)
        m = fitted[key]
        return m.impute(masked, method=method, walk=walk, random_state=rep), m

    cands = {}
    for T, J in [(20, 20), (50, 100), (200, 500)]:
        cands[f"GF T={T} J={J} (back-off walk, max density)"] = lambda T=T, J=J: gf(T, J)
        cands[f"GF T={T} J={J} (back-off walk, expectation)"] = lambda T=T, J=J: gf(
            T, J, "expectation")
        cands[f"GF T={T} J={J} (exact conditional, max density)"] = lambda T=T, J=J: gf(
            T, J, walk="exact")
    cands["GF T=200 J=500 random_hard (back-off walk, max density)"] = lambda: gf(
        200, 500, missing="random_hard")
    cands["GF T=200 J=500 random_hard (exact conditional, max density)"] = lambda: gf(
        200, 500, walk="exact", missing="random_hard")
    cands["GF T=20 J=20 (back-off walk, sample)"] = lambda: gf(20, 20, "sample")
    cands["EOGT T=20 J=20 (max density)"] = lambda: (EOGT(
        n_trees=20, n_iter=20, random_state=rep).fit(masked).impute(
            masked, method="max_density", random_state=rep),
        None)
    cands["ARF min_node_size=30 (expectation)"] = lambda: (ARF(
        min_node_size=30, random_state=rep, n_jobs=1).fit(masked).impute(masked), None)
    cands["IterativeImputer RF(100) x 5"] = lambda: (iterative_rf(masked, rep), None)
    cands["marginal"] = lambda: (marginal(masked, rng), None)
    return cands


def impute_part(args) -> str:
    full = abalone()
    rows = []
    for rep in range(args.repeats):
        rng = np.random.default_rng(args.seed + rep)
        masked = mcar(full, args.rate, rng)
        cands = imputers(masked, rep, rng)
        if args.only:
            cands = {k: v for k, v in cands.items()
                     if any(part in k for part in args.only.split(","))}
        for name, fn in cands.items():
            t0 = time.perf_counter()
            imp, model = fn()
            dt = time.perf_counter() - t0
            perr, rmse = impute_scores(full, masked, imp)
            # cells holding mass per training row (fragments of incomplete rows count): near
            # or above 1, the partition isolates rows
            alone = model.n_cells_ / model.n_train_ if model is not None else float("nan")
            rows.append([rep, name, perr, rmse, alone, dt])
            print(f"rep {rep} {name}: perr {perr:.3f} rmse {rmse:.3f} {dt:.1f}s", flush=True)
    df = pd.DataFrame(rows, columns=["rep", "model", "perr", "rmse", "cells", "s"])
    agg = df.groupby("model", sort=False).agg(perr=("perr", "mean"), perr_sd=("perr", "std"),
                                              rmse=("rmse", "mean"), rmse_sd=("rmse", "std"),
                                              cells=("cells", "mean"),
                                              s=("s", "mean")).reset_index()
    table = md_table(["model", "perr (Sex)", "sd", "RMSE (z-scored numeric)", "sd",
                      "cells / training rows", "seconds (first GF row of a (T, J): with fit)"],
                     agg.values.tolist())
    return "\n\n".join([f"## impute: abalone, {args.rate:.0%} MCAR, {args.repeats} masks "
                        "(lower is better)", table])


# ---------------------------------------------------------------------------- timing


def timing_part(args) -> str:
    full = abalone()
    rows = []
    grid_ = [(1000, 200, 500), (2000, 200, 500), (len(full), 200, 500),
             (len(full), 200, 250), (len(full), 200, 1000), (len(full), 500, 2000)]
    if args.grid:
        grid_ = [tuple(int(v) for v in cell.split(":")) for cell in args.grid.split(",")]
    masked = mcar(full, 0.2, np.random.default_rng(0))
    for n, T, J in grid_:
        df = full.sample(n, random_state=0) if n < len(full) else full
        for cls in (GFBoost, EOGT):
            if args.quick and J > 1000:
                continue
            rows.append(_time_one(cls, df, "complete", T, J))
    for miss in ("fractional", "random_hard") if not args.grid else ():  # 20 % MCAR cells
        rows.append(_time_one(GFBoost, masked, f"20% MCAR, {miss}", 200, 500, missing=miss))
    return "\n\n".join(["## timing: abalone, fit and 1000 samples", md_table(
        ["model", "rows", "table", "T", "J", "fit s", "sample 1000 s", "cells"], rows,
        digits=2)])


def _time_one(cls, df, what, T, J, **kw):
    t0 = time.perf_counter()
    m = cls(n_trees=T, n_iter=J, **(PAPER if cls is GFBoost else {}), **kw).fit(df)
    t1 = time.perf_counter()
    m.sample(1000, random_state=0)
    t2 = time.perf_counter()
    cells = m.n_cells_ if cls is GFBoost else float("nan")
    row = [cls.__name__, len(df), what, T, J, t1 - t0, t2 - t1, cells]
    print(row, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["lifelike", "impute", "timing"], required=True)
    ap.add_argument("--domains", default="", help="comma list (default: all)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="main GF at T=200, J=500 (lifelike); no J > 1000 (timing)")
    ap.add_argument("--rate", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--tag", default="", help="suffix of the results file name")
    ap.add_argument("--only", default="", help="impute: comma list of substrings of the "
                    "method names to run (default: all)")
    ap.add_argument("--grid", default="", help="timing cells rows:T:J,... (default: the full "
                    "grid and the MCAR training rows; rows >= table size: all rows)")
    args = ap.parse_args()
    # warm-up: compile the kernels outside the timings
    warm = ring(np.random.default_rng(0), 200)
    GFBoost(n_trees=3, n_iter=6).fit(warm).sample(5, random_state=0)
    EOGT(n_trees=3, n_iter=6).fit(warm).sample(5, random_state=0)
    ARF(n_trees=2, n_jobs=1).fit(warm).sample(5, random_state=0)
    part = {"lifelike": lifelike, "impute": impute_part, "timing": timing_part}[args.part]
    section = part(args)
    note = ("Machine shared by ~7 concurrent jobs on 2 cores: timings are inflated and noisy; "
            "compare them only within this file.")
    name = f"gfboost_{args.part}" + (f"_{args.tag}" if args.tag else "")
    write_result(name, f"Generative Forests — {args.part}", [note, section])


if __name__ == "__main__":
    main()
