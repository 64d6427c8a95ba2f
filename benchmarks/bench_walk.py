"""Evidence queries before and after the evidence-pruned tree walk (issue 15), one model.

One ARF is fitted on the generated mixed table of ``bench_scale.py`` (``--rows``) and saved;
the reference commit (``--reference``, unpacked with ``git archive``) and this checkout each
load the same file in a fresh process and time, with one Numba thread, per-row conditional
sampling and ``log_prob(conditions=)`` under interval and level-set evidence, and NaN-marginal
``log_prob``. Rates are rows per CPU-second of the process (``time.process_time``), which a
loaded machine distorts less than wall time; the results of both versions are compared.

    nice -n 10 python benchmarks/bench_walk.py --rows 100000
    nice -n 10 python benchmarks/bench_walk.py --model 1m.fgm --pred-rows 20000  # bench_scale's
    nice -n 10 python benchmarks/bench_walk.py --model 1m.fgm --reference e455ba6 \
        --threads 2 --cond-rows 1000 --name walk_interval_1m  # interval / level-set evidence

``--pred-rows`` adds ``predict_proba`` and ``impute`` of rows with missing entries;
``--wide-rows`` sets the rows of ``log_prob(conditions=)`` under wide evidence (``x0 <= a`` and
four levels of ``c0``), where subtrees lie inside the evidence and the walk sums them from
stored totals; the leaves each evidence walk scores per row are reported.
``--serial`` times the serial twins of the parallel kernels (what a forked worker runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, md_table, write_result  # noqa: E402

CHILD = r'''
import json, sys, time
import numpy as np, pandas as pd
task, args = sys.argv[1], json.loads(sys.argv[2])

def make_table(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 3))
    cat = rng.integers(0, 8, n)
    return pd.DataFrame({
        "x0": z[:, 0] + 0.3 * cat, "x1": np.exp(0.5 * z[:, 1]) + 0.5 * z[:, 0],
        "x2": rng.gamma(2.0, 1.0, n), "x3": z[:, 2] * (1 + (cat % 2)),
        "i0": rng.poisson(3 + cat, n), "i1": rng.integers(0, 5, n),
        "c0": pd.Categorical(np.array(list("abcdefgh"))[cat]),
        "c1": pd.Categorical(np.where(z[:, 0] > 0, "hi", "lo")),
        "c2": pd.Categorical(np.array(list("uvwxy"))[rng.integers(0, 5, n)]),
        "b0": rng.random(n) < 0.3 + 0.4 * (z[:, 1] > 0)})

import forestgen.learners  # noqa
from forestgen.base import GenerativeForest
if args.get("serial"):  # every parallel kernel runs its serial twin, as in a forked worker
    import forestgen.parallel
    forestgen.parallel._state["forked"] = True
if task == "fit":
    from forestgen.families.mixture.arf import ARF
    ARF(random_state=0).fit(make_table(args["rows"])).save(args["path"])
    sys.exit(0)
m = GenerativeForest.load(args["path"], max_bytes=2**40)
ev = make_table(args["cond_rows"], seed=3)
cond = pd.DataFrame({"x0": [(a - 0.25, a + 0.25) for a in ev.x0],
                     "c0": [{c, "a"} for c in ev.c0.astype(str)],
                     "x2": [(None, b) for b in ev.x2]}, dtype=object)
q = make_table(args["nan_rows"], seed=1).astype({"i0": float, "i1": float})
rng = np.random.default_rng(2)
for c in q.columns[:-1]:
    q.loc[rng.random(len(q)) < 0.15, c] = np.nan
out, res = {}, {}
try:  # the fused walk's packed leaf tables (issue 15), built once per model
    from forestgen.inference.leaf_factors import leaf_pack
    w = time.perf_counter()
    out["pack_mb"] = leaf_pack(m).nbytes / 2**20
    out["pack_s"] = time.perf_counter() - w
except ImportError:
    pass
def rate(name, fn, rows, warm=None):
    w = time.perf_counter(); (warm or fn)(); out[name + "_first_s"] = time.perf_counter() - w
    t, w = time.process_time(), time.perf_counter()
    r = fn()
    out[name], out[name + "_wall"] = (rows / (time.process_time() - t),
                                      rows / (time.perf_counter() - w))
    return r
res["cond"] = rate("cond_interval", lambda: m.sample(conditions=cond, random_state=0), len(cond))
x1 = res["cond"]["x1"].to_numpy(float)  # a free column: both versions draw the same law
out["cond_interval_x1"] = [float(x1.mean()), float(x1.std() / np.sqrt(len(x1)))]
try:  # rows the bounded leaf search drew, and those it left to the walk
    from forestgen.inference.conditions import evidence_from_frame
    from forestgen.inference.leaf_search import bounded_draws
    out["cond_interval_search"] = bounded_draws(m, evidence_from_frame(m, cond),
                                                np.arange(len(cond)), 0)[1]
except ImportError:
    pass
res["lpc"] = rate("logprob_conditions", lambda: m.log_prob(ev, conditions=cond), len(ev))
wide = pd.DataFrame({"x0": [(None, a) for a in ev.x0[:args["wide_rows"]]],
                     "c0": [set("abcd")] * min(len(ev), args["wide_rows"])}, dtype=object)
res["lpw"] = rate("logprob_wide", lambda: m.log_prob(ev[:len(wide)], conditions=wide),
                  len(wide))
try:  # leaves scored per row by the evidence walk, with and without containment pruning
    from forestgen.inference.conditions import evidence_from_frame
    from forestgen.inference.evidence_mass import evidence_log_mass
    leaves = {}
    for name, c, x in (("narrow", cond, ev), ("wide", wide, ev[:len(wide)])):
        e = evidence_from_frame(m, c[:100])
        for prune in (False, True):
            cnt = evidence_log_mass(m, e, prune=prune, leaves=True)[2]
            leaves[f"{name} log p(e), {'pruned' if prune else 'every reached leaf'}"] = float(
                cnt.mean())
        Zx = m.encode_rows(x[:100])
        free = ~e.active() & ~np.isnan(Zx)
        e.point[free] = Zx[free]
        leaves[f"{name} log p(x_free, e)"] = float(
            evidence_log_mass(m, e, leaves=True)[2].mean())
    out["walk_leaves"] = leaves
except (ImportError, TypeError):
    pass
res["lp"] = rate("nan_logprob", lambda: m.log_prob(q), len(q))
for name, cols in (("cond2", ["x0", "c0"]), ("cond8", ["x0", "x1", "x2", "i0", "i1", "c0",
                                                       "c1", "c2"])):
    res[name] = rate(name, lambda: m.sample(conditions=ev[cols], random_state=0), len(ev))
    res[name].to_pickle(args["dump"] + f"_{name}.pkl")
    try:  # rows the bounded leaf search (issue 15) drew, and those it left to the walk
        from forestgen.inference.conditions import evidence_from_frame
        from forestgen.inference.leaf_search import bounded_draws
        out[name + "_search"] = bounded_draws(m, evidence_from_frame(m, ev[cols]),
                                              np.arange(len(ev)), 0)[1]
    except ImportError:
        pass
if args["pred_rows"]:
    qp = make_table(args["pred_rows"], seed=4).astype({"i0": float, "i1": float})
    for c in qp.columns[:-1]:
        qp.loc[rng.random(len(qp)) < 0.15, c] = np.nan
    res["pp"] = rate("predict_proba", lambda: m.predict_proba(qp, target="c0"), len(qp),
                     lambda: m.predict_proba(qp.iloc[:50], target="c0"))
    res["imp"] = rate("impute", lambda: m.impute(qp), len(qp), lambda: m.impute(qp[:50]))
    np.save(args["dump"] + "_pp.npy", res["pp"].to_numpy())
    res["imp"].to_pickle(args["dump"] + "_imp.pkl")
np.save(args["dump"] + "_lpc.npy", res["lpc"])
np.save(args["dump"] + "_lpw.npy", res["lpw"])
np.save(args["dump"] + "_lp.npy", res["lp"])
print("RESULT " + json.dumps(out), flush=True)
'''


def child(code: Path, task: str, args: dict, threads: int = 1) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), NUMBA_NUM_THREADS=str(threads))
    p = subprocess.run([sys.executable, "-c", CHILD, task, json.dumps(args)], env=env,
                       capture_output=True, text=True, cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip().splitlines()[-1])
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(lines[-1][7:]) if lines else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cond-rows", type=int, default=200)
    ap.add_argument("--nan-rows", type=int, default=3000)
    ap.add_argument("--wide-rows", type=int, default=100,
                    help="rows of log_prob(conditions=) under wide evidence (x0 <= a, a "
                         "4-level set on c0)")
    ap.add_argument("--reference", default="a519121", help="git commit of the 'before' code")
    ap.add_argument("--name", default="walk", help="results/<name>.md")
    ap.add_argument("--pred-rows", type=int, default=0,
                    help="rows (15%% of entries missing) for predict_proba(target='c0') and "
                         "impute (0: skip)")
    ap.add_argument("--threads", type=int, default=1,
                    help="Numba threads of the query processes (CPU rates count all of them)")
    ap.add_argument("--serial", action="store_true",
                    help="run the serial twins of the parallel kernels, as a forked worker "
                         "(DataLoader, fork pool) does")
    ap.add_argument("--model", help="an ARF model file of the generated table to load instead "
                                    "of fitting one (e.g. the 1M-row model of bench_scale)")
    args = ap.parse_args()
    import numpy as np

    work = Path(tempfile.mkdtemp(prefix="fg_bench_walk_"))
    old = Path(tempfile.gettempdir()) / f"forestgen_ref_{args.reference}"
    if not (old / "forestgen").exists():
        tar = subprocess.run(["git", "-C", str(REPO), "archive", args.reference, "forestgen"],
                             capture_output=True, check=True).stdout
        with tarfile.open(fileobj=BytesIO(tar)) as tf:
            tf.extractall(old, filter="data")
    path = args.model or str(work / "model.fgm")
    if not args.model:
        child(REPO, "fit", {"rows": args.rows, "path": path})
    q = {"path": path, "cond_rows": args.cond_rows, "nan_rows": args.nan_rows,
         "wide_rows": args.wide_rows,
         "pred_rows": args.pred_rows, "serial": args.serial}
    res = {ver: child(code, "query", {**q, "dump": str(work / ver)}, args.threads)
           for ver, code in (("before", old), ("after", REPO))}
    same = {}
    for k in ("lpc", "lpw", "lp"):
        a, b = (np.load(work / f"{v}_{k}.npy") for v in ("before", "after"))
        fin = np.isfinite(a)
        same[k] = (f"{np.max(np.abs(a[fin] - b[fin])):.1e}"
                   if np.array_equal(fin, np.isfinite(b)) else "different support")
    import pandas as pd

    for k in ("cond2", "cond8"):
        a, b = (pd.read_pickle(work / f"{v}_{k}.pkl") for v in ("before", "after"))
        same[f"{k} draws identical"] = str(a.equals(b))
    if args.pred_rows:
        a, b = (np.load(work / f"{v}_pp.npy") for v in ("before", "after"))
        same["predict_proba max |diff|"] = f"{np.max(np.abs(a - b)):.1e}"
        a, b = (pd.read_pickle(work / f"{v}_imp.pkl") for v in ("before", "after"))
        same["impute identical"] = str(a.equals(b))
        num = [c for c in a.columns if a[c].dtype.kind == "f"]
        rel = max(np.nanmax(np.abs(a[c] - b[c]) / np.maximum(np.abs(a[c]), 1e-300))
                  for c in num)
        same["impute numeric max rel |diff|"] = f"{rel:.1e}"
        same["impute other columns identical"] = str(a.drop(columns=num).equals(
            b.drop(columns=num)))
    labels = {"cond_interval": "sample(conditions=) with intervals and level sets",
              "logprob_conditions": "log_prob(conditions=) with intervals and level sets",
              "logprob_wide": "log_prob(conditions=), wide evidence (x0 <= a, 4 levels of c0)",
              "nan_logprob": "log_prob, rows with NaN",
              "cond2": "sample(conditions=DataFrame), 2 of 10 columns given (values)",
              "cond8": "sample(conditions=DataFrame), 8 of 10 columns given (values)",
              "predict_proba": "predict_proba(target='c0'), rows with NaN",
              "impute": "impute, rows with NaN"}
    def table(sfx):
        return [[labels[k], f"{res['before'][k + sfx]:,.1f}", f"{res['after'][k + sfx]:,.1f}",
                 f"{res['after'][k + sfx] / res['before'][k + sfx]:.2f}x"] for k in labels
                if k + sfx in res["after"] and k + sfx in res["before"]]
    head = ["query", f"before ({args.reference})", "after", "after / before"]
    search = {k: res["after"].get(k + "_search") for k in ("cond_interval", "cond2", "cond8")}
    x1 = {v: res[v].get("cond_interval_x1") for v in ("before", "after")}
    first = {f"{v} {k}": round(res[v].get(k + "_first_s", float("nan")), 2)
             for v in ("before", "after") for k in ("cond2", "cond8")}
    sections = [
        f"Rows per CPU-second (`time.process_time` of the process, all of its "
        f"{args.threads} Numba thread(s)"
        + ("; every parallel kernel replaced by its serial twin, as in a forked worker"
           if args.serial else "")
        + "; the machine's load is in the table above). Both versions "
        + (f"load the same model file ({args.model})." if args.model else
           f"load the same {args.rows:,}-row ARF model file."),
        md_table(head, table("")),
        f"Wall-clock rows per second of the same calls ({args.threads} Numba thread(s)):",
        md_table(head, table("_wall")),
        "Conditional sampling, rows the bounded leaf search drew / left to the walk (after; "
        f"`searched` includes the probe rows of each evidence pattern): {json.dumps(search)}. "
        "Seconds of the untimed first call of each (the after version builds the pattern's "
        f"node bounds there), before/after: {json.dumps(first)}.",
        "Packed leaf tables of the fused walk (after; built once per model before the "
        f"timed calls): {res['after'].get('pack_mb', float('nan')):,.0f} MiB in "
        f"{res['after'].get('pack_s', float('nan')):.1f} s.",
        "Leaves the evidence walk scores per row (after; first 100 rows of each evidence; "
        "`log p(e)` every reached leaf is the walk of the before version, `pruned` sums "
        "subtrees that lie inside the evidence from stored totals; `log p(x_free, e)` is the "
        "joint of log_prob(conditions=), whose point values take one branch at their splits): "
        + json.dumps({k: round(v, 1) for k, v in res["after"].get("walk_leaves", {}).items()}),
        "Max |difference| of the log densities (log_prob(conditions=) narrow / wide, NaN "
        "log_prob) and "
        "whether the conditional draws are identical: "
        + json.dumps(same),
        "sample(conditions=) with intervals and level sets, mean of the free column x1 and its "
        "standard error, before / after (different random streams, the same law): "
        + json.dumps(x1),
    ]
    cmd = "python benchmarks/bench_walk.py " + " ".join(sys.argv[1:])
    print(write_result(args.name, "Evidence-pruned tree walk (issue 15)", sections, command=cmd))


if __name__ == "__main__":
    main()
