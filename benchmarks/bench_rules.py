"""Logical rules on the demo's table (issue 37): ARF on adult with and without the detected
mappings, at the protocol of ``forestgen demo`` (all 32,561 training rows, 10 trees, seed 0,
as many synthetic rows, the report's C2ST against held-out test rows and TSTR on ``income``).

    python benchmarks/bench_rules.py [--seeds 0,1] [--n-rows N] [--out benchmarks/results/rules.md]

"Without" fits with ``kinds={"detect_mappings": False}`` (the model before the rules); "with"
is the default. Both are scored by :func:`forestgen.metrics.rule_violations` (the mappings that
hold in every real training row) and :func:`forestgen.metrics.report`.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import md_table  # noqa: E402

import forestgen as fg  # noqa: E402
import forestgen.metrics as fm  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(train: pd.DataFrame, test: pd.DataFrame, seed: int, rules: bool) -> dict:
    kinds = None if rules else {"detect_mappings": False}
    c0 = cpu()
    model = fg.ARF(n_trees=10, random_state=seed).fit(train, kinds=kinds)
    synth = model.sample(len(train), random_state=seed)
    fit_sample = cpu() - c0
    rv = fm.rule_violations(train, synth)
    hold = test.sample(min(len(test), len(train)), random_state=0)
    rep = fm.report(train, synth, holdout=hold, target="income", random_state=seed,
                    metrics=["c2st", "tstr"])
    t = rep.table.set_index("metric")["value"]
    ll = model.log_prob(test)
    return {"seed": seed, "rules": "kept" if rules else "off",
            "violation_rate": rv.rate,
            "violations": "; ".join(f"{r.rule}: {r.share:.3f}" for r in rv.table.itertuples()),
            "c2st_auc": float(t["c2st_auc"]),
            "c2st_ci": (float(t["c2st_auc_ci_low"]), float(t["c2st_auc_ci_high"])),
            "tstr_auc": float(t["tstr_auc"]), "trtr_auc": float(t["trtr_auc"]),
            "test_ll": float(np.mean(ll)), "fit_sample_cpu_s": fit_sample}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--n-rows", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/rules.md"))
    ap.add_argument("--from-log", type=Path, default=None,
                    help="write the page from the result lines of an earlier run's output")
    a = ap.parse_args(argv)
    train = fg.load_adult("train", n=a.n_rows, random_state=0)
    test = fg.load_adult("test")
    rows = []
    t0 = time.time()
    if a.from_log:
        import ast
        text = a.from_log.read_text().replace("np.float64(", "(")
        rows = [ast.literal_eval(x) for x in text.splitlines() if x.startswith("{'seed'")]
    for seed in ([] if a.from_log else [int(s) for s in a.seeds.split(",")]):
        for rules in (False, True):
            rows.append(run(train, test, seed, rules))
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    df["c2st_ci"] = [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in df["c2st_ci"]]
    cmd = "python benchmarks/bench_rules.py " + " ".join(argv if argv is not None
                                                          else sys.argv[1:])
    text = ["# Logical rules on adult: the demo's protocol with and without the mappings", "",
            f"Command: `{cmd}` ({time.time() - t0:.0f} s wall). ARF(n_trees=10) on "
            f"{len(train)} training rows, {len(train)} synthetic rows; C2ST against "
            f"held-out test rows, TSTR on income (ROC AUC).", "",
            md_table(list(df.columns), df.to_numpy().tolist(), digits=4), ""]
    a.out.write_text("\n".join(text))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
