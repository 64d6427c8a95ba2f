"""The Chain's numeric leaf with and without the column-normal tail (issue 37), on the
leaderboard's splits: C2ST and held-out log-likelihood against the column marginals.

    python benchmarks/bench_chain_tail.py --out benchmarks/results/chain_tail.md

Settings: ``tail`` (``KernelLeaf(tail=...)``, share of the column's normal) and ``min_leaf``,
the other leaf settings at the Chain's defaults (bandwidth factor 0.3, leaf-normal share 0.1).
Per (table, seed): the leaderboard's split (``benchmarks/leaderboard/run.py``: 70/30, at most
500 training rows), the Chain seeded with the seed, as many samples as held-out rows, C2ST AUC
(``forestgen.metrics.c2st``, one thread), mean held-out log-likelihood, and the column
marginals' (the product of one-column 10-tree ARFs, as ``bench_scaled_defaults.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "leaderboard"))
from _common import md_table  # noqa: E402

SETTINGS = ({"tail": 0.0, "min_leaf": 5}, {"tail": 0.03, "min_leaf": 5},
            {"tail": 0.03, "min_leaf": 20})


def main(argv=None) -> int:
    import subprocess

    import run
    from cell import typed

    import forestgen as fg
    import forestgen.metrics as fm
    from forestgen.leaves import KernelLeaf

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", default="iris,airquality,wine,macrodata,penguins")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/forestgen-chain-tail"))
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/chain_tail.md"))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    tables = a.work / "tables"
    if not tables.exists():
        subprocess.run([sys.executable, str(HERE / "leaderboard" / "tables.py"), str(tables)],
                       check=True, capture_output=True)
    rows, load = [], os.getloadavg()[0]
    for name in a.tables.split(","):
        for seed in range(a.seeds):
            d = run.split(tables / name, seed, 500, a.work)
            train, test = typed(d["train"], d["meta"]), typed(d["test"], d["meta"])
            marg = np.zeros(len(test))
            for c in train.columns:
                m1 = fg.ARF(n_trees=10, random_state=0).fit(train[[c]])
                marg += np.asarray(m1.log_prob(test[[c]]), float)
            for s in SETTINGS:
                leaf = KernelLeaf(bandwidth=0.3, defensive=0.1, tail=s["tail"])
                m = fg.Chain(numeric_leaf=leaf, min_leaf=s["min_leaf"],
                             random_state=seed).fit(train)
                synth = m.sample(len(test), random_state=seed + 1)
                auc = fm.c2st(test, synth, kinds=m, random_state=seed, n_threads=1).auc
                rows.append([name, seed, s["tail"], s["min_leaf"], auc, abs(auc - 0.5),
                             float(np.mean(m.log_prob(test))), float(marg.mean())])
                print(rows[-1], flush=True)
    summ = []
    for s in SETTINGS:
        r = [x for x in rows if x[2] == s["tail"] and x[3] == s["min_leaf"]]
        summ.append([s["tail"], s["min_leaf"], float(np.mean([x[5] for x in r])),
                     sum(x[6] < x[7] for x in r), len(r)])
    cmd = "python benchmarks/bench_chain_tail.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    a.out.write_text("\n".join([
        "# The Chain's column-normal tail (issue 37)", "", f"Command: `{cmd}`", "",
        __doc__.split("\n\n", 2)[2].strip(), "",
        f"1-minute load average at the start: {load:.1f} (2 cores, shared).", "",
        "## Summary", "",
        md_table(["tail", "min_leaf", "mean abs(AUC - 0.5)", "cells with held-out LL below "
                  "the marginals", "cells"], summ, digits=3), "",
        "## Cells", "",
        md_table(["table", "seed", "tail", "min_leaf", "c2st", "abs(AUC - 0.5)", "test_ll",
                  "marginal_ll"], rows, digits=3), ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
