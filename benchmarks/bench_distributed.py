"""The Dask path at scale on one machine: a generated table of ``--rows`` rows (10 mixed
columns) is written as Parquet partitions, then fitted (``forestgen.distributed.fit_arf``),
scored (``log_prob``) and sampled (``sample_to_parquet``, as many rows as the table) on a
``LocalCluster`` of worker processes. Reports wall time per phase and peak resident memory of
every worker and of the client (Linux ``VmHWM``, reset before each phase), and checks the
held-out log-likelihood against a single-machine ``ARF`` fitted on a subsample of the same
size as one block.

Appends a row to ``benchmarks/results/distributed.jsonl`` and rewrites
``benchmarks/results/distributed.md`` from it.

    python benchmarks/bench_distributed.py --rows 10000000
    python benchmarks/bench_distributed.py --rows 200000 --workers 2   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

RESULTS = Path(__file__).resolve().parent / "results"


def make_partition(i: int, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows of a 10-column mixed table (6 numeric with a shared factor and a nonlinear
    link, 3 categorical, 1 small integer); partition ``i`` has its own seed."""
    rng = np.random.default_rng([seed, i])
    z = rng.normal(size=n)
    g = rng.choice(np.array(["north", "south", "east", "west"]), size=n, p=[.4, .3, .2, .1])
    shift = np.select([g == "north", g == "south"], [1.0, -1.0], 0.0)
    df = pd.DataFrame({
        "a": z + 0.5 * rng.normal(size=n),
        "b": np.exp(0.5 * z + 0.3 * rng.normal(size=n)),
        "c": shift + 0.8 * rng.normal(size=n),
        "d": np.sin(z) + 0.2 * rng.normal(size=n),
        "e": rng.gamma(2.0, 1.0 + (z > 0), size=n),
        "f": rng.uniform(-1, 1, size=n) + 0.3 * z,
        "region": g,
        "grade": np.where(z + rng.normal(size=n) > 0.5, "high", "low"),
        "kind": rng.choice(np.array(["p", "q", "r"]), size=n),
        "count": np.clip(np.round(3 + 2 * z + rng.normal(size=n)), 0, 12).astype(np.int64),
    })
    df.loc[rng.random(n) < 0.01, "c"] = np.nan
    return df


def _write(i: int, n: int, seed: int, path: str) -> int:
    make_partition(i, n, seed).to_parquet(path, index=False)
    return n


