"""AutoForest's CPU seconds with a target, two source trees side by side (issue 37).

    python benchmarks/bench_auto_cpu.py --src before=/tmp/a/before,after=/tmp/a/after \\
        --tables iris,wine,breast_cancer,diabetes --runs 2 --out benchmarks/results/auto_cpu_s54.md

Each cell is a fresh process (``PYTHONPATH`` = the tree, one thread) that fits
``AutoForest(random_state=0)`` on one of scikit-learn's bundled tables (all rows; the target
column named below) after a warm-up fit on 40 rows that loads the compiled kernels; it reports
the fit's CPU seconds and a digest of ``leaderboard_`` (every score but ``cpu_s``) and the
choice, so the trees can be checked to choose the same way from the same scores. The trees run
alternately, table by table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402

#: scikit-learn loader and target column of each table
TABLES = {"iris": ("load_iris", "target"), "wine": ("load_wine", "target"),
          "breast_cancer": ("load_breast_cancer", "target"),
          "diabetes": ("load_diabetes", "target")}

CELL = r"""
import hashlib, json, sys, time, warnings
import numpy as np
import forestgen as fg
from sklearn import datasets
warnings.simplefilter("ignore")
loader, target = sys.argv[1], sys.argv[2]
df = getattr(datasets, loader)(as_frame=True).frame
if loader != "load_diabetes":
    df[target] = df[target].astype(str)
fg.AutoForest(random_state=0).fit(df.sample(40, random_state=0), target=target)
t = time.process_time()
m = fg.AutoForest(random_state=0).fit(df, target=target)
cpu = time.process_time() - t
board = m.leaderboard_.drop(columns=["cpu_s"]).round(9).to_csv(index=False)
print(json.dumps({"cpu": cpu, "best": m.best_name_,
                  "digest": hashlib.sha256(board.encode()).hexdigest()[:12]}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True, help="NAME=TREE,NAME=TREE")
    ap.add_argument("--tables", default=",".join(TABLES))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--cells", type=Path, default=None,
                    help="summarise the JSON cells this file holds (a run's output) instead")
    ap.add_argument("--note", default="", help="Markdown put under the title")
    a = ap.parse_args()
    trees = [s.split("=", 1) for s in a.src.split(",")]
    if a.cells is not None:
        seen = {}  # a run's output prints each cell twice (as it runs, then on the page)
        for x in a.cells.read_text().splitlines():
            if x.startswith("{"):
                c = json.loads(x)
                seen.setdefault((c["run"], c["table"], c["tree"]), c)
        cells = list(seen.values())
        return summarise(a, trees, cells)
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cells = []
    for r in range(a.runs):
        for t in a.tables.split(","):
            loader, target = TABLES[t]
            for name, tree in (trees if r % 2 == 0 else trees[::-1]):
                out = subprocess.run([sys.executable, "-P", "-c", CELL, loader, target],
                                     env={**env, "PYTHONPATH": tree}, capture_output=True,
                                     text=True, check=True)
                res = json.loads(out.stdout.splitlines()[-1])
                cell = {"run": r, "table": t, "tree": name, **res}
                print(json.dumps(cell), flush=True)
                cells.append(cell)
    return summarise(a, trees, cells)


def summarise(a: argparse.Namespace, trees: list, cells: list[dict]) -> int:
    """Write the page: per table the smallest CPU of each tree's runs and every run's."""
    rows = []
    for t in a.tables.split(","):
        per = {n: [c for c in cells if c["table"] == t and c["tree"] == n] for n, _ in trees}
        cpu = {n: min(c["cpu"] for c in v) for n, v in per.items()}
        runs = {n: " / ".join(f"{c['cpu']:.1f}" for c in v) for n, v in per.items()}
        first, second = trees[0][0], trees[1][0]
        same = len({c["digest"] for v in per.values() for c in v}) == 1
        rows.append([t, cpu[first], cpu[second], cpu[first] / cpu[second], runs[first],
                     runs[second],
                     per[first][0]["best"], per[second][0]["best"], "yes" if same else "NO"])
    head = ["table", f"{trees[0][0]} CPU s", f"{trees[1][0]} CPU s", "ratio",
            f"{trees[0][0]} runs", f"{trees[1][0]} runs",
            f"{trees[0][0]} chose", f"{trees[1][0]} chose", "same scores"]
    text = (f"# AutoForest with a target: CPU seconds, {trees[0][0]} vs {trees[1][0]}\n\n"
            + (a.note + "\n\n" if a.note else "")
            + "CPU seconds of one `AutoForest(random_state=0).fit(df, target=...)`: the "
            "smallest of each tree's runs (every run listed); `same scores`: every run of "
            "both trees gave the same `leaderboard_` digest (scores and choice). Cells:\n\n"
            + md_table(head, rows) + "\n\n```\n" + "\n".join(json.dumps(c) for c in cells)
            + "\n```\n")
    a.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
