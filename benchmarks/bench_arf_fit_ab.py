"""ARF fit + FORDE of two forestgen checkouts, many times, interleaved (issue 33): one thread.

``bench_arf_rarf.py`` times one fit per seed and side, which a machine shared with other jobs
moves by 10-30% from one fit to the next. This script times the same fit (the mixed table of
``_arf_side.mixed_table``, ``ARF(n_trees, min_node_size, n_jobs=1, marginal_weight=0)``,
``NUMBA_NUM_THREADS=1``, after a warm-up fit) ``--fits`` times in a child process per side,
and alternates the two sides' children ``--rounds`` times (order flipped every round), so both
see the same load on average. Reports per side the median of all fits' CPU seconds
(``time.process_time``) and the median over rounds of the ratio before / after of the two
children's median fits, and checks that both sides fit the same forest and leaves (a hash of
the fitted arrays per seed). Writes ``results/<--out>.md``.

    python benchmarks/bench_arf_fit_ab.py --src /tmp/after --before /tmp/before --out arf_ab
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import md_table, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent

CHILD = r'''
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
from _arf_side import mixed_table
import forestgen as fg
print("SOURCE " + fg.__file__)
rows, fits, trees, mns = (int(a) for a in sys.argv[2:6])
tr = mixed_table(rows, 0)
for c in ("c0", "c1", "c2"):
    tr[c] = tr[c].astype("category")
kw = dict(n_trees=trees, min_node_size=mns, n_jobs=1, marginal_weight=0.0)
fg.ARF(**kw, random_state=1).fit(tr)  # warm-up: kernels loaded or compiled
cpu, h = [], hashlib.sha256()
for k in range(fits):
    c0 = time.process_time()
    m = fg.ARF(**kw, random_state=k % 3).fit(tr)
    cpu.append(time.process_time() - c0)
    if k < 3:
        for a in (m.forest_.feature, m.forest_.threshold, m.leaf_log_weight_):
            h.update(a.tobytes())
        for lm in m.leaf_models_:
            for v in vars(lm).values():
                if hasattr(v, "tobytes"):
                    h.update(v.tobytes())
print("RESULT " + json.dumps({"cpu": cpu, "hash": h.hexdigest()[:16]}))
'''


def child(src: Path, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # -P: no working directory on sys.path (a checkout's own forestgen/ would shadow src)
    out = subprocess.run([sys.executable, "-P", "-c", CHILD, str(HERE), str(args.rows),
                          str(args.fits), str(args.trees), str(args.min_node_size)],
                         capture_output=True, text=True, env=env, check=True).stdout
    source = [x for x in out.splitlines() if x.startswith("SOURCE ")][-1][len("SOURCE "):]
    if not Path(source).resolve().is_relative_to(src.resolve()):
        raise RuntimeError(f"the child imported forestgen from {source}, not from {src}")
    line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", type=Path, required=True, help="the checkout measured (after)")
    ap.add_argument("--before", type=Path, required=True, help="the checkout compared")
    ap.add_argument("--rows", type=int, default=8000)
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--fits", type=int, default=7, help="timed fits per child")
    ap.add_argument("--rounds", type=int, default=6, help="children per side, interleaved")
    ap.add_argument("--out", default="arf_fit_ab")
    args = ap.parse_args()
    sides = {"after": args.src, "before": args.before}
    runs: dict[str, list[dict]] = {"after": [], "before": []}
    for r in range(args.rounds):
        for name in (("after", "before") if r % 2 == 0 else ("before", "after")):
            runs[name].append(child(sides[name], args))
            print(f"round {r} {name}: median fit "
                  f"{np.median(runs[name][-1]['cpu']):.4f} CPU-s", file=sys.stderr, flush=True)
    hashes = {name: {x["hash"] for x in rs} for name, rs in runs.items()}
    same = len(hashes["after"] | hashes["before"]) == 1
    med = {name: float(np.median([c for x in rs for c in x["cpu"]])) for name, rs in runs.items()}
    ratios = [np.median(b["cpu"]) / np.median(a["cpu"])
              for a, b in zip(runs["after"], runs["before"])]
    rows = [[name, str(sides[name]), len(rs) * args.fits, med[name],
             float(np.min([c for x in rs for c in x["cpu"]]))] for name, rs in runs.items()]
    sections = [
        "## Fit + FORDE, CPU seconds (one thread)",
        md_table(["side", "code", "fits", "median CPU s", "min CPU s"], rows, digits=4),
        f"before / after: **{med['before'] / med['after']:.3f}x** (medians of all fits); "
        f"per round (median fit of each child pair): "
        f"{', '.join(f'{x:.3f}' for x in ratios)}; median {np.median(ratios):.3f}x.",
        f"Same fitted forest and leaves on both sides (hash of the arrays of the first three "
        f"fits, seeds 0-2): **{'yes' if same else 'NO'}** ({sorted(hashes['after'])} / "
        f"{sorted(hashes['before'])}).",
        f"Protocol: mixed table of {args.rows} rows (seed 0; pandas categoricals), "
        f"{args.trees} trees, min_node_size {args.min_node_size}, marginal_weight 0, seeds "
        f"0, 1, 2 in turn; {args.fits} timed fits per child after a warm-up fit; "
        f"{args.rounds} children per side, alternating (order flipped each round).",
    ]
    write_result(args.out, "ARF fit + FORDE, two checkouts interleaved (one thread)", sections)


if __name__ == "__main__":
    main()
