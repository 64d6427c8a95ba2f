"""Where the evidence-mass block walk's time goes (issue 15), on one model and narrow evidence.

``log_prob(conditions=)`` needs ``log p(e)``; rows with only intervals and level sets take
:func:`forestgen.inference.evidence_mass._block_kernel`. Its source is recompiled with the
per-leaf work cut back stage by stage, and each stage is timed (CPU seconds, the Numba threads
of ``--threads``) on ``bench_walk.py``'s narrow evidence (``x0`` in a 0.5-wide window, two
levels of ``c0``, ``x2 <= b``):

* ``walk``: the rows walk the trees in blocks (node visits, containment checks), no leaf scored;
* ``+ weight``: each reached leaf's weight ``pi_k`` is read;
* ``+ intervals``: the leaf is scored on the row's intervals (not its level set);
* ``full``: the kernel as shipped (intervals and the level set).

Times are per scored (row, leaf) pair; ``--blocks`` times the full kernel at other block sizes.

    nice -n 10 python benchmarks/profile_evidence.py --model /work/m1m.fgm --rows 200
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
from forestgen.inference import evidence_mass as em
from forestgen.inference.conditions import evidence_from_frame
from forestgen.inference.interval_factors import evidence_arrays
from forestgen.inference.leaf_factors import leaf_pack
from forestgen.inference.marginal_walk import PackedForest, range_evidence
exec(args["table"])
m = GenerativeForest.load(args["path"], max_bytes=2**40)
ev = make_table(args["rows"], seed=3)
cond = pd.DataFrame({"x0": [(a - 0.25, a + 0.25) for a in ev.x0],
                     "c0": [{c, "a"} for c in ev.c0.astype(str)],
                     "x2": [(None, b) for b in ev.x2]}, dtype=object)
e = evidence_from_frame(m, cond)
pack, st, lt, f = leaf_pack(m), em.subtree_tables(m), em.linear_tables(m), m.forest_
X = np.ascontiguousarray(e.point)
ranges = range_evidence(X, evidence_arrays(e, np.arange(e.m)))
order = em._similar_order(ranges.lo, ranges.hi, ranges.smask)
forest = PackedForest(pack.nodes, pack.depth, pack.args, f.cat_left, f.n_levels)
tables = em.RangeTables(st.logw, st.ok, st.full, lt.pi, lt.edge, lt.slot)
def kargs(o, block):
    return (X, o, block, ranges, forest, tables)
src = textwrap.dedent(inspect.getsource(em._block_kernel.parallel.py_func))
src = src[src.index("def "):]
call = src[src.index("w = row_linear_weight("):src.index("if w >= 0.0:")].rstrip()
assert "nsc[q]" in call
stages = {"walk": src.replace(call, "w = 0.0"),
          "+ weight": src.replace(call, "w = tables.pi[r]"),
          "+ intervals": src.replace(call, call.replace("nsc[q]", "0")),
          "full": src}
block = max(1, min(em.BLOCK, -(-len(order) // (4 * args["threads"]))))
out = {"rows": len(order), "block": block}
def timed(k, block):
    k(*kargs(order[:2], block))
    t = time.process_time()
    r, cnt = k(*kargs(order, block))
    return time.process_time() - t, r, cnt
for name, code in stages.items():
    g = dict(vars(em))
    exec(code, g)
    k = njit(parallel=True, error_model="numpy")(g["_block_kernel"])
    out[name], r, cnt = timed(k, block)
    if name == "full":
        out["pairs"] = int(cnt.sum())
        out["full equals evidence_log_mass"] = bool(np.array_equal(
            r, em.evidence_log_mass(m, e)[1]))
for b in args["blocks"]:
    out[f"block {b}"] = timed(em._block_kernel.parallel, b)[0]
print("RESULT " + json.dumps(out), flush=True)
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="an ARF model file of bench_walk's table")
    ap.add_argument("--rows", type=int, default=200, help="evidence rows")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blocks", default="1,16,64", help="block sizes to time the full kernel at")
    ap.add_argument("--name", default="profile_evidence")
    args = ap.parse_args()
    import bench_walk

    child_src = bench_walk.CHILD
    table = child_src[child_src.index("def make_table"):child_src.index("import forestgen")]
    env = dict(os.environ, PYTHONPATH=str(REPO), NUMBA_NUM_THREADS=str(args.threads))
    blocks = [int(b) for b in args.blocks.split(",") if b]
    p = subprocess.run([sys.executable, "-c", CHILD, json.dumps(
        {"path": args.model, "rows": args.rows, "threads": args.threads, "blocks": blocks,
         "table": textwrap.dedent(table)})], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-2000:])
    res = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1][7:])
    n, pairs = res["rows"], res["pairs"]
    rows, prev = [], 0.0
    for k in ("walk", "+ weight", "+ intervals", "full"):
        rows.append([k, f"{res[k]:.2f}", f"{n / res[k]:,.1f}", f"{1e9 * res[k] / pairs:.1f}",
                     f"{1e9 * (res[k] - prev) / pairs:.1f}"])
        prev = res[k]
    brows = [[str(b), f"{res[f'block {b}']:.2f}", f"{n / res[f'block {b}']:,.1f}",
              f"{1e9 * res[f'block {b}'] / pairs:.1f}"] for b in blocks]
    sections = [
        f"{n:,} rows of narrow evidence ({pairs / n:,.0f} scored (row, leaf) pairs per row), "
        f"{args.threads} Numba thread(s), blocks of {res['block']} rows, CPU seconds "
        "(`time.process_time`); the machine's load is in the table above. Each stage adds one "
        "part of the per-leaf work to the one before; the last column is what that part costs "
        "per pair.",
        md_table(["stage", "CPU s", "rows per CPU-second", "ns per pair", "added ns per pair"],
                 rows),
        "The full kernel at other block sizes (rows that walk the trees together):",
        md_table(["block", "CPU s", "rows per CPU-second", "ns per pair"], brows),
        f"The full stage equals `evidence_log_mass` bit for bit: "
        f"{res['full equals evidence_log_mass']}.",
    ]
    cmd = "python benchmarks/profile_evidence.py " + " ".join(sys.argv[1:])
    print(write_result(args.name, "Where the evidence-mass block walk's time goes (issue 15)",
                       sections, command=cmd))


if __name__ == "__main__":
    main()