def _reset_peak() -> int:
    """Reset this process's peak RSS (Linux: ``clear_refs`` 5) and return its current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return _status("VmRSS")


def _status(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _peak() -> int:
    return _status("VmHWM")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--rows-per-partition", type=int, default=500_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--blocks", type=int, default=None, help="default min(partitions, trees)")
    ap.add_argument("--min-node-size", type=int, default=20)
    ap.add_argument("--max-iters", type=int, default=1)
    ap.add_argument("--score-partitions", type=int, default=1,
                    help="score (log_prob) the rows of this many partitions")
    ap.add_argument("--memory-limit", default="8GB", help="per worker")
    ap.add_argument("--workdir", default=None, help="where the Parquet data go (temp dir)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from forestgen import distributed as fd
    from forestgen.learners import ARF

    work = Path(args.workdir or tempfile.mkdtemp(prefix="forestgen_dist_"))
    data, synth = work / "table", work / "synthetic"
    for p in (data, synth):
        shutil.rmtree(p, ignore_errors=True)
        p.mkdir(parents=True)
    sizes = [min(args.rows_per_partition, args.rows - s)
             for s in range(0, args.rows, args.rows_per_partition)]
    rec: dict = {"rows": args.rows, "partitions": len(sizes), "workers": args.workers,
                 "trees": args.trees, "min_node_size": args.min_node_size,
                 "max_iters": args.max_iters, "machine": platform.platform(),
                 "note": "shared 2-core machine under load from other jobs; run under nice",
                 "command": "python benchmarks/bench_distributed.py " + " ".join(sys.argv[1:]),
                 "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "load_start": [round(v, 2) for v in os.getloadavg()]}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      memory_limit=args.memory_limit, dashboard_address=":0") as cluster, \
            Client(cluster) as client:

        def phase(name, fn):
            client.run(_reset_peak)
            _reset_peak()
            t0 = time.perf_counter()
            out = fn()
            rec[f"{name}_s"] = round(time.perf_counter() - t0, 1)
            rec[f"{name}_peak_worker_MB"] = [round(v / 2**20) for v in
                                             client.run(_peak).values()]
            rec[f"{name}_peak_client_MB"] = round(_peak() / 2**20)
            print(name, {k: v for k, v in rec.items() if k.startswith(name)}, flush=True)
            return out

        phase("generate", lambda: dask.compute(*[
            dask.delayed(_write)(i, k, args.seed, str(data / f"part-{i:05d}.parquet"))
            for i, k in enumerate(sizes)]))
        ddf = dd.read_parquet(str(data))
        model = phase("fit", lambda: fd.fit_arf(
            ddf, n_trees=args.trees, min_node_size=args.min_node_size,
            max_iters=args.max_iters, random_state=args.seed, n_blocks=args.blocks))
        rec["rounds"] = model.n_rounds_
        rec["oob_accuracy"] = [round(h["oob_accuracy"], 4) for h in model.fit_diagnostics_]
        rec["n_leaves"] = model.forest_.n_leaves
        test = make_partition(10**6, 20_000, args.seed)  # held-out rows, same generator
        k = min(args.score_partitions, ddf.npartitions)
        rec["scored_rows"] = int(sum(sizes[:k]))
        mean_ll = phase("score", lambda: float(
            fd.log_prob(model, ddf.partitions[:k]).mean().compute()))
        rec["train_mean_loglik"] = round(mean_ll, 4)
        rec["heldout_mean_loglik"] = round(float(model.score(test)), 4)
        phase("sample", lambda: fd.sample_to_parquet(model, args.rows, synth,
                                                     rows_per_part=args.rows_per_partition,
                                                     random_state=args.seed))
        rec["synthetic_rows"] = int(len(dd.read_parquet(str(synth))))
    # reference: one machine, one block's worth of rows (what each tree sees)
    block_rows = args.rows // (args.blocks or min(len(sizes), args.trees))
    ref_rows = min(block_rows, 200_000)  # bounded: the reference runs in the client process
    ref_df = pd.concat([make_partition(i, k, args.seed) for i, k in enumerate(sizes)
                        if sum(sizes[:i]) < ref_rows], ignore_index=True).iloc[:ref_rows]
    t0 = time.perf_counter()
    ref = ARF(n_trees=args.trees, min_node_size=args.min_node_size, max_iters=args.max_iters,
              random_state=args.seed, n_jobs=1).fit(ref_df)
    rec["single_machine_rows"] = ref_rows
    rec["single_machine_fit_s"] = round(time.perf_counter() - t0, 1)
    rec["single_machine_heldout_mean_loglik"] = round(float(ref.score(test)), 4)
    shutil.rmtree(work, ignore_errors=True)
    rec["load_end"] = [round(v, 2) for v in os.getloadavg()]
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "distributed.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    write_markdown()
    print(json.dumps(rec, indent=1))


def write_markdown() -> None:
    records = [json.loads(line) for line in
               (RESULTS / "distributed.jsonl").read_text().splitlines() if line.strip()]
    runs = [r for r in records if "unfinished" not in r]
    lines = [
        "# forestgen.distributed on one machine (Dask LocalCluster)",
        "",
        "Generated 10-column mixed table (6 numeric, 3 categorical, 1 integer; 1% missing in one",
        "column) written as Parquet partitions, then `fit_arf` (trees grown on worker processes,",
        "blocks of partitions), `log_prob` of the rows of the first partition(s), and",
        "`sample_to_parquet` of as many rows as the table. Held-out log-likelihood: 20k fresh",
        "rows of the same generator; the single-machine `ARF` (same parameters, `n_jobs=1`) is",
        "fitted on as many rows as one block holds (at most 200k): what each tree of the",
        "distributed fit sees.",
        "Peak memory: Linux VmHWM of each worker process and of the client, reset before each",
        "phase. The machine has 2 cores shared with other jobs and runs were under `nice -n 10`:",
        "times are upper bounds. Re-run with `python benchmarks/bench_distributed.py --rows N`.",
        "",
        "| rows | partitions | workers | trees | min_node_size | rounds | leaves | generate s "
        "| fit s | fit peak per worker MB | client peak MB (fit) | rows scored | score s "
        "| sample s "
        "| sample peak per worker MB | held-out loglik | single machine (rows, loglik, fit s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['rows']:,} | {r['partitions']} | {r['workers']} | {r['trees']} | "
            f"{r['min_node_size']} | {r['rounds']} | {r['n_leaves']:,} | {r['generate_s']} | "
            f"{r['fit_s']} | {r['fit_peak_worker_MB']} | {r['fit_peak_client_MB']} | "
            f"{r.get('scored_rows', r['rows']):,} | {r['score_s']} | {r['sample_s']} | "
            f"{r['sample_peak_worker_MB']} | "
            f"{r['heldout_mean_loglik']} | {r['single_machine_rows']:,}, "
            f"{r['single_machine_heldout_mean_loglik']}, {r['single_machine_fit_s']} |")
    lines += ["", "OOB accuracy per round: " + "; ".join(
        f"{r['rows']:,} rows: {r['oob_accuracy']}" for r in runs), ""]
    noted = [r for r in runs if "load_start" in r]
    if noted:
        lines += ["Commands, dates and load averages (1/5/15 min) at the start and end of a "
                  "run:", ""]
        lines += [f"* {r['rows']:,} rows: `{r['command']}`, {r['date']}, load "
                  f"{' / '.join(map(str, r['load_start']))} -> "
                  f"{' / '.join(map(str, r['load_end']))}" + (f". {r['remark']}"
                                                             if "remark" in r else "")
                  for r in noted]
        lines.append("")
    unfinished = [r for r in records if "unfinished" in r]
    if unfinished:
        lines += ["## Runs that did not finish", ""]
        lines += [f"* {r['rows']:,} rows (`{r['command']}`): {r['unfinished']}" for r in unfinished]
        lines.append("")
    (RESULTS / "distributed.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
