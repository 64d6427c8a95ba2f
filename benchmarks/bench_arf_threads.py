"""ARF at one and two threads (issue 33 item 5): wall and CPU seconds of fit, FORGE sampling
and ``log_prob``, and whether the results are the same bits.

Each (rows, threads) cell runs in its own process (``NUMBA_NUM_THREADS`` and ``n_jobs`` set to
the thread count), after a warm-up that makes every timed call once on a model fitted to the
same rows with another seed, so each kernel the timed calls run (parallel or serial twin, every
signature) is compiled or loaded from the cache before the clock starts.
The table is the mixed table of ``bench_arf_rarf.py`` (6 continuous, 3 categorical columns), 30
trees, min_node_size 5. Timed: the fit; the model's first ``log_prob`` (4,000 held-out rows,
which builds the packed leaf records: since stop 60 the fit does not); then, for each query
size ``q`` of ``--queries``, ``sample(q)`` and ``log_prob`` of ``q`` held-out rows, and for
each ``q`` of ``--extra``, ``predict_proba`` of ``c0`` and ``expect`` of ``x0`` given the other
columns of ``q`` training rows (evidence inside the support), each the median of ``--reps``
calls; the fit is the median of ``--fit-reps``
fits (the last one's model is queried). Wall and CPU seconds from
``time.perf_counter`` and ``time.process_time``. The speed-up is wall time at one thread over
wall time at two; it only means something on an otherwise idle machine, so the load average
is written beside it.

    python benchmarks/bench_arf_threads.py --rows 32000,80000 --queries 4000,40000 --out arf_threads
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CELL = """
import hashlib, json, sys, time, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, {here!r})
import numpy as np
from _arf_side import mixed_table
from forestgen import ARF

n, T, queries, reps, fit_reps = {n}, {threads}, {queries!r}, {reps}, {fit_reps}
extra = {extra!r}
data = mixed_table(n + max(queries + [4000]), 0)
train, test = data.iloc[:n].reset_index(drop=True), data.iloc[n:].reset_index(drop=True)
warm = ARF(n_trees=30, min_node_size=5, n_jobs=T, marginal_weight=0.0, random_state=1).fit(train)
warm.log_prob(test.iloc[:4000])
for q in queries:
    warm.sample(q, random_state=1)
    warm.log_prob(test.iloc[:q])
for q in extra:
    warm.predict_proba(train.iloc[:q].drop(columns="c0"), target="c0")
    warm.expect(columns=["x0"], conditions=train.iloc[:q].drop(columns=["x0"]))
del warm
out, digest = {{}}, hashlib.sha256()
def timed(name, f, k=1):
    runs = []
    for _ in range(k):
        c, w = time.process_time(), time.perf_counter()
        r = f()
        runs.append((time.process_time() - c, time.perf_counter() - w))
    out[name] = [float(np.median([x[0] for x in runs])), float(np.median([x[1] for x in runs]))]
    return r
m = timed("fit", lambda: ARF(n_trees=30, min_node_size=5, n_jobs=T, marginal_weight=0.0,
                                     random_state=0).fit(train), fit_reps)
lp = timed("log_prob first", lambda: m.log_prob(test.iloc[:4000]))
digest.update(np.asarray(lp).tobytes())
out["held_out_ll"] = float(np.mean(lp))
for q in queries:
    s = timed(f"sample {{q}}", lambda: m.sample(q, random_state=0), reps)
    digest.update(s.to_csv(index=False).encode())
    lq = timed(f"log_prob {{q}}", lambda: m.log_prob(test.iloc[:q]), reps)
    digest.update(np.asarray(lq).tobytes())
for q in extra:  # (training rows as evidence: inside the support)
    pp = timed(f"predict_proba {{q}}", lambda: m.predict_proba(
        train.iloc[:q].drop(columns="c0"), target="c0"), reps)
    digest.update(np.ascontiguousarray(pp.to_numpy(float)).tobytes())
    ex = timed(f"expect {{q}}", lambda: m.expect(
        columns=["x0"], conditions=train.iloc[:q].drop(columns=["x0"])), reps)
    digest.update(np.ascontiguousarray(np.asarray(ex, float)).tobytes())
out["digest"] = digest.hexdigest()[:16]
print(json.dumps(out))
"""


def cell(n: int, threads: int, queries: list[int], reps: int, fit_reps: int = 1,
         extra: list[int] | None = None) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-P", "-c", _CELL.format(
        here=str(HERE), n=n, threads=threads, queries=queries, reps=reps, fit_reps=fit_reps,
        extra=extra or [])],
        env=env, capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="32000,80000")
    ap.add_argument("--queries", default="4000,40000")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fit-reps", type=int, default=1, help="fits timed per cell (median)")
    ap.add_argument("--extra", default="", help="row counts for predict_proba (target c0) "
                    "and expect (x0 given the rest), training rows as evidence")
    ap.add_argument("--out", default="arf_threads")
    args = ap.parse_args()
    queries = [int(q) for q in args.queries.split(",") if q]
    extra = [int(q) for q in args.extra.split(",") if q]
    steps = ["fit", "log_prob first"] + [f"{k} {q}" for q in queries
                                         for k in ("sample", "log_prob")] + [
        f"{k} {q}" for q in extra for k in ("predict_proba", "expect")]
    lines = ["# ARF at one and two threads", "",
             f"Command: `python benchmarks/bench_arf_threads.py --rows {args.rows} "
             f"--queries {args.queries} --reps {args.reps} --fit-reps {args.fit_reps} "
             f"{' --extra ' + args.extra if extra else ''} --out {args.out}`", "",
             f"CPU s (wall s) per step; `fit` is the median of {args.fit_reps} fits; `log_prob "
             "first` is the (last) model's first query (4,000 rows; the fit built the packed "
             f"leaf records); the other queries are medians of {args.reps} calls.", "",
             "| rows | threads | load avg (1 min) at start | "
             + " | ".join(steps) + " | same bits as 1 thread | held-out LL |",
             "|" + "---|" * (len(steps) + 5)]
    speed = []
    for n in (int(r) for r in args.rows.split(",")):
        res = {}
        for T in (1, 2):
            load = os.getloadavg()[0]
            res[T] = cell(n, T, queries, args.reps, args.fit_reps, extra)
            r = res[T]
            fmt = [f"{r[k][0]:.4f} ({r[k][1]:.4f})" for k in steps]
            lines.append(f"| {n} | {T} | {load:.2f} | {' | '.join(fmt)} | "
                         f"{'yes' if r['digest'] == res[1]['digest'] else 'NO'} | "
                         f"{r['held_out_ll']:.4f} |")
            print(lines[-1], flush=True)
        speed.append(f"{n} rows: wall time 1 thread / 2 threads: " + ", ".join(
            f"{k} {res[1][k][1] / res[2][k][1]:.2f}x" for k in steps))
    lines += ["", *[f"- {s}" for s in speed], ""]
    path = HERE / "results" / f"{args.out}.md"
    path.write_text("\n".join(lines))
    print("\n".join(speed))
    print(hashlib.sha256(path.read_bytes()).hexdigest()[:8], path)


if __name__ == "__main__":
    main()
