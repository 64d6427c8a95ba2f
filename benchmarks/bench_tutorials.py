"""CPU seconds of each tutorial notebook in the test suite's fast mode (FORESTGEN_FAST=1).

Every notebook runs in its own process (``nbclient``, one fresh kernel); its CPU seconds are
the user + system time of that process and its children (the kernel included), read from
``resource.getrusage``. Writes ``benchmarks/results/tutorials_fast.md``.

    python benchmarks/bench_tutorials.py [--full] [NOTEBOOK ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "tutorials"
RESULTS = ROOT / "benchmarks" / "results"


def run_one(path: Path) -> None:
    """Child process: execute one notebook, print its CPU seconds (self + kernel) as JSON."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    t0 = time.time()
    error = None
    try:
        nbclient.NotebookClient(nb, timeout=1800, kernel_name="python3",
                                resources={"metadata": {"path": str(TUTORIALS)}}).execute()
    except nbclient.exceptions.CellExecutionError as e:
        error = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip().splitlines()[-1][:200]
    wall = time.time() - t0
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    print(json.dumps({"notebook": path.name, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
                      "error": error}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("notebooks", nargs="*")
    ap.add_argument("--full", action="store_true", help="full mode (FORESTGEN_FAST unset)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return run_one(Path(a.child))
    names = a.notebooks or sorted(p.name for p in TUTORIALS.glob("*.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "FORESTGEN_FAST"}
    if not a.full:
        env["FORESTGEN_FAST"] = "1"
    rows = []
    for name in names:
        out = subprocess.run([sys.executable, __file__, "--child", str(TUTORIALS / name)],
                             env=env, capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    mode = "full" if a.full else "fast (FORESTGEN_FAST=1)"
    lines = [f"# Tutorials, {mode} mode: CPU seconds per notebook", "",
             "`python benchmarks/bench_tutorials.py" + (" --full" if a.full else "") + "`; "
             "CPU = user + system seconds of the notebook's process and its kernel, with "
             "Numba's kernel cache warm (as in the test suite, where earlier tests compiled "
             "them; a cold cache adds its compile time once, e.g. 01 took 28 CPU s cold); wall "
             "seconds depend on the machine's load.", "",
             "| notebook | CPU s | wall s | result |", "|---|---:|---:|---|"]
    lines += [f"| {r['notebook']} | {r['cpu_s']} | {r['wall_s']} | "
              f"{'ran' if r['error'] is None else 'FAILED: ' + r['error']} |" for r in rows]
    RESULTS.mkdir(exist_ok=True)
    name = "tutorials_full.md" if a.full else "tutorials_fast.md"
    (RESULTS / name).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
