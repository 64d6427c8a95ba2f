"""Where ARF's wall time goes at one and at two threads (issue 33 item 5): which steps of fit,
FORGE sampling and ``log_prob`` use the second thread and which stay serial.

    python benchmarks/profile_arf_threads.py --rows 32000 --out arf_threads_profile

Each thread count runs in its own process (``NUMBA_NUM_THREADS`` and ``n_jobs`` = T) on the
mixed table of ``bench_arf_rarf.py`` (30 trees, min_node_size 5, 4,000 held-out rows), after a
warm-up that compiles the kernels. The step functions of the ARF module, the grower, FORDE,
the sampler and the likelihood walk are wrapped with wall-clock and process-time timers; a
step called inside another is listed under it (indented), and ``grow one tree`` sums the trees'
wall times over the pool's threads (the grower kernel's calls). The speed-up of a step is its
wall time at one thread over two; a step near 1.0x is serial. Wall times mean something only
on an otherwise idle machine: the load average is written beside them. The warm-up fits and
queries a model of the same size with another seed, so each kernel the timed calls run
(parallel or serial twin: :func:`~forestgen.parallel.sized` picks by size) is compiled or
loaded before the clock starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CELL = r"""
import importlib, json, sys, threading, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, {here!r})
import numpy as np
from _arf_side import mixed_table
from forestgen import ARF

n, T = {n}, {threads}
data = mixed_table(n + 4000, 0)
train, test = data.iloc[:n].reset_index(drop=True), data.iloc[n:].reset_index(drop=True)
warm = ARF(n_trees=30, min_node_size=5, n_jobs=T, marginal_weight=0.0,
           random_state=1).fit(train)  # (full size: every kernel the timed calls run is loaded)
warm.sample(n, random_state=1)
warm.log_prob(test)
del warm
acc, lock = {{}}, threading.Lock()
STEPS = [  # (label, module, attribute); "A.b" is attribute b of class A
    ("encode", "forestgen.base", "GenerativeForest.fit_encoder"),
    ("bin", "forestgen.families.mixture.arf", "Binner.fit"),
    ("bin", "forestgen.families.mixture.arf", "Binner.transform"),
    ("bin", "forestgen.families.mixture.arf", "Binner.fit_transform"),  # (one task per column)
    ("stack codes", "forestgen.families.mixture.arf", "stack_codes"),
    ("grow forest", "forestgen.families.mixture.arf", "grow_forest_routed"),
    # (the kernel, looked up in the module as each forest starts: the same step in checkouts
    # that call ImpuritySplitter.grow per tree and in those that set up once per forest)
    ("grow forest/grow one tree (kernel sum)", "forestgen.splitters.impurity", "grow_tree"),
    ("grow forest/from_trees", "forestgen.tree.arrays", "ForestArrays.from_trees"),
    ("oob accuracy", "forestgen.families.mixture.arf", "oob_accuracy_from_leaves"),
    ("donors", "forestgen.families.mixture.arf", "leafwise_donors"),
    ("forde", "forestgen.families.mixture.arf", "ARF._forde"),
    ("forde/leaf weights", "forestgen.ensemble.base", "Ensembler.leaf_log_weights"),
    ("forde/column boxes", "forestgen.tree.arrays", "ForestArrays.column_boxes"),
    ("forde/fit leaves", "forestgen.base", "GenerativeForest.fit_leaves"),
    ("forde/missing", "forestgen.base", "GenerativeForest._fit_missing"),
    # (queued behind the column fits since stop 53: inside "fit leaves" there)
    ("forde/pack nodes", "forestgen.families.mixture.arf", "pack_nodes"),
    ("leaf draw", "forestgen.sampling.ancestral", "AncestralSampler.draw_leaves"),
    ("column draws", "forestgen.sampling.ancestral", "AncestralSampler.draw"),
    ("support map", "forestgen.base", "rows_to_support"),
    ("constrain", "forestgen.base", "constrain"),
    ("decode", "forestgen.data.encoder", "TableEncoder.inverse_transform"),
    ("encode", "forestgen.base", "GenerativeForest.encode_rows"),
    ("pack build", "forestgen.inference.leaf_factors", "LeafPack.__init__"),
    ("first-tree order", "forestgen.tree.arrays", "ForestArrays.apply"),
    ("walk kernel", "forestgen.inference.marginal_walk", "_batch_walk"),
    ("fold", "forestgen.inference.marginal_walk", "_fold_groups"),
]
phase = ["warm-up"]
def wrap(label, fn):
    def inner(*a, **k):
        c, w = time.process_time(), time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            dw, dc = time.perf_counter() - w, time.process_time() - c
            with lock:
                x = acc.setdefault(phase[0] + "/" + label, [0.0, 0.0, 0])
                x[0] += dw
                x[1] += dc
                x[2] += 1
    return inner
