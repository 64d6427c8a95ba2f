"""Cost of the safe model file: load and save time and peak memory, validated vs unvalidated.

The reference is the loader and saver of commit ``08de4da`` (before model files were validated
and saves made atomic), unpacked with ``git archive`` into a temporary directory. Both read the
same file (the format did not change). Each measurement runs in a fresh Python process so its
peak RSS (``VmHWM`` after the call minus before it) is its own; old and new alternate,
``--repeats`` times each, and the table reports medians of CPU time (``time.process_time``: less
sensitive than wall time to other jobs on a shared machine), wall time and peak RSS, and the
new/old ratio. The validation alone (``check_forest`` and every leaf model's
``check_param_arrays``, the checks that scale with the model) is also timed in-process.

    python benchmarks/bench_model_file.py                 # ARF, 20 trees, on bundled adult
    python benchmarks/bench_model_file.py --trees 50 --repeats 7
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, md_table, write_result  # noqa: E402

REFERENCE = "08de4da"

CHILD = """
import json, sys, time
from forestgen.base import GenerativeForest
import forestgen.learners  # noqa: F401  (registers learners before the baseline)
mode, path = sys.argv[1], sys.argv[2]


def hwm():  # peak RSS of this process image, KiB (ru_maxrss would include the parent's)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])


base = hwm()
if mode == "load":
    t0, c0 = time.perf_counter(), time.process_time()
    m = GenerativeForest.load(path)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
else:
    m = GenerativeForest.load(sys.argv[3])
    with open("/proc/self/clear_refs", "w") as fh:  # reset VmHWM to the current RSS
        fh.write("5")
    base = hwm()
    t0, c0 = time.perf_counter(), time.process_time()
    m.save(path)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
peak = hwm()
print(json.dumps({"seconds": dt, "cpu": cpu, "peak_mib": (peak - base) / 1024}))
"""


def run(code_dir: Path, mode: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code_dir))
    r = subprocess.run([sys.executable, "-c", CHILD, mode, *args], env=env, check=True,
                       capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    import numpy as np

    import forestgen as fg

    work = Path(tempfile.mkdtemp(prefix="fg_bench_mf_"))
    old = work / "old"
    old.mkdir()
    tar = subprocess.run(["git", "-C", str(REPO), "archive", REFERENCE, "forestgen"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as tf:
        tf.extractall(old, filter="data")

    model = fg.ARF(n_trees=args.trees, random_state=0).fit(fg.load_adult())
    path = model.save(work / "adult.forestgen")
    size = path.stat().st_size
    with zipfile.ZipFile(path) as zf, zipfile.ZipFile(io.BytesIO(zf.read("arrays.npz"))) as inner:
        raw = sum(i.file_size for i in inner.infolist())
    print(f"model: {model.forest_.n_leaves} leaves, file {size / 2**20:.1f} MiB, "
          f"arrays {raw / 2**20:.0f} MiB uncompressed", file=sys.stderr)

    codes = {"old (08de4da)": old, "new (validated, atomic)": REPO}
    for code in codes.values():  # warm the Numba cache and the page cache
        run(code, "load", str(path))
    res: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeats):
        for name, code in codes.items():
            res.setdefault((name, "load"), []).append(run(code, "load", str(path)))
            res.setdefault((name, "save"), []).append(
                run(code, "save", str(work / f"out_{abs(hash(name))}.forestgen"), str(path)))
    rows = []
    for mode in ("load", "save"):
        med = {}
        for name in codes:
            rs = res[(name, mode)]
            med[name] = [statistics.median(r[k] for r in rs) for k in ("cpu", "seconds",
                                                                       "peak_mib")]
            rows.append([mode, name, *med[name],
                         f"{min(r['cpu'] for r in rs):.2f}-{max(r['cpu'] for r in rs):.2f}"])
        old_m, new_m = med.values()
        rows.append([mode, "ratio new / old", *(n / max(o, 1e-9) for n, o in zip(new_m, old_m)),
                     ""])
        if mode == "load":
            med_load_new = new_m[0]

    from forestgen.modelfile import check_forest

    loaded = fg.GenerativeForest.load(path)
    schema = loaded.schema_
    arrays = {j: lm.param_arrays() for j, lm in enumerate(loaded.leaf_models_)}

    def validate():
        check_forest(loaded.forest_, schema.d)
        for j, (spec, lm) in enumerate(zip(schema.columns, loaded.leaf_models_)):
            lm.check_param_arrays(arrays[j], loaded.forest_.n_leaves,
                                  spec.n_levels if spec.is_discrete else 0)

    val = []
    for _ in range(max(3, args.repeats)):
        c0 = time.process_time()
        validate()
        val.append(time.process_time() - c0)
    t_val = statistics.median(val)

    # reading alone, in one process, alternating: the unchecked read of 08de4da (zipfile +
    # np.load) against read_model_file (sizes bounded, headers checked before reading)
    from forestgen.modelfile import read_model_file

    def read_old():
        with zipfile.ZipFile(path) as zf:
            json.loads(zf.read("meta.json"))
            with np.load(io.BytesIO(zf.read("arrays.npz")), allow_pickle=False) as npz:
                return {k: npz[k] for k in npz.files}

    reads: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(max(3, args.repeats)):
        for name, fn in (("old", read_old), ("new", lambda: read_model_file(path))):
            c0 = time.process_time()
            out = fn()
            reads[name].append(time.process_time() - c0)
            del out
    r_old, r_new = (statistics.median(v) for v in reads.values())
    sections = [
        f"ARF(n_trees={args.trees}) on the bundled adult data (32,561 rows): "
        f"{model.forest_.n_leaves} leaves; model file {size / 2**20:.1f} MiB holding "
        f"{raw / 2**20:.0f} MiB of uncompressed arrays. Medians over {args.repeats} fresh "
        f"processes per cell, old and new alternating. Peak = increase of the process's peak "
        f"RSS (VmHWM) during the call; a save starts from a loaded model.",
        md_table(["call", "code", "CPU s (median)", "wall s (median)", "peak MiB (median)",
                  "CPU s range"], rows),
        f"Validation alone (structure of the forest and every leaf table, in-process): "
        f"{t_val:.3f} CPU s (median of {len(val)}), "
        f"{100 * t_val / med_load_new:.1f}% of the new load's median CPU time.",
        f"Reading the arrays alone, in one process, alternating ({len(reads['old'])} each): "
        f"unchecked read of 08de4da {r_old:.3f} CPU s, bounded read_model_file {r_new:.3f} "
        f"CPU s (median; ratio {r_new / r_old:.3f}).",
        "The machine is shared (2 cores, several jobs): the seconds range shows the noise.",
    ]
    write_result("model_file", "Model file: validated load and atomic save vs the unvalidated "
                 "originals", sections)


if __name__ == "__main__":
    main()
