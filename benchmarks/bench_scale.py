"""Scale on one machine (issue 15): the issue's table before and after, side by side.

The reference is commit ``de662f2`` (before sparse discrete leaves, chunked reach queries and
streamed save), unpacked with ``git archive`` into a temporary directory. Every measurement
runs in a fresh Python process (its own peak RSS, ``VmHWM``) for both code versions on the
same data: a generated mixed table (4 continuous, 2 integer, 3 categorical, 1 boolean column;
``--rows``, default 1M) and UCI adult with 200 and 500 trees. A process whose RSS passes
``--cap-gb`` is killed and reported as such. Query results of the two versions are compared
on the rows both scored (max abs difference of ``log_prob``; identical conditional draws).

    nice -n 10 python benchmarks/bench_scale.py                     # the issue's table
    nice -n 10 python benchmarks/bench_scale.py --rows 100000 --adult-trees 50
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import DATA, REPO, md_table, write_result  # noqa: E402

REFERENCE = "de662f2"

CHILD = r'''
import json, os, sys, time
import numpy as np, pandas as pd

def hwm_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

def make_table(n, seed=0, wide=False):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    cat = rng.integers(0, 8, n)
    return pd.DataFrame({
        "x0": z[:, 0] + 0.3 * cat, "x1": np.exp(0.5 * z[:, 1]) + 0.5 * z[:, 0],
        "x2": rng.gamma(2.0, 1.0, n), "x3": z[:, 2] * (1 + (cat % 2)),
        "i0": rng.poisson(3 + cat, n),
        "i1": rng.integers(0, 100 if wide else 5, n),
        "c0": pd.Categorical(np.array(list("abcdefgh"))[cat]),
        "c1": pd.Categorical(np.where(z[:, 0] > 0, "hi", "lo")),
        "c2": pd.Categorical(np.array(list("uvwxy"))[rng.integers(0, 5, n)]),
        "b0": rng.random(n) < 0.3 + 0.4 * (z[:, 1] > 0)})

def with_nan(df, rate, seed):
    rng = np.random.default_rng(seed)
    out = df.astype({"i0": float, "i1": float})
    for c in out.columns:
        if c != "b0":
            out.loc[rng.random(len(out)) < rate, c] = np.nan
    return out

def leaf_bytes(m, discrete):
    return sum(v.nbytes for lm in m.leaf_models_ if lm.discrete == discrete
               for v in vars(lm).values() if isinstance(v, np.ndarray))

import forestgen.learners  # noqa
from forestgen.base import GenerativeForest
from forestgen.families.mixture.arf import ARF
task, args = sys.argv[1], json.loads(sys.argv[2])
out = {}
if task in ("fit", "adult"):
    if task == "fit":
        df = make_table(args["rows"], wide=args["wide"])
        model = ARF(random_state=0)
    else:
        df = pd.read_csv(args["csv"], na_values="?", skipinitialspace=True)
        model = ARF(n_trees=args["trees"], random_state=0)
    t = time.perf_counter(); model.fit(df); out["fit_s"] = time.perf_counter() - t
    out["peak_mib"] = hwm_mib()
    out["leaves"] = model.forest_.n_leaves
    out["discrete_mib"] = leaf_bytes(model, True) / 2**20
    if args.get("save"):
        t = time.perf_counter(); model.save(args["save"]); out["save_s"] = time.perf_counter() - t
        out["file_mib"] = os.path.getsize(args["save"]) / 2**20
        try:  # uncompressed arrays (after issue 15 only)
            raw = args["save"] + ".raw"
            t = time.perf_counter(); model.save(raw, compress=False)
            out["save_raw_s"] = time.perf_counter() - t
            out["file_raw_mib"] = os.path.getsize(raw) / 2**20
        except TypeError:
            pass
elif task == "load":
    base = hwm_mib()
    t = time.perf_counter(); m = GenerativeForest.load(args["path"], max_bytes=2**40)
    out["load_s"] = time.perf_counter() - t
    out["load_peak_mib"] = hwm_mib() - base
    if os.path.exists(args["path"] + ".raw"):  # memory-mapped where the version can
        t = time.perf_counter(); GenerativeForest.load(args["path"] + ".raw", max_bytes=2**40)
        out["load_raw_s"] = time.perf_counter() - t
elif task == "queries":
    m = GenerativeForest.load(args["path"], max_bytes=2**40)
    m.warmup()
    q = with_nan(make_table(max(args["nan_rows"], args["pred_rows"]), seed=1), 0.15, 2)
    def rate(fn, rows, warm=None):
        if warm is not None:
            warm()  # compile (or load from the cache) the kernels this query uses
        t = time.perf_counter(); res = fn(); return res, rows / (time.perf_counter() - t)
    lp, out["nan_logprob_rows_s"] = rate(lambda: m.log_prob(q.iloc[:args["nan_rows"]]),
                                          args["nan_rows"], lambda: m.log_prob(q.iloc[:20]))
    np.save(args["dump"] + "_lp.npy", lp)
    ev = make_table(args["cond_rows"], seed=3)
    for name, cols in (("cond2", ["x0", "c0"]), ("cond8", ["x0", "x1", "x2", "i0", "i1",
                                                          "c0", "c1", "c2"])):
        s, out[name + "_rows_s"] = rate(
            lambda: m.sample(conditions=ev[cols], random_state=0), args["cond_rows"],
            lambda: m.sample(conditions=ev[cols].iloc[:5], random_state=1))
        s.to_pickle(args["dump"] + f"_{name}.pkl")
    qp = q.iloc[:args["pred_rows"]]
    _, out["predict_proba_s"] = rate(lambda: m.predict_proba(qp, target="c0"), 1,
                                     lambda: m.predict_proba(qp.iloc[:20], target="c0"))
    _, out["impute_s"] = rate(lambda: m.impute(qp), 1, lambda: m.impute(qp.iloc[:20]))
    out["predict_proba_s"] = 1 / out["predict_proba_s"]
    out["impute_s"] = 1 / out["impute_s"]
print("RESULT " + json.dumps(out), flush=True)
'''


def run(code: Path, task: str, args: dict, cap_mib: float) -> dict:
    """Run one task in a fresh process; kill it if its RSS passes ``cap_mib``."""
    env = dict(os.environ, PYTHONPATH=str(code))
    p = subprocess.Popen([sys.executable, "-c", CHILD, task, json.dumps(args)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=tempfile.gettempdir())
    killed, peak = False, 0.0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        peak = max(peak, int(line.split()[1]) / 1024)
        except OSError:
            pass
        if peak > cap_mib:
            p.send_signal(signal.SIGKILL)
            killed = True
            break
        time.sleep(0.2)
    stdout, stderr = p.communicate()
    if killed:
        return {"killed_at_mib": peak}
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        return {"error": (stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(lines[-1][7:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated table")
    ap.add_argument("--adult-trees", type=int, nargs="*", default=[200, 500])
    ap.add_argument("--nan-rows", type=int, default=20_000,
                    help="rows (15%% of entries missing) scored by log_prob")
    ap.add_argument("--cond-rows", type=int, default=300, help="per-row evidence rows sampled")
    ap.add_argument("--pred-rows", type=int, default=100_000,
                    help="rows for predict_proba / impute")
    ap.add_argument("--cap-gb", type=float, default=16.0, help="kill a process above this RSS")
    ap.add_argument("--skip-reference", action="store_true")
    ap.add_argument("--reference", default=REFERENCE,
                    help="git commit of the 'before' column (default: before issue 15)")
    ap.add_argument("--no-wide", action="store_true",
                    help="skip the fit with a 100-level integer column")
    ap.add_argument("--adult-only", action="store_true",
                    help="only the adult fits (memory); writes results/scale_adult.md")
    args = ap.parse_args()
    cap = args.cap_gb * 1024

    work = Path(tempfile.mkdtemp(prefix="fg_bench_scale_"))
    codes = {"after": REPO}
    if not args.skip_reference:
        # kept between runs so the reference's Numba cache (its __pycache__) is reused
        old = Path(tempfile.gettempdir()) / f"forestgen_ref_{args.reference}"
        if not (old / "forestgen").exists():
            tar = subprocess.run(["git", "-C", str(REPO), "archive", args.reference, "forestgen"],
                                 capture_output=True, check=True).stdout
            with tarfile.open(fileobj=BytesIO(tar)) as tf:
                tf.extractall(old, filter="data")
        codes = {"before": old, **codes}
    adult = DATA / "adult" / "adult.train.csv"
    res: dict[str, dict[str, dict]] = {v: {} for v in codes}
    for ver, code in codes.items():
        def go(key, task, a, ver=ver, code=code):
            print(f"[{ver}] {key} ...", file=sys.stderr, flush=True)
            res[ver][key] = r = run(code, task, a, cap)
            print(f"[{ver}] {key}: {r}", file=sys.stderr, flush=True)

        path = str(work / f"{ver}_mixed.fgm")
        if not args.adult_only:
            go("fit", "fit", {"rows": args.rows, "wide": False, "save": path})
        if not args.no_wide and not args.adult_only:
            go("fit_wide", "fit", {"rows": args.rows, "wide": True})
        for b in args.adult_trees:
            if adult.exists():
                go(f"adult{b}", "adult", {"trees": b, "csv": str(adult)})
        if not args.adult_only and not {"error", "killed_at_mib"} & set(res[ver]["fit"]):
            go("load", "load", {"path": path})
            go("queries", "queries", {"path": path, "nan_rows": args.nan_rows,
                                      "cond_rows": args.cond_rows,
                                      "pred_rows": args.pred_rows,
                                      "dump": str(work / ver)})

    import numpy as np
    import pandas as pd

    same = {}
    if set(codes) == {"before", "after"}:
        try:
            a, b = (np.load(work / f"{v}_lp.npy") for v in ("before", "after"))
            same["log_prob max |diff|"] = f"{np.max(np.abs(a - b)):.2e}"
            for name in ("cond2", "cond8"):
                x, y = (pd.read_pickle(work / f"{v}_{name}.pkl") for v in ("before", "after"))
                same[f"{name} draws identical"] = str(x.equals(y))
        except (OSError, ValueError) as e:
            same["comparison"] = f"not available ({e})"

    def cell(ver, key, field, fmt="{:.1f}"):
        r = res.get(ver, {}).get(key, {})
        if "killed_at_mib" in r:
            return f"killed at {r['killed_at_mib'] / 1024:.1f} GB"
        if "error" in r:
            return "error: " + r["error"][:60]
        v = r.get(field)
        return "-" if v is None else fmt.format(v)

    gb = "{:.2f}"
    rows_spec = [] if args.adult_only else [
        (f"fit {args.rows:,} rows: wall s", "fit", "fit_s", "{:.0f}", 1),
        ("  peak RSS GB", "fit", "peak_mib", gb, 1 / 1024),
        ("  leaves", "fit", "leaves", "{:,.0f}", 1),
        ("  discrete leaf tables GB", "fit", "discrete_mib", gb, 1 / 1024),
        ("  save s", "fit", "save_s", "{:.1f}", 1),
        ("  file MB", "fit", "file_mib", "{:.0f}", 1),
        ("  save(compress=False) s", "fit", "save_raw_s", "{:.1f}", 1),
        ("  file MB (compress=False)", "fit", "file_raw_mib", "{:.0f}", 1),
        ("  load s", "load", "load_s", "{:.1f}", 1),
        ("  load s (compress=False)", "load", "load_raw_s", "{:.2f}", 1),
        ("fit with a 100-level integer column: peak RSS GB", "fit_wide", "peak_mib", gb,
         1 / 1024),
        ("  discrete leaf tables GB", "fit_wide", "discrete_mib", gb, 1 / 1024),
    ]
    for b in args.adult_trees:
        rows_spec += [(f"adult, {b} trees: peak RSS GB", f"adult{b}", "peak_mib", gb, 1 / 1024),
                      ("  discrete leaf tables GB", f"adult{b}", "discrete_mib", gb, 1 / 1024),
                      ("  fit wall s", f"adult{b}", "fit_s", "{:.0f}", 1)]
    rows_spec += [] if args.adult_only else [
        ("log_prob, rows with NaN: rows/s", "queries", "nan_logprob_rows_s", "{:,.0f}", 1),
        ("sample(conditions=DataFrame), 2 columns given: rows/s", "queries", "cond2_rows_s",
         "{:,.1f}", 1),
        ("  8 of 10 columns given: rows/s", "queries", "cond8_rows_s", "{:,.1f}", 1),
        (f"predict_proba {args.pred_rows:,} rows: s", "queries", "predict_proba_s", "{:.1f}", 1),
        (f"impute {args.pred_rows:,} rows: s", "queries", "impute_s", "{:.1f}", 1),
    ]
    table = []
    for label, key, field, fmt, scale in rows_spec:
        row = [label]
        for ver in codes:
            r = res[ver].get(key, {})
            if field in r:
                row.append(fmt.format(r[field] * scale))
            else:
                row.append(cell(ver, key, field))
        table.append(row)
    headers = ["work", *(f"{v} ({args.reference})" if v == "before" else v for v in codes)]
    sections = [
        "The machine's load is in the table above (wall times and rates depend on it; peak RSS "
        "is per process and does not). Each cell is one run in a fresh process.",
        md_table(headers, table),
        "Results agree between versions: " + (json.dumps(same) if same else "(not compared)"),
        "Raw: " + json.dumps(res),
    ]
    cmd = "python benchmarks/bench_scale.py " + " ".join(sys.argv[1:])
    name = "scale_adult" if args.adult_only else "scale"
    print(write_result(name, "Scale on one machine (issue 15)", sections, command=cmd))


if __name__ == "__main__":
    main()
