"""Leaderboard cells of the diffusion peers at their default training, on a GPU machine (issue 37).

On this project's 2-core CPU machine TabSyn, TabDiff and CDTD at their defaults cost thousands of
CPU seconds per table, so the leaderboard runs them at 2-5% of their training (``run.py``). Where
a GPU machine is lent, this script runs them at their defaults there, in three steps:

    # here: the splits (the same as run.py's) and the job list, into a bundle folder
    python benchmarks/leaderboard/gpu_cells.py prepare --tables-dir TABLES --bundle .gpu \\
        --seeds 3 --max-train 500 --generators synthyverse:tabddpm,synthyverse:tabsyn,...
    # there (no package registry: synthyverse and its missing dependencies carried as wheels
    # and installed into SITE): every cell through run.py's run_cell, several at once on the GPU
    python benchmarks/leaderboard/gpu_cells.py run --bundle .gpu --site /tmp/site --out $OUT \\
        --workers 12 --deadline 450
    # here: score the samples with the leaderboard's code into run.py's record format
    python benchmarks/leaderboard/gpu_cells.py score --bundle .gpu --results DIR --out FILE.jsonl

Jobs run in the bundle's order (seed 0 of every table and generator first), so a run stopped
at its deadline has covered the most tables; a cell not finished by then is recorded as
``stalled``. Each cell records its host CPU seconds (``cpu_s``) and wall seconds (``wall_s``,
with ``workers`` cells sharing the GPU); the page says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402

#: run.py's per-cell limit is CPU seconds; a GPU cell's host process spends about its wall time
#: launching kernels, so the limit is the deadline (the backstop never binds first).
CELL_LIMIT_S = 3000.0


def prepare(a: argparse.Namespace) -> None:
    bundle = a.bundle.resolve()
    (bundle / "splits").mkdir(parents=True, exist_ok=True)
    peers = {g[0]: g for g in run.PEER_GENERATORS}
    gens = [peers[g] for g in a.generators.split(",")]
    tables = a.tables.split(",")
    jobs = []
    for seed in range(a.seeds):
        for t in tables:
            data = run.split(a.tables_dir / t, seed, a.max_train, bundle / "splits")
            for name, env, _quick, full in gens:  # the defaults: run.py's full-mode params
                jobs.append({"generator": name, "env": env, "params": full, "table": t,
                             "seed": seed, "meta": data["meta"], "n_train": data["n_train"],
                             "n_test": data["n_test"],
                             "train": str(Path(data["train"]).relative_to(bundle)),
                             "test": str(Path(data["test"]).relative_to(bundle))})
    (bundle / "jobs.json").write_text(json.dumps(jobs))
    print(f"{len(jobs)} jobs in {bundle}")


def _python_wrapper(root: Path, env: str, python: str, site: str | None) -> None:
    """``ROOT/ENV/bin/python``: ``python`` with the carried packages first."""
    b = root / env / "bin"
    b.mkdir(parents=True, exist_ok=True)
    path = f'{site}:' if site else ""
    (b / "python").write_text(f'#!/bin/sh\nPYTHONPATH="{path}$PYTHONPATH" exec '
                              f'{python} "$@"\n')
    (b / "python").chmod(0o755)


def _device() -> str:
    import shutil

    if shutil.which("nvidia-smi") is None:
        return "no GPU found (nvidia-smi absent)"
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "no GPU found"


def run_jobs(a: argparse.Namespace) -> None:
    t_end = time.monotonic() + a.deadline
    bundle = a.bundle.resolve()
    jobs = json.loads((bundle / "jobs.json").read_text())
    root = bundle / "peers"
    for env in {j["env"] for j in jobs}:
        _python_wrapper(root, env, a.python, a.site)
    device = _device()
    print(f"device: {device}; {len(jobs)} jobs, {a.workers} at once, deadline {a.deadline} s",
          flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    done_dirs, records = [], []

    def one(j: dict) -> dict:
        data = {"meta": j["meta"], "train": str(bundle / j["train"]),
                "test": str(bundle / j["test"]), "n_train": j["n_train"], "n_test": j["n_test"]}
        rec = run.run_cell(j["generator"], j["env"], j["params"], data, j["seed"], root,
                           bundle / "splits", CELL_LIMIT_S)
        rec.update(device=device, workers=a.workers)
        return rec

    with ThreadPoolExecutor(a.workers) as pool, open(a.out / "cells.jsonl", "w") as fh:
        pending = {pool.submit(one, j): j for j in jobs}
        while pending and time.monotonic() < t_end:
            finished, _ = wait(pending, timeout=max(0.0, t_end - time.monotonic()),
                               return_when=FIRST_COMPLETED)
            for f in finished:
                j = pending.pop(f)
                rec = f.result()
                records.append(rec)
                fh.write(json.dumps(rec, default=str) + "\n")
                fh.flush()
                if rec["status"] == "ok":
                    done_dirs.append(Path(rec["synth"]).parent)
                print(f"{time.monotonic() - t_end + a.deadline:6.0f}s {j['table']:14s} "
                      f"s{j['seed']} {j['generator']:22s} {rec['status']:8s} "
                      f"wall={rec.get('wall_s', 0):.0f} cpu={rec.get('cpu_s', 0):.0f} "
                      f"{rec.get('error', '')[:100]}", flush=True)
        for j in pending.values():
            rec = {"generator": j["generator"], "table": j["table"], "seed": j["seed"],
                   "params": j["params"], "n_train": j["n_train"], "n_test": j["n_test"],
                   "status": "stalled", "device": device, "workers": a.workers,
                   "error": f"not finished within the run's {a.deadline:.0f} s deadline"}
            fh.write(json.dumps(rec) + "\n")
        fh.flush()
        with tarfile.open(a.out / "samples.tar.gz", "w:gz") as tar:
            for d in done_dirs:
                for name in ("synth.csv", "result.json"):
                    if (d / name).exists():
                        tar.add(d / name, arcname=str((d / name).relative_to(bundle)))
        print(f"{len(records)} cells done, {len(pending)} left at the deadline", flush=True)
        os._exit(0)  # cells still running are abandoned (the machine ends them)


def score_results(a: argparse.Namespace) -> None:
    bundle = a.bundle.resolve()
    with tarfile.open(a.results / "samples.tar.gz") as tar:
        tar.extractall(bundle, filter="data")
    out = []
    for line in (a.results / "cells.jsonl").read_text().splitlines():
        rec = json.loads(line)
        j = {"train": str(bundle / "splits" / f"{rec['table']}_s{rec['seed']}" / "train.csv"),
             "test": str(bundle / "splits" / f"{rec['table']}_s{rec['seed']}" / "test.csv")}
        meta = json.loads((a.tables_dir / rec["table"] / "meta.json").read_text())
        data = {"meta": meta, "n_train": rec["n_train"], "n_test": rec["n_test"], **j}
        if rec["status"] == "ok":
            rec["synth"] = str(bundle / Path(rec["synth"]).relative_to(
                Path(rec["synth"]).parents[3]))
            run.score(rec, data, rec["seed"])
        rec.update(train=data["train"], test=data["test"], meta_full=meta, commit=a.commit,
                   split_version=run.SPLIT_VERSION)
        rec["table_meta"] = {k: meta[k] for k in
                             ("rows", "target", "task", "source", "tests", "nan_rate")}
        out.append(rec)
        print(f"{rec['table']:14s} s{rec['seed']} {rec['generator']:22s} {rec['status']:8s} "
              f"c2st={rec.get('c2st_auc', float('nan')):.3f}", flush=True)
    a.out.write_text("".join(json.dumps(r, default=str) + "\n" for r in out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--tables-dir", type=Path, required=True)
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--tables", required=True)
    p.add_argument("--generators", required=True)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--max-train", type=int, default=500)
    r = sub.add_parser("run")
    r.add_argument("--bundle", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--site", default=None, help="folder of carried packages, put first")
    r.add_argument("--python", default=sys.executable, help="the cells' interpreter")
    r.add_argument("--workers", type=int, default=8)
    r.add_argument("--deadline", type=float, default=450.0)
    s = sub.add_parser("score")
    s.add_argument("--bundle", type=Path, required=True)
    s.add_argument("--tables-dir", type=Path, required=True)
    s.add_argument("--results", type=Path, required=True)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--commit", default="unknown")
    a = ap.parse_args(argv)
    {"prepare": prepare, "run": run_jobs, "score": score_results}[a.step](a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
