"""Load-time cost of the model-file checks (issue 34) on a 1M-row ARF model.

The checks are the CRC-32 of the arrays entry (every array, mapped or not) and the structure
checks (:func:`forestgen.persistence.check_model`: the forest, the leaf weights, every leaf model's
arrays). Each measurement runs in a fresh process and reports CPU seconds
(``time.process_time``); the "unchecked" loads patch both out (the CRC pass returns the
recorded CRC, ``check_model`` does nothing), so checked / unchecked is their cost. The
loads alternate, ``--repeats`` times each; the table gives medians. The first query after a
mapped load (``log_prob`` of 1,000 rows) is timed too: an unchecked mapped load reads pages
lazily, so part of what the checks cost there moves into the first query without them.

    python benchmarks/bench_model_checks.py --rows 1000000 --trees 4 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, md_table, write_result  # noqa: E402

CHILD = """
import json, sys, time
import numpy as np
import forestgen.persistence as persistence
import forestgen.modelfile as mf
from forestgen.base import GenerativeForest
import forestgen.learners  # noqa: F401
path, mode, checked = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if not checked:
    import zipfile
    with zipfile.ZipFile(path) as zf:
        crc = zf.getinfo("arrays.npz").CRC
    mf._crc_of = lambda fh, start, n: crc
    persistence.check_model = lambda model, arrays: None
mmap = {"mapped": True, "read": False, "deflated": "auto"}[mode]
t0 = time.process_time()
m = GenerativeForest.load(path, mmap=mmap)
load = time.process_time() - t0
rows = m.sample(1000, random_state=0)
t0 = time.process_time()
m.log_prob(rows)
query = time.process_time() - t0
print(json.dumps({"load": load, "query": query}))
"""


def table(n: int, seed: int = 0) -> pd.DataFrame:
    """Ten columns: seven numeric (correlated normals, a log-normal, a count), three
    categorical (3, 5 and 10 levels)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    out = {f"x{j}": z[:, j] + 0.6 * z[:, (j + 1) % 5] for j in range(5)}
    out["income"] = np.round(np.exp(10 + 0.5 * z[:, 0]), 2)
    out["visits"] = rng.poisson(3 + (z[:, 1] > 0), n).astype(float)
    out["c3"] = rng.choice(["a", "b", "c"], n)
    out["c5"] = np.array(list("vwxyz"))[np.clip((z[:, 2] + 2.5).astype(int), 0, 4)]
    out["c10"] = rng.choice([f"k{i}" for i in range(10)], n)
    return pd.DataFrame(out)


def build(path: Path, rows: int, trees: int) -> dict:
    from forestgen import ARF

    t0 = time.process_time()
    model = ARF(n_trees=trees, random_state=0).fit(table(rows))
    fit = time.process_time() - t0
    model.save(path, compress=False)
    model.save(path.with_suffix(".deflated.fgm"))
    return {"fit_cpu_s": fit, "leaves": int(model.forest_.n_leaves),
            "nodes": int(len(model.forest_.feature))}


def measure(path: Path, mode: str, checked: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode, str(int(checked))],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--trees", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--model", type=Path, default=Path("/tmp/forestgen_bench_checks.fgm"))
    args = ap.parse_args()
    info = {}
    if not args.model.exists():
        info = build(args.model, args.rows, args.trees)
    else:  # built earlier (e.g. by a run of this script): its size from the file
        from forestgen.base import GenerativeForest

        f = GenerativeForest.load(args.model, mmap=True).forest_
        info = {"leaves": int(f.n_leaves), "nodes": int(len(f.feature))}
    files = {"mapped": args.model, "read": args.model,
             "deflated": args.model.with_suffix(".deflated.fgm")}
    runs: dict = {(m, c): [] for m in files for c in (True, False)}
    for _ in range(args.repeats):
        for mode, path in files.items():
            for checked in (True, False):
                runs[(mode, checked)].append(measure(path, mode, checked))
    rows = []
    for mode, path in files.items():
        on = [r["load"] for r in runs[(mode, True)]]
        off = [r["load"] for r in runs[(mode, False)]]
        q_on = [r["query"] for r in runs[(mode, True)]]
        q_off = [r["query"] for r in runs[(mode, False)]]
        a, b = statistics.median(on), statistics.median(off)
        rows.append([mode, f"{path.stat().st_size / 2**20:.0f}", f"{a:.3f}", f"{b:.3f}",
                     f"{a - b:.3f}", f"{a / b:.2f}", f"{statistics.median(q_on):.3f}",
                     f"{statistics.median(q_off):.3f}"])
    head = ["load", "file MiB", "checked CPU s", "unchecked CPU s", "checks CPU s",
            "ratio", "1st query, checked", "1st query, unchecked"]
    text = (f"ARF on {args.rows:,} rows x 10 columns, {args.trees} trees"
            + f" ({info['leaves']:,} leaves, {info['nodes']:,} nodes"
            + (f"; fit {info['fit_cpu_s']:.0f} CPU s)" if "fit_cpu_s" in info else ")")
            + f"; medians of {args.repeats} fresh-process loads each, alternating.\n\n"
            + md_table(head, rows))
    print(text)
    write_result("model_checks", "Load-time cost of model-file checks (issue 34)", [text])


if __name__ == "__main__":
    main()