for label, mod, attr in STEPS:
    m = importlib.import_module(mod)
    if "." in attr:
        owner, name = getattr(m, attr.split(".")[0], None), attr.split(".")[1]
    else:
        owner, name = m, attr
    if owner is None or not hasattr(owner, name):
        continue
    raw = owner.__dict__.get(name) if isinstance(owner, type) else None
    if isinstance(raw, classmethod):
        setattr(owner, name, classmethod(wrap(label, raw.__func__)))
    else:
        setattr(owner, name, wrap(label, getattr(owner, name)))
def timed(label, f):
    phase[0] = label
    c, w = time.process_time(), time.perf_counter()
    r = f()
    acc[label] = [time.perf_counter() - w, time.process_time() - c, 1]
    return r
m = timed("fit", lambda: ARF(n_trees=30, min_node_size=5, n_jobs=T, marginal_weight=0.0,
                                     random_state=0).fit(train))
s = timed("sample", lambda: m.sample(n, random_state=0))
lp = timed("log_prob", lambda: m.log_prob(test))
lp2 = timed("log_prob again", lambda: m.log_prob(test))
acc["digest"] = str(hash((np.asarray(lp).tobytes(), s.to_csv(index=False))))
acc["order"] = [label for label, _, _ in STEPS]
print(json.dumps(acc))
"""

ORDER = ["fit", "sample", "log_prob", "log_prob again"]


def cell(n: int, threads: int) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    res = subprocess.run([sys.executable, "-P", "-c", _CELL.format(here=str(HERE), n=n,
                                                            threads=threads)],
                         env=env, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="32000")
    ap.add_argument("--out", default="arf_threads_profile")
    args = ap.parse_args()
    lines = ["# ARF: wall time per step at one and two threads", "",
             f"Command: `python benchmarks/profile_arf_threads.py --rows {args.rows} "
             f"--out {args.out}`", ""]
    for n in (int(r) for r in args.rows.split(",")):
        res, load = {}, {}
        for T in (1, 2):
            load[T] = os.getloadavg()[0]
            res[T] = cell(n, T)
        same = res[1].pop("digest") == res[2].pop("digest")
        steps = res[1].pop("order")
        res[2].pop("order")
        lines += [f"## {n} rows (load average at start: {load[1]:.2f} / {load[2]:.2f}; "
                  f"same results at 1 and 2 threads: {'yes' if same else 'NO'})", "",
                  "| step | calls | wall ms, 1 thread | CPU ms | wall ms, 2 threads | CPU ms | "
                  "speed-up |", "|---|---|---|---|---|---|---|"]
        labels = sorted(set(res[1]) | set(res[2]), key=lambda k: (
            ORDER.index(k.split("/")[0]), k.count("/") > 0,
            steps.index(k.split("/", 1)[1]) if "/" in k else 0))
        for k in labels:
            a, b = res[1].get(k, [0, 0, 0]), res[2].get(k, [0, 0, 0])
            name = ("&nbsp;&nbsp;" * k.count("/")) + k.split("/")[-1]
            lines.append(f"| {name} | {a[2]} | {1e3 * a[0]:.1f} | {1e3 * a[1]:.1f} | "
                         f"{1e3 * b[0]:.1f} | {1e3 * b[1]:.1f} | "
                         f"{a[0] / b[0] if b[0] else float('nan'):.2f}x |")
        lines.append("")
        print("\n".join(lines[-len(labels) - 5:]), flush=True)
    path = HERE / "results" / f"{args.out}.md"
    path.write_text("\n".join(lines))
    print(path)


if __name__ == "__main__":
    main()
