"""The grower's record fill, record by record against column by column (issue 33, item 3).

``grow_tree`` starts each tree by copying its in-bag rows' codes, label, id and weight into
compact records (``forestgen.tree.grow_impurity``). Until stop 61 the codes were copied column
by column, which writes every record's cache line once per column; now record by record.
This script times, in one process and one thread, the kernel's fill (``after``) and the
column-by-column formulation kept here (``before``) on random uint8 codes of ``--cols``
columns and bootstrap weights, best of ``--reps`` CPU times per size, and checks that both
fill the same records. Writes ``results/<--out>.md``.

    python benchmarks/bench_record_fill.py --rows 8000,128000,1000000,2000000 --out record_fill
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import md_table, write_result  # noqa: E402


@njit(cache=True, nogil=True)
def fill_by_column(Xb, idx, m, y, w, R):
    """The fill before stop 61: each column's codes, then the label, id and weight."""
    codes, weight, ints = R.codes, R.weight, R.ints
    wc, idc, lab = R.wc, R.idc, R.lab
    for j in range(Xb.shape[0]):
        for r in range(m):
            codes[0, r, j] = Xb[j, idx[r]]
    for r in range(m):
        i = idx[r]
        weight[0, r, wc] = w[i]
        ints[0, r, idc] = i
        codes[0, r, lab] = y[i]


def best_ms(fill, args, reps: int) -> float:
    fill(*args)  # compiled and the records' pages touched
    times = []
    for _ in range(reps):
        t = time.process_time()
        fill(*args)
        times.append(time.process_time() - t)
    return 1000.0 * min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="8000,128000,1000000,2000000")
    ap.add_argument("--cols", type=int, default=10)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default="record_fill")
    args = ap.parse_args()
    from forestgen.ensemble.bagging import draw_weights
    from forestgen.tree import grow_impurity as gi

    rows = []
    for n in (int(v) for v in args.rows.split(",")):
        rng = np.random.default_rng(0)
        Xb = rng.integers(0, 255, (args.cols, n)).astype(np.uint8)
        y = rng.integers(0, 2, n)
        w = draw_weights(n, rng)
        idx = np.flatnonzero(w > 0).astype(np.int64)
        ws = gi.workspace(Xb, 2, n, 0)
        R = gi._records(ws.rcodes, args.cols)
        call = (Xb, idx, len(idx), y, w, R)
        before = best_ms(fill_by_column, call, args.reps)
        ref = ws.rcodes[0, :len(idx)].copy()
        after = best_ms(gi._fill_records, call, args.reps)
        same = bool(np.array_equal(ref, ws.rcodes[0, :len(idx)]))
        rows.append([f"{n:,}", len(idx), before, after, before / after, "yes" if same else "NO"])
        print(rows[-1], flush=True)
    table = md_table(["rows", "in-bag records", "column by column, ms", "record by record, ms",
                      "ratio", "same records"], rows, 2)
    note = (f"{args.cols} uint8 columns, bootstrap weights, one thread; best of {args.reps} "
            "CPU times after one untimed fill. The records are "
            f"{ws.rcodes.shape[2]} bytes each (codes, label, id, weight).")
    write_result(args.out, "Record fill of the impurity grower, by column and by record",
                 [table, note])


if __name__ == "__main__":
    main()
