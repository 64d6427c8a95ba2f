"""ARF side by side with R arf 0.2.4 (and arfpy 0.1.1): one thread each side, CPU seconds.

Issue 33's protocol: a mixed table (6 continuous, 3 categorical columns with dependence,
:func:`_arf_side.mixed_table`), 30 trees, leaves of at least 5 real rows, at 8k, 32k and 80k
training rows and 4,000 held-out rows. Every side runs in its own subprocess with one thread:

* R arf (``shared/peers/rarf/arf_run.R``: ``adversarial_rf`` -> ``forde`` -> ``lik`` ->
  ``forge``; ranger and data.table single-threaded), library ``--rlib``;
* forestgen (``_arf_side.py``: ``ARF(n_trees, min_node_size, n_jobs=1)`` with
  ``NUMBA_NUM_THREADS=1``; fit includes the adversarial rounds and FORDE; ``sample(n)``;
  ``log_prob`` of the held-out rows), this checkout and, with ``--before DIR``, another
  checkout (``git archive REV forestgen | tar -x -C DIR``) on the same files;
* arfpy (``--arfpy-python``, at the sizes in ``--arfpy-rows``): ``arf(...)`` + ``forde()``
  + ``forge(n)``, scikit-learn with ``n_jobs=1`` (arfpy has no likelihood).

Ratios are reference CPU seconds over forestgen's: fit + FORDE (R: ``adversarial_rf`` +
``forde``), FORGE of n rows (mean CPU s per draw, each side drawing n rows again and again after
its fit until the draws add up to ``FORGE_MIN_CPU`` CPU s, default 0.5: R through ``arf_run.R``
plus a repeat loop of ``forge``, forestgen in ``_arf_side.py``), and the likelihood of the
held-out rows (R: its normalised ``lik``, see ``shared/peers/rarf/README.md``: R's own ``lik``
is not a normalised density on mixed tables). Held-out log-likelihoods: R's normalised figure
beside forestgen's, mean and SD over ``--seeds`` seeds. forestgen's fit is also split into steps
(encoding and binning, growing, out-of-bag accuracy, resampling, FORDE). Writes
``results/<--out>.md`` and the raw runs to ``results/<--out>.jsonl``.

    /work/bin/heavy --quiet python benchmarks/bench_arf_rarf.py --before /tmp/fg_before
    python benchmarks/bench_arf_rarf.py --rows 8000 --seeds 3 --arfpy-rows 8000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _arf_side import mixed_table  # noqa: E402
from _common import REPO, RESULTS, md_table, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
RARF = REPO.parent / "shared" / "peers" / "rarf"
if not RARF.exists():  # a worktree: /work/wt/<name> -> /work/shared
    RARF = Path("/work/shared/peers/rarf")
PEERS = Path(os.environ.get("FORESTGEN_PEERS", Path.home() / ".cache" / "forestgen-peers"))
ONE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}

ARFPY = r'''
import json, os, sys, time
import numpy as np, pandas as pd
from arfpy import arf
df = pd.read_csv(sys.argv[1])
for c in df.columns:
    if df[c].dtype == object:
        df[c] = df[c].astype("category")
trees, mns, seed = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def cpu():
    return time.process_time()
np.random.seed(seed)
c0 = cpu(); m = arf.arf(x=df, num_trees=trees, min_node_size=mns, n_jobs=1, verbose=False)
c1 = cpu(); m.forde()
c2 = cpu()
err = None
try:
    m.forge(n=len(df))
except ValueError as e:  # a zero-SD leaf (scipy truncnorm: scale must be positive)
    err = str(e)[:200]
c3 = cpu()
print("RESULT " + json.dumps({"cpu_fit": c1 - c0, "cpu_forde": c2 - c1,
                              "cpu_forge": None if err else c3 - c2, "forge_error": err}))
'''


# arf_run.R, then forge(n) repeated until the draws add up to FORGE_MIN_CPU CPU seconds (the
# same rule as _arf_side.py's): one draw at 8k is ~0.1 s, too close to the clock's resolution
RFORGE = r'''
source(Sys.getenv("ARF_RUN_R"))
min_cpu <- as.numeric(Sys.getenv("FORGE_MIN_CPU", "0.5"))
reps <- 0L; c0 <- cput()
repeat {
  invisible(forge(p$v, n_synth, parallel = FALSE, verbose = FALSE))
  reps <- reps + 1L; c1 <- cput()
  if (c1 - c0 >= min_cpu) break
}
cat(sprintf('{"cpu_forge_rep": %.6f, "forge_reps": %d}\n', (c1 - c0) / reps, reps),
    file = file.path(outdir, "forge_rep.json"))
'''


def run(cmd: list[str], env: dict | None = None, timeout: float = 7200) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                         env={**os.environ, **ONE_THREAD, **(env or {})})
    if res.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return res.stdout


def side_forestgen(src: Path, train: Path, test: Path, out: Path, trees: int, mns: int,
                   seed: int) -> dict:
    run([sys.executable, str(HERE / "_arf_side.py"), str(train), str(test), str(out),
         str(trees), str(mns), str(seed), "--profile"], env={"PYTHONPATH": str(src)})
    return json.loads(out.read_text())


def side_rarf(rlib: Path, train: Path, test: Path, outdir: Path, trees: int, mns: int,
              seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "rforge.R"
        script.write_text(RFORGE)
        run(["Rscript", str(script), str(train), str(test), str(outdir), str(trees), str(mns),
             str(seed)], env={"R_LIBS": str(rlib), "ARF_RUN_R": str(RARF / "arf_run.R")})
    return {**json.loads((outdir / "result.json").read_text()),
            **json.loads((outdir / "forge_rep.json").read_text())}


def side_arfpy(python: str, train: Path, trees: int, mns: int, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "run_arfpy.py"
        script.write_text(ARFPY)
        out = run([python, str(script), str(train), str(trees), str(mns), str(seed)])
    line = [x for x in out.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def mean_sd(xs: list[float]) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    if len(xs) == 1:
        return f"{xs[0]:.3f}"
    return f"{np.mean(xs):.3f} ± {np.std(xs, ddof=1):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", default="8000,32000,80000")
    ap.add_argument("--test-rows", type=int, default=4000)
    ap.add_argument("--trees", type=int, default=30)
    ap.add_argument("--min-node-size", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--rlib", type=Path, default=PEERS / "Rlib", help="'' to skip R arf")
    ap.add_argument("--arfpy-python", default=str(PEERS / "arfpy" / "bin" / "python"))
    ap.add_argument("--arfpy-rows", default="8000", help="'' to skip arfpy")
    ap.add_argument("--before", type=Path, default=None,
                    help="another forestgen checkout run on the same files")
    ap.add_argument("--src", type=Path, default=REPO,
                    help="the forestgen checkout measured (default: this one)")
    ap.add_argument("--out", default="arf_vs_rarf")
    args = ap.parse_args()
    sizes = [int(x) for x in args.rows.split(",") if x]
    arfpy_sizes = {int(x) for x in args.arfpy_rows.split(",") if x}
    use_r = str(args.rlib) not in ("", ".") and args.rlib.exists()
    use_arfpy = bool(args.arfpy_python) and Path(args.arfpy_python).exists()
    runs: list[dict] = []
    jsonl = RESULTS / f"{args.out}.jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        test = tmp / "test.csv"
        mixed_table(args.test_rows, 10_000).to_csv(test, index=False)
        for n in sizes:
            for seed in range(args.seeds):
                train = tmp / f"train_{n}_{seed}.csv"
                mixed_table(n, seed).to_csv(train, index=False)
                sides = [("forestgen", args.src)]
                if args.before is not None:
                    sides.append(("forestgen before", args.before))
                for name, src in sides:
                    t0 = time.perf_counter()
                    r = side_forestgen(src, train, test, tmp / "fg.json", args.trees,
                                       args.min_node_size, seed)
                    runs.append({"side": name, "rows": n, "seed": seed, **r})
                    print(f"{name} n={n} seed={seed}: fit {r['cpu_fit']:.2f} CPU-s, "
                          f"LL {r['test_ll']:.4f} ({time.perf_counter() - t0:.0f} s)",
                          file=sys.stderr, flush=True)
                if use_r:
                    t0 = time.perf_counter()
                    r = side_rarf(args.rlib, train, test, tmp / "r", args.trees,
                                  args.min_node_size, seed)
                    runs.append({"side": "R arf", "rows": n, "seed": seed, **r})
                    print(f"R arf n={n} seed={seed}: fit {r['cpu_fit']:.2f} + forde "
                          f"{r['cpu_forde']:.2f} CPU-s ({time.perf_counter() - t0:.0f} s)",
                          file=sys.stderr, flush=True)
                if use_arfpy and n in arfpy_sizes:
                    r = side_arfpy(args.arfpy_python, train, args.trees, args.min_node_size,
                                   seed)
                    runs.append({"side": "arfpy", "rows": n, "seed": seed, **r})
                    print(f"arfpy n={n} seed={seed}: {r}", file=sys.stderr, flush=True)
                with open(jsonl, "w") as fh:
                    for x in runs:
                        fh.write(json.dumps(x) + "\n")
    sections = report(runs, sizes, args)
    if args.src.resolve() != REPO.resolve():
        sections.insert(0, f"The `forestgen` side ran the code under `{args.src}` (`--src`); the "
                           f"commit in the machine table is this checkout's, not that code's.")
    write_result(args.out, "ARF side by side with R arf and arfpy (one thread each, CPU s)",
                 sections)


def report(runs: list[dict], sizes: list[int], args) -> list[str]:
    def sel(side, n):
        return [r for r in runs if r["side"] == side and r["rows"] == n]

    def med(rs, key):
        vals = [key(r) for r in rs]
        vals = [v for v in vals if v is not None]
        return float(np.median(vals)) if vals else float("nan")

    fg_sides = ["forestgen"] + (["forestgen before"] if args.before is not None else [])
    rows = []
    for n in sizes:
        r = sel("R arf", n)
        r_fit = med(r, lambda x: x["cpu_fit"] + x["cpu_forde"])
        r_forge = med(r, lambda x: x["cpu_forge_rep"])
        r_reps = med(r, lambda x: x["forge_reps"])
        r_lik = med(r, lambda x: x["cpu_lik_normalised"])
        py = sel("arfpy", n)
        py_fit = med(py, lambda x: x["cpu_fit"] + x["cpu_forde"])
        py_forge = med(py, lambda x: x["cpu_forge"])
        for side in fg_sides:
            f = sel(side, n)
            f_fit = med(f, lambda x: x["cpu_fit"])
            f_forge = med(f, lambda x: x["cpu_forge_rep"])
            f_reps = med(f, lambda x: x["forge_reps"])
            f_lik = med(f, lambda x: x["cpu_lik"])
            f_lik_rep = med(f, lambda x: x.get("cpu_lik_rep"))
            f_first = med(f, lambda x: x["cpu_forge"])  # (builds the draw tables)
            # the whole pipeline once: fit + FORDE, one forge of n rows, the likelihood
            f_all = med(f, lambda x: x["cpu_fit"] + x["cpu_forge"] + x["cpu_lik"])
            r_all = med(r, lambda x: x["cpu_fit"] + x["cpu_forde"] + x["cpu_forge"]
                        + x["cpu_lik_normalised"])
            rows.append([n, side, f_fit, r_fit, r_fit / f_fit, f"{1e3 * f_forge:.2f}",
                         f"{1e3 * r_forge:.1f}" if r else "",
                         r_forge / f_forge,
                         f"{f_reps:.0f} / {r_reps:.0f}" if r else f"{f_reps:.0f}",
                         f_lik, r_lik, r_lik / f_lik, f_lik_rep, r_lik / f_lik_rep,
                         f_first, f_all, r_all / f_all,
                         py_fit / f_fit if py else "", py_forge / f_forge if py else "",
                         mean_sd([x["test_ll"] for x in f]),
                         mean_sd([x["test_ll_normalised"] for x in r]) if r else "",
                         max(x["peak_rss_mib"] for x in f)])
    t1 = md_table(["rows", "side", "fit+FORDE CPU s", "R arf fit+forde CPU s", "ratio R/ours",
                   "FORGE CPU ms per draw", "R forge CPU ms per draw", "ratio",
                   "FORGE draws (ours / R)", "likelihood CPU s",
                   "R lik (normalised) CPU s", "ratio", "likelihood CPU s, later calls",
                   "ratio", "first FORGE CPU s (ours)",
                   "fit + first FORGE + likelihood CPU s (ours)", "ratio R/ours (the same, "
                   "R: fit + forde + forge + lik)", "arfpy/ours fit+FORDE",
                   "arfpy/ours FORGE", "held-out LL (ours)", "held-out LL (R, normalised)",
                   "peak RSS MiB (ours)"], rows, digits=3)
    prof = []
    for n in sizes:
        for side in fg_sides:
            for x in sel(side, n):
                st = x.get("steps", {})
                tot = x["cpu_fit"]
                known = sum(st.values())
                cells = [f"{st.get(k, 0.0):.2f} ({100 * st.get(k, 0.0) / tot:.0f}%)"
                         for k in ("growing", "oob", "forde", "resampling", "encoding")]
                prof.append([n, side, x["seed"], tot, *cells,
                             f"{tot - known:.2f} ({100 * (tot - known) / tot:.0f}%)",
                             x["rounds"], " ".join(str(a) for a in x["oob"])])
    t2 = md_table(["rows", "side", "seed", "fit CPU s", "growing", "OOB accuracy", "FORDE",
                   "resampling", "encoding + binning", "other", "rounds", "OOB accuracies"],
                  prof, digits=2)
    notes = [
        f"Protocol: mixed table (6 continuous, 3 categorical columns), {args.trees} trees, "
        f"min_node_size {args.min_node_size}, {args.test_rows} held-out rows, {args.seeds} "
        "seed(s) per size (medians of CPU seconds; LL mean ± SD over seeds). One thread on every "
        "side (forestgen n_jobs=1 and NUMBA_NUM_THREADS=1; R arf parallel=FALSE with one "
        "data.table thread; arfpy n_jobs=1). CPU seconds are user + system of each side's own "
        "process, for the step named (forestgen and arfpy: `time.process_time`, nanosecond "
        "resolution; R: `proc.time()` as arf_run.R reports it); compilation is excluded for "
        "forestgen (warm-up fit).",
        "FORGE: `sample(n)` / `forge(n)` of n rows drawn again and again in each side's "
        "process (after the fitted model's first draw) until the draws add up to "
        f"{os.environ.get('FORGE_MIN_CPU', '0.5')} CPU s; the figure is the mean CPU s per "
        "draw (median over seeds), the draws column the median count. arfpy's FORGE is one "
        "draw. The first draw of a fitted model builds its truncated normals' draw tables "
        "(and the first likelihood query its packed leaf records): the pipeline column "
        "counts fit, first draw and likelihood once on each side. The likelihood columns: "
        "the first call (it builds the records) and, as for FORGE, the mean of later calls "
        "adding up to the same CPU seconds; R's `lik` is called once (it keeps no state "
        "between calls).",
        "R's likelihood time and figure are its normalised `lik` (arf_run.R's "
        "`lik_normalised`); R's shipped `lik` is not a density on mixed tables "
        "(shared/peers/rarf/README.md).",
    ]
    return ["## Side by side", t1, *notes, "## forestgen fit, CPU seconds per step", t2]


if __name__ == "__main__":
    main()
