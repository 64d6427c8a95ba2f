"""CPU seconds of each tutorial notebook, in fast mode (FORESTGEN_FAST=1) or full mode.

Every notebook runs in its own process (``nbclient``, one fresh kernel), one cell at a time; its
CPU seconds are the user + system time of that process and of the kernel (with the kernel's
own children), read with ``psutil``. ``--limit S`` interrupts a notebook once it has used ``S``
CPU seconds: its row then says in which cell it stopped, and its CPU seconds are a measured
lower bound of the whole notebook's. Rows are kept in
``benchmarks/results/tutorials_{fast,full}.jsonl`` (a rerun of a notebook replaces its row) and
written out as ``tutorials_{fast,full}.md``.

    python benchmarks/bench_tutorials.py [--full] [--limit S] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "tutorials"
RESULTS = ROOT / "benchmarks" / "results"


def _cpu(proc, children: bool = True) -> float:
    t = proc.cpu_times()
    return t.user + t.system + (t.children_user + t.children_system if children else 0.0)


def run_one(path: Path, limit: float | None) -> None:
    """Child process: execute one notebook cell by cell, print its CPU seconds as JSON."""
    import nbclient
    import nbformat
    import psutil

    nb = nbformat.read(path, as_version=4)
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    me = psutil.Process()
    t0 = time.time()
    error, stopped, ran, kernel_cpu = None, None, 0, 0.0
    over, done = threading.Event(), threading.Event()
    client = nbclient.NotebookClient(nb, timeout=None, kernel_name="python3",
                                     resources={"metadata": {"path": str(TUTORIALS)}})

    def watch(kernel) -> None:  # interrupt the kernel once the notebook is over the limit
        while not done.wait(1.0):
            if _cpu(kernel) + _cpu(me, children=False) > limit:
                over.set()
                kernel.send_signal(signal.SIGINT)
                return

    with client.setup_kernel():
        kernel = psutil.Process(client.km.provisioner.pid)
        if limit is not None:
            threading.Thread(target=watch, args=(kernel,), daemon=True).start()
        for k, i in enumerate(code):
            try:
                client.execute_cell(nb.cells[i], i)
            except nbclient.exceptions.CellExecutionError as e:
                error = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()[-1][:200]
            kernel_cpu = _cpu(kernel)
            ran = k + 1
            if over.is_set():
                stopped, error = f"stopped in code cell {ran} of {len(code)}", None
                break
            if error:
                break
        done.set()
    # the kernel's seconds: last read while it ran, or once reaped (whichever saw more)
    t = me.cpu_times()
    kernel_cpu = max(kernel_cpu, t.children_user + t.children_system)
    print(json.dumps({"notebook": path.name, "cpu_s": round(kernel_cpu + t.user + t.system, 1),
                      "wall_s": round(time.time() - t0, 1), "cells_run": ran,
                      "cells": len(code), "stopped": stopped, "error": error}))


def _result(r: dict) -> str:
    return _status(r) + (f". {r['note']}" if r.get("note") else "")


def _status(r: dict) -> str:
    if r.get("error"):
        where = f" in code cell {r['cells_run']} of {r['cells']}" if r.get("cells") else ""
        return f"FAILED{where}: {r['error']} (CPU s up to there: a lower bound)"
    if r.get("stopped"):
        return f"{r['stopped']} at the {r['limit']:g} CPU s limit: CPU s is a lower bound"
    return "ran"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("notebooks", nargs="*")
    ap.add_argument("--full", action="store_true", help="full mode (FORESTGEN_FAST unset)")
    ap.add_argument("--limit", type=float, default=None,
                    help="stop a notebook after this many CPU seconds (a lower bound)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return run_one(Path(a.child), a.limit)
    names = a.notebooks or sorted(p.name for p in TUTORIALS.glob("*.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "FORESTGEN_FAST"}
    if not a.full:
        env["FORESTGEN_FAST"] = "1"
    stem = "tutorials_full" if a.full else "tutorials_fast"
    store = RESULTS / f"{stem}.jsonl"
    rows = {}
    if store.exists():
        rows = {r["notebook"]: r for r in map(json.loads, store.read_text().splitlines())}
    for name in names:
        cmd = [sys.executable, __file__, "--child", str(TUTORIALS / name)]
        if a.limit is not None:
            cmd += ["--limit", str(a.limit)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        r["limit"] = a.limit
        r["note"] = rows.get(name, {}).get("note") if r.get("error") else None
        rows[name] = r
        print(r, flush=True)
    RESULTS.mkdir(exist_ok=True)
    store.write_text("".join(json.dumps(rows[k]) + "\n" for k in sorted(rows)))
    write_markdown(a.full)


def write_markdown(full: bool) -> None:
    """``tutorials_{fast,full}.md`` from the rows kept in the matching jsonl."""
    stem = "tutorials_full" if full else "tutorials_fast"
    rows = {r["notebook"]: r for r in map(
        json.loads, (RESULTS / f"{stem}.jsonl").read_text().splitlines())}
    mode = "full" if full else "fast (FORESTGEN_FAST=1)"
    lines = [f"# Tutorials, {mode} mode: CPU seconds per notebook", "",
             "`python benchmarks/bench_tutorials.py" + (" --full" if full else "")
             + " [--limit S] [NOTEBOOK ...]`; CPU = user + system seconds of the notebook's "
             "process and its kernel, read after every cell, with Numba's kernel cache warm "
             "(as in the test suite, where earlier tests compiled them; a cold cache adds its "
             "compile time once, e.g. 01 took 28 CPU s cold); wall seconds depend on the "
             "machine's load. A notebook stopped at the `--limit` shows a lower bound.", "",
             "| notebook | CPU s | wall s | measured | result |", "|---|---:|---:|---|---|"]
    lines += [f"| {r['notebook']} | {'>= ' if r.get('stopped') or r.get('error') else ''}"
              f"{r['cpu_s']} | "
              f"{r['wall_s']} | {r.get('date', '')} | {_result(r)} |"
              for r in (rows[k] for k in sorted(rows))]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
