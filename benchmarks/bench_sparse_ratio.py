"""The grower's sparse-histogram ratio in ARF's own fits, in one process (issue 33).

``grow_tree`` builds a node's histogram of a column sparse when the node has fewer rows than
``sparse_ratio`` times the column's bins; any ratio grows the same trees. This script fits
``ARF(n_trees, min_node_size, n_jobs=1, marginal_weight=0)`` on the mixed table of
``_arf_side.mixed_table`` ``--fits`` times per ratio, the ratios taking turns fit by fit (the
order reversed every fit, seeds 0-2 in turn, every ratio on the same seed in a turn), and
reports per ratio the median thread CPU ms of the ``grow_tree`` calls of a fit and of the
whole fit. The same compiled kernel runs every ratio (the ratio is an argument), so no ratio
gains from where its code lies in memory. Writes ``results/<--out>.md``.

    python benchmarks/bench_sparse_ratio.py --ratios 0.25,0.375 --out sparse_ratio
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import md_table, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ratios", default="0.25,0.375")
    ap.add_argument("--rows", type=int, default=8000)
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--fits", type=int, default=20, help="fits per ratio")
    ap.add_argument("--out", default="sparse_ratio")
    args = ap.parse_args()
    import forestgen as fg
    import forestgen.splitters.impurity as imp
    from forestgen.tree import grow_impurity as gi

    ratios = [float(x) for x in args.ratios.split(",")]
    df = mixed_table(args.rows, 0)
    for c in ("c0", "c1", "c2"):
        df[c] = df[c].astype("category")
    kw = dict(n_trees=args.trees, min_node_size=args.min_node_size, n_jobs=1,
              marginal_weight=0.0)
    now = [ratios[0]]
    spent = [0.0]
    rule, tree = gi.grow_rule, imp.grow_tree

    def timed_tree(*a):
        t0 = time.thread_time()
        try:
            return tree(*a)
        finally:
            spent[0] += time.thread_time() - t0

    imp.grow_rule = lambda *a: rule(*a, now[0])
    imp.grow_tree = timed_tree
    try:
        fg.ARF(**kw, random_state=1).fit(df)  # warm-up
        kern = {r: [] for r in ratios}
        fit = {r: [] for r in ratios}
        forests = {}
        for k in range(args.fits):
            for r in (ratios if k % 2 == 0 else ratios[::-1]):
                now[0], spent[0] = r, 0.0
                t0 = time.thread_time()
                m = fg.ARF(**kw, random_state=k % 3).fit(df)
                fit[r].append(time.thread_time() - t0)
                kern[r].append(spent[0])
                if k < 3:
                    forests.setdefault(k, set()).add(
                        (m.forest_.feature.tobytes(), m.forest_.threshold.tobytes()))
    finally:
        imp.grow_rule, imp.grow_tree = rule, tree
    same = all(len(v) == 1 for v in forests.values())
    base = float(np.median(kern[ratios[0]]))
    rows = [[r, len(kern[r]), 1e3 * float(np.median(kern[r])),
             base / float(np.median(kern[r])), 1e3 * float(np.median(fit[r]))] for r in ratios]
    sections = [
        "## grow_tree per fit and the whole fit, thread CPU ms (medians)",
        md_table(["sparse_ratio", "fits", "grow_tree ms", f"vs {ratios[0]}", "fit ms"], rows,
                 digits=3),
        f"Same trees at every ratio (seeds 0-2): **{'yes' if same else 'NO'}**. Mixed table "
        f"of {args.rows} rows, {args.trees} trees, min_node_size {args.min_node_size}, one "
        f"thread; the ratios take turns fit by fit, the order reversed every fit.",
    ]
    write_result(args.out, "Sparse-histogram ratio in ARF's fits (one process, one thread)",
                 sections)


if __name__ == "__main__":
    main()
