"""ARF fit + FORDE against rows, 8k to 1M (issue 33): growth exponent and peak memory.

The mixed table of ``bench_arf_rarf.py`` with one more continuous column (10 columns: 7
continuous, 3 categorical), ``ARF(n_trees=30, min_node_size=5)``, every size in a fresh
process (``_arf_side.py``: warm-up fit first, so compilation is excluded; peak RSS is the
process's VmHWM, the warm-up's small fit included) with one thread (``n_jobs=1``,
``NUMBA_NUM_THREADS=1``); ``--threads2-rows`` repeats the listed sizes with two threads
(wall-clock speedup and whether the fitted model is the same: held-out log-likelihoods equal
bit for bit). The growth exponent is the least-squares slope of log CPU seconds on log rows;
memory per row is the slope of peak RSS on rows. Writes ``results/<--out>.md``.

    /work/bin/heavy --quiet python benchmarks/bench_arf_scale.py
    # in shards: earlier runs are kept in results/<out>.jsonl
    python benchmarks/bench_arf_scale.py --rows 8000,32000,128000 --threads2-rows 80000
    python benchmarks/bench_arf_scale.py --rows 512000 --threads2-rows ''
    python benchmarks/bench_arf_scale.py --rows 1000000 --threads2-rows '' \
        --report-rows 8000,32000,128000,512000,1000000
    python benchmarks/bench_arf_scale.py --rows 8000,32000 --threads2-rows 32000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import REPO, RESULTS, md_table, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent


def table10(n: int, seed: int):
    df = mixed_table(n, seed)
    rng = np.random.default_rng(seed + 1)
    df.insert(6, "x6", df["x4"] - 0.5 * df["x0"] + 0.5 * rng.standard_normal(n))
    return df


def fit(src: Path, train: Path, test: Path, out: Path, threads: int, trees: int,
        mns: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "NUMBA_NUM_THREADS": str(threads),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, str(HERE / "_arf_side.py"), str(train), str(test),
                          str(out), str(trees), str(mns), "0", "--profile"], env=env,
                         capture_output=True, text=True, timeout=7200)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="8000,32000,128000,512000,1000000")
    ap.add_argument("--threads2-rows", default="80000")
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--src", type=Path, default=REPO)
    ap.add_argument("--out", default="arf_scale")
    ap.add_argument("--report-rows", default=None,
                    help="sizes the report covers, from this run and earlier shards "
                         "(results/<out>.jsonl); default: --rows")
    args = ap.parse_args()
    sizes = [int(x) for x in args.rows.split(",") if x]
    two = [int(x) for x in args.threads2_rows.split(",") if x]
    rows, runs = [], {}
    jsonl = RESULTS / f"{args.out}.jsonl"
    if jsonl.exists():  # earlier shards
        for line in jsonl.read_text().splitlines():
            x = json.loads(line)
            runs[(x["rows"], x["threads"])] = x
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        test = tmp / "test.csv"
        table10(4000, 10_000).to_csv(test, index=False)
        for n in sorted(set(sizes) | set(two)):
            train = tmp / f"train_{n}.csv"
            table10(n, 0).to_csv(train, index=False)
            for threads in [1, 2] if n in two else [1]:
                r = fit(args.src, train, test, tmp / "out.json", threads, args.trees,
                        args.min_node_size)
                runs[(n, threads)] = {**r, "rows": n}
                with open(jsonl, "a") as fh:
                    fh.write(json.dumps(runs[(n, threads)]) + "\n")
                print(n, threads, r["cpu_fit"], r["t_fit"], r["peak_rss_mib"], file=sys.stderr,
                      flush=True)
            train.unlink()
    if args.report_rows:
        sizes = [int(x) for x in args.report_rows.split(",") if x]
    for n in sizes:
        r = runs[(n, 1)]
        st = r["steps"]
        rows.append([f"{n:,}", r["cpu_fit"], r["t_fit"], r.get("peak_rss_fit_mib", np.nan),
                     r["peak_rss_mib"], 1e6 * r["cpu_fit"] / n, st.get("growing", 0.0),
                     st.get("forde", 0.0), st.get("oob", 0.0), st.get("resampling", 0.0),
                     st.get("encoding", 0.0),
                     r["cpu_forge"], r["cpu_lik"], r["rounds"], r["n_leaves"], r["test_ll"]])
    n_arr = np.array(sizes, float)
    cpu = np.array([runs[(n, 1)]["cpu_fit"] for n in sizes])
    rss = np.array([runs[(n, 1)]["peak_rss_mib"] for n in sizes])
    rss_fit = np.array([runs[(n, 1)].get("peak_rss_fit_mib", np.nan) for n in sizes])
    slope = float(np.polyfit(np.log(n_arr), np.log(cpu), 1)[0]) if len(sizes) > 1 else np.nan
    per_row, base = (np.polyfit(n_arr, rss, 1) if len(sizes) > 1 else (np.nan, np.nan))
    fit_row, fit_base = (np.polyfit(n_arr, rss_fit, 1) if len(sizes) > 1
                         and np.isfinite(rss_fit).all() else (np.nan, np.nan))
    pairwise = [f"{sizes[i]:,} -> {sizes[i + 1]:,}: n^"
                f"{np.log(cpu[i + 1] / cpu[i]) / np.log(n_arr[i + 1] / n_arr[i]):.3f}"
                for i in range(len(sizes) - 1)]
    t1 = md_table(["rows", "fit + FORDE CPU s", "wall s", "peak RSS MiB (fit)",
                   "peak RSS MiB (fit and queries)", "CPU µs per row", "growing", "FORDE",
                   "OOB", "resampling", "encoding", "first FORGE of n rows CPU s",
                   "likelihood of 4,000 rows CPU s", "rounds", "leaves", "held-out LL"],
                  rows, digits=2)
    sections = [
        t1,
        f"Growth exponent (least squares, log CPU on log rows, {sizes[0]:,} to {sizes[-1]:,}): "
        f"**n^{slope:.3f}**; between consecutive sizes: {'; '.join(pairwise)}.",
        f"Peak memory of the fit: {fit_row * 2**20:,.0f} bytes per row (least-squares slope "
        f"of the peak RSS after the fit on rows) over {fit_base:,.0f} MiB (interpreter, "
        f"libraries, the warm-up); with the first FORGE and likelihood queries, which build "
        f"their tables (the truncated normals' draw tables, the likelihood's packed leaf "
        f"records) on first use: {per_row * 2**20:,.0f} bytes per row over {base:,.0f} MiB.",
    ]
    if two:
        t2 = []
        for n in two:
            a, b = runs.get((n, 1)), runs[(n, 2)]
            if a is None:
                continue
            t2.append([f"{n:,}", a["t_fit"], b["t_fit"], a["t_fit"] / b["t_fit"], a["cpu_fit"],
                       b["cpu_fit"], a["test_ll"] == b["test_ll"] and a["oob"] == b["oob"]])
        sections += ["Two threads (n_jobs=2, NUMBA_NUM_THREADS=2) against one, same data:",
                     md_table(["rows", "wall s, 1 thread", "wall s, 2 threads", "speedup",
                               "CPU s, 1", "CPU s, 2", "same OOB accuracies and held-out LL "
                               "bits"], t2, digits=2)]
    sections.append(f"Protocol: {args.trees} trees, min_node_size {args.min_node_size}, one "
                    "seed; fit includes the adversarial rounds and FORDE; the step columns are "
                    "CPU seconds (see bench_arf_rarf.py).")
    write_result(args.out, "ARF fit + FORDE against rows (one thread)", sections)


if __name__ == "__main__":
    main()
