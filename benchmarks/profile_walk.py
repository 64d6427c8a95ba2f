"""Where the fused marginal walk's time goes (issue 15), on one model and NaN rows.

The kernel of :mod:`forestgen.inference.marginal_walk` is recompiled from its own source
with its per-leaf work cut back stage by stage, and each stage is timed (CPU seconds, the
Numba threads of ``--threads``) on the same rows:

* ``walk``: the rows walk the trees (every node and leaf visit), no leaf is scored;
* ``+ weight``: each reached leaf's log weight is read (its record's first cache line);
* ``+ factors``: the leaf is scored on the row's observed columns (``leaf_log_weight``);
* ``full``: the kernel as shipped (running logsumexp; the NaN-marginal ``log_prob``).

The differences between stages are the costs of the parts; times are per scored (row,
leaf) pair, counted by :meth:`ForestArrays.reach`.

    nice -n 10 python benchmarks/profile_walk.py --model /work/m1m.fgm --rows 20000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, md_table, write_result  # noqa: E402

CHILD = r'''
import inspect, json, sys, textwrap, time
import numpy as np, pandas as pd
from numba import njit
args = json.loads(sys.argv[1])
import forestgen.learners  # noqa
from forestgen.base import GenerativeForest
from forestgen.inference import marginal_walk as mw
from forestgen.inference.leaf_factors import leaf_pack
exec(args["table"])
m = GenerativeForest.load(args["path"], max_bytes=2**40)
pack = leaf_pack(m)
q = make_table(args["rows"], seed=1).astype({"i0": float, "i1": float})
rng = np.random.default_rng(2)
for c in q.columns[:-1]:
    q.loc[rng.random(len(q)) < 0.15, c] = np.nan
Z = np.ascontiguousarray(m.encode_rows(q, missing_columns="nan"), np.float64)
Z = Z[np.isnan(Z).any(1)]  # the rows the walk scores
f = m.forest_
pairs = sum(int(np.diff(f.reach(Z[s:s + 2000])[0]).sum()) for s in range(0, len(Z), 2000))
src = textwrap.dedent(inspect.getsource(mw._batch_walk.parallel.py_func))
src = src[src.index("def "):]
score = "v = leaf_log_weight(q, r, xb, ecols[r0 + q], ne[r0 + q], tabs)"
lse = "w, scale = _lse_add(sb, q, v)"
assert score in src and lse in src
cut = "sb[q, 1] += v\n" + " " * 28 + "w, scale = -1.0, 1.0"  # no logsumexp, no moments
stages = {"walk": src.replace(score, "v = 0.0").replace(lse, cut),
          "+ weight": src.replace(score, "v = tabs[0][tabs[3][r]]").replace(lse, cut),
          "+ factors": src.replace(lse, cut),
          "full": src}
none = (np.zeros(0, np.int64),) * 4 + (np.zeros((0, 1)),)
order = np.argsort(f.apply(Z, n_trees=1)[:, 0], kind="stable").astype(np.int64)
import numba
_, bounds = mw.walk_plan(f.n_trees, 0)
out = {"rows": len(Z), "pairs": pairs}
for name, code in stages.items():
    g = dict(vars(mw))
    exec(code, g)
    k = njit(parallel=True, error_model="numpy")(g["_batch_walk"])
    def run(Zr, orr):
        gst = np.empty((len(bounds) - 1, len(Zr), 2))
        gacc = np.empty((len(bounds) - 1, len(Zr), 0))
        k(*mw.walk_rows(Zr[orr]), min(mw.BLOCK, len(Zr)), bounds, numba.get_num_threads(),
          pack.depth, pack.nodes, f.cat_left, f.n_levels, pack.args, gst, gacc, none)
        st = np.zeros((len(Zr), 2))
        mw._fold_groups(gst, gacc, orr, st, np.zeros((len(Zr), 0)))
        return st
    run(Z[:64], np.arange(64, dtype=np.int64))
    t = time.process_time()
    st = run(Z, order)
    out[name] = time.process_time() - t
    if name == "full":
        lp = st[:, 0] + np.log(st[:, 1])
        ref = mw.marginal_log_prob(m, Z)
        out["full equals marginal_log_prob"] = bool(np.array_equal(lp, ref))
print("RESULT " + json.dumps(out), flush=True)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="an ARF model file of bench_walk's table")
    ap.add_argument("--rows", type=int, default=20_000, help="rows drawn (those with NaN kept)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--name", default="profile_walk")
    args = ap.parse_args()
    import bench_walk

    child_src = bench_walk.CHILD
    table = child_src[child_src.index("def make_table"):child_src.index("import forestgen")]
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_NUM_THREADS=str(args.threads))
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(
        {"path": args.model, "rows": args.rows, "table": textwrap.dedent(table)})],
        env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-2000:])
    res = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    n, pairs = res["rows"], res["pairs"]
    names = ["walk", "+ weight", "+ factors", "full"]
    rows, prev = [], 0.0
    for k in names:
        rows.append([k, f"{res[k]:.2f}", f"{n / res[k]:,.0f}", f"{1e9 * res[k] / pairs:.1f}",
                     f"{1e9 * (res[k] - prev) / pairs:.1f}"])
        prev = res[k]
    sections = [
        f"{n:,} rows with missing entries ({pairs / n:,.0f} (row, leaf) pairs per row), "
        f"{args.threads} Numba thread(s), CPU seconds (`time.process_time`); the machine's "
        "load is in the table above. Each stage adds one part of the per-leaf work to the "
        "one before; the last column is what that part costs per pair.",
        md_table(["stage", "CPU s", "rows per CPU-second", "ns per pair", "added ns per pair"],
                 rows),
        f"The full stage equals `marginal_log_prob` bit for bit: "
        f"{res['full equals marginal_log_prob']}.",
    ]
    cmd = "python benchmarks/profile_walk.py " + " ".join(sys.argv[1:])
    print(write_result(args.name, "Where the fused marginal walk's time goes (issue 15)",
                       sections, command=cmd))


if __name__ == "__main__":
    main()
