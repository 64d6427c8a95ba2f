"""Anchored's density queries with and without IndexedLeaf's crossed-pairs table, side by side.

    python benchmarks/bench_anchored_queries.py TABLES_DIR [--rows 32561] [--queries 1000]

Fits ``Anchored()`` (one thread) on ``--rows`` rows of the leaderboard's adult table
(``TABLES_DIR/adult``: ``benchmarks/leaderboard/tables.py``; every row is an anchor), then
times ``log_prob`` and ``predict_proba`` of the income column on ``--queries`` other rows in
two modes of the same fitted model: ``table`` (the default path: pairs kept row by row, each
base leaf law scored once per row) and ``pairs`` (the path before it: pairs sorted by leaf and
each scored on its own, restored by switching :func:`forestgen.leaves.indexed.crossed` off and
the model's ``pairs_in_leaf_order`` on). Prints CPU seconds per mode and query, the ratio, and
whether both modes return the same array bit for bit.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "leaderboard"))
from cell import typed  # noqa: E402

import forestgen.leaves.indexed as indexed  # noqa: E402
from forestgen.learners import Anchored  # noqa: E402


def queries(model, rows, target: str) -> dict:
    out = {}
    t0 = time.process_time()
    out["log_prob"] = (np.asarray(model.log_prob(rows)), time.process_time() - t0)
    t0 = time.process_time()
    pp = model.predict_proba(rows.drop(columns=[target]), target)
    out["predict_proba"] = (np.asarray(pp, float), time.process_time() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("tables", type=Path)
    ap.add_argument("--rows", type=int, default=32561)
    ap.add_argument("--queries", type=int, default=1000)
    a = ap.parse_args()
    meta = json.loads((a.tables / "adult" / "meta.json").read_text())
    df = typed(str(a.tables / "adult" / "full.csv"), meta)
    n_fit = min(a.rows, len(df) - a.queries)
    fit_rows = df.sample(n_fit, random_state=0)
    rest = df.drop(fit_rows.index).sample(a.queries, random_state=1)
    warnings.simplefilter("ignore")
    t0 = time.process_time()
    model = Anchored(random_state=0, n_jobs=1).fit(fit_rows)
    fit_s = time.process_time() - t0
    model.log_prob(rest[:5])  # compile once, outside the timings
    table = queries(model, rest, meta["target"])
    crossed = indexed.crossed
    indexed.crossed = lambda *args: None
    model.pairs_in_leaf_order = True
    try:
        pairs = queries(model, rest, meta["target"])
    finally:
        indexed.crossed = crossed
        del model.pairs_in_leaf_order
    print(f"adult: {n_fit} anchors, {a.queries} query rows; fit {fit_s:.2f} CPU s")
    for q in table:
        same = np.array_equal(table[q][0], pairs[q][0], equal_nan=True)
        print(f"{q:14s} table {table[q][1]:7.2f} s  pairs {pairs[q][1]:7.2f} s  "
              f"ratio {pairs[q][1] / table[q][1]:5.2f}x  "
              f"per row {1000 * table[q][1] / a.queries:.2f} ms  identical={same}")


if __name__ == "__main__":
    main()
