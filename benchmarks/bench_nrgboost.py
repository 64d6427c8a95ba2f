"""forestgen NRGBoost vs the reference package (PyPI ``nrgboost`` 0.0.3), side by side in one run.

Same training rows, same hyperparameters (the package defaults: 256 leaves, shrinkage 0.15,
max ratio 2, 10% uniform q0, M = 80,000 pool, p_refresh 0.1, 16 chains / 100 burn-in) except
the number of trees. Per dataset and number of trees: fit time and sampling time per row, each
as wall and CPU seconds (process time of all threads: the figure to compare on a loaded machine),
C2ST AUC of 1,000 samples against held-out real rows (forestgen's ``c2st``), and held-out
log-likelihood by the same estimator for both (importance sampling from each model's own q0;
rows outside the training range or with unseen levels are excluded for both, and counted).
One C2ST of 1,000 draws spreads by about 0.015 between draws of the same model: with
``--c2st-repeats K`` both sides draw ``K`` independent sets of ``--n-samples`` rows at the
100-sweep protocol (the reference in one call; its sampling time is divided over all of them),
each scored against a fresh subsample of the held-out rows, and a section gives the mean, SD
and standard error per model.

Sampling protocols: the reference draws each row from its own chain of 100 Gibbs sweeps
started at q0 (its default: ``sample(n, num_steps=100)`` runs 100 systematic-scan sweeps per
chain from an ``initial_model`` draw and keeps the state after the last); forestgen is timed
with that same protocol (``chains=n``, ``start="q0"``, ``burn_in=99``: forestgen keeps the
state after ``burn_in + 1`` sweeps, so exactly 100 sweeps; up to stop 47 this script passed
``burn_in=100``, 101 sweeps) and with its default (one chain per kept final training-pool
state, 256, a row every ``sample_thin`` sweeps from the first sweep on: 3 since
``nrgboost_protocols.md``, 1 before). Where the reference runs, forestgen's 100-sweep sampling
is timed a second time (the same draws) right after the reference's process ends, which samples
at its end: the two CPU figures closest in time, under the nearest machine load; both are in
the table, each with its ratio, and the 1-minute load average at each timing below it.

Pool refill schemes (``--refill``, issue 13): ``paper`` = every dropped pool sample refilled by
Gibbs (a round's cost grows with the trees; the reference package's scheme), an integer ``k`` =
the flat refill (``NRGBoost(refill_trees=k)``: a constant budget of tree evaluations per round;
30, forestgen's default, unless given). Each scheme is
fitted with each ``--seeds`` model seed, schemes alternating within a seed; ``--peer-trees ''``
skips the reference package.

The reference runs in its own venv (``--peer-python``, default
``~/.cache/forestgen-peers/nrgboost``), through ``_peer_nrgboost.py``. Both sides run on one
thread: the script sets ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` to 1 for itself and for every process it starts.
Its NaN categoricals are given as a "?" level and bools as 0/1 (it corrupts / rejects those).
Before the timed forestgen runs a small model is fitted and sampled untimed (:func:`warm_up`),
so that forestgen's figures do not include compiling its Numba kernels in a fresh checkout (the
reference's Numba functions have no on-disk cache: its fit includes compiling them).
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

#: one thread on each side (this process and the reference's), set before numpy / Numba load
ONE_THREAD = {k: "1" for k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                "MKL_NUM_THREADS")}
if __name__ == "__main__":
    os.environ.update(ONE_THREAD)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO, md_table, write_result  # noqa: E402
from forestgen import NRGBoost, load_adult  # noqa: E402
from forestgen.metrics import c2st  # noqa: E402

PEER = Path(__file__).with_name("_peer_nrgboost.py")
#: Gibbs sweeps per row of the 100-sweep protocol, on both sides (the reference's num_steps)
REF_SWEEPS = 100
LL_NOTE = (
    "Held-out log-likelihood (nats per row, test rows inside the training support): the same "
    "estimator for both — log Z by importance sampling from each model's own q0 — and the same "
    "units: numeric columns as densities per unit of the original column (each grid "
    "log-probability minus the log width of its bin, in original units), discrete columns "
    "(integers, categories, bools, the missing state) as probabilities, so the two numbers are "
    "log densities of the same rows with respect to the same measure. The reference's "
    "initial_model.predict(log=True) sums to the number of training rows over its grid (its "
    "marginals are counts), so its importance-sampling log Z is short by log N; the harness "
    "adds that constant, computed exactly per run (`ref log q0 norm`). C2ST AUC: lower is "
    "better, 0.5 = indistinguishable.")


def synthetic(n: int, seed: int = 0) -> pd.DataFrame:
    """A mixed table: correlated numerics, integers, a dependent categorical (with missing
    values), a 40-level categorical, and a bool."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    x1 = z + 0.5 * rng.normal(size=n)
    x2 = np.exp(0.5 * z + 0.3 * rng.normal(size=n))
    k = rng.poisson(np.exp(1 + 0.5 * z))
    grp = np.where(z > 0.5, "high", np.where(z < -0.5, "low", rng.choice(["mid", "other"], n)))
    grp = pd.Series(grp, dtype=object).where(rng.random(n) > 0.05, np.nan)
    city = np.array([f"c{i}" for i in range(40)])[np.clip((z * 8 + 20 + rng.normal(size=n) * 4)
                                                          .astype(int), 0, 39)]
    flag = (x1 + rng.normal(size=n)) > 0
    return pd.DataFrame({"x1": x1, "x2": x2, "count": k, "group": grp, "city": city,
                         "flag": flag, "score": np.round(2 * x1 + k + rng.normal(size=n), 2)})


def for_peer(df: pd.DataFrame, like: pd.DataFrame | None = None) -> pd.DataFrame:
    """Bools as 0/1, categoricals as pandas categories with NaN as a "?" level (the categories
    of ``like``, the converted training frame, when given)."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == bool:
            out[c] = out[c].astype(np.int64)
        elif not pd.api.types.is_numeric_dtype(out[c]):
            vals = [str(v) for v in out[c].astype(object).where(out[c].notna(), "?")]
            cats = list(like[c].cat.categories) if like is not None else sorted(set(vals))
            out[c] = pd.Categorical(np.array(vals, dtype=object),
                                    categories=pd.Index(cats, dtype=object))
    # plain object labels: the reference's venv has no pyarrow to unpickle pandas' str dtype
    out.columns = pd.Index(list(out.columns), dtype=object)
    return out


def from_peer(df: pd.DataFrame, like: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in like.columns:
        if like[c].dtype == bool:
            out[c] = out[c].astype(float).round().astype(bool)
        elif not pd.api.types.is_numeric_dtype(like[c]):
            out[c] = out[c].astype(object).where(out[c].astype(str) != "?", np.nan)
    return out[list(like.columns)]


def in_support(df: pd.DataFrame, train: pd.DataFrame) -> np.ndarray:
    """Rows whose every value was seen in training (levels of discrete and ordinal-integer
    columns) or lies inside the training range (numeric columns), as the training data's
    schema defines them."""
    from forestgen.data.encoder import TableEncoder
    from forestgen.families.energy.grid import Grid

    enc = TableEncoder().fit(train)
    grid = Grid.fit(enc.transform(train), enc.schema)
    return ~grid.codes(enc.transform(df))[1].any(axis=1)


def warm_up(train: pd.DataFrame, test: pd.DataFrame) -> None:
    """A small NRGBoost fitted, sampled by both protocols and scored, untimed: the timed runs
    then load forestgen's compiled kernels from Numba's cache instead of compiling them (a
    fresh checkout otherwise spends some 15 CPU s of its first fit compiling)."""
    m = NRGBoost(n_trees=3, pool_size=2000, n_normaliser_samples=2000, random_state=0,
                 progress=False).fit(train.head(500))
    m.sample(20, random_state=0)
    m.sample(20, random_state=0, chains=20, burn_in=2, thin=1, start="q0")
    m.log_prob(test.head(20))


def run_peer(args, train, test, n_trees, tmp: Path) -> dict:
    tr, te = tmp / "train.pkl", tmp / "test.pkl"
    ptrain = for_peer(train)
    ptrain.to_pickle(tr)
    for_peer(test, ptrain).to_pickle(te)
    job = {"train": str(tr), "test": str(te),
           "params": {"num_trees": n_trees, "num_model_samples": args.pool_size},
           "seed": 0, "n_samples": args.n_samples * args.c2st_repeats,
           "num_steps": REF_SWEEPS,
           "samples_out": str(tmp / "samples.pkl"), "result_out": str(tmp / "result.json"),
           "n_is": args.n_is}
    jp = tmp / "job.json"
    jp.write_text(json.dumps(job))
    t0 = time.perf_counter()
    subprocess.run([args.peer_python, str(PEER), str(jp)], check=True,
                   env=dict(os.environ, **ONE_THREAD),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = json.loads((tmp / "result.json").read_text())
    res["wall_s"] = time.perf_counter() - t0
    res["samples"] = from_peer(pd.read_pickle(tmp / "samples.pkl"), train)
    return res


def _rev(path: str) -> str:
    done = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def before_after(args, train: pd.DataFrame, test: pd.DataFrame, name: str, T: int,
                 tmp: Path) -> list:
    """Fit the same NRGBoost with the checkout at ``--before`` and with this one, alternating
    ``--repeats`` times, each in a fresh process (``_peer`` style, kernels compiled first);
    returns a table row: best fit / grow seconds per side, their ratio, and whether the first
    run of each side gave bitwise-equal trees, test log-likelihoods and samples."""
    train.to_pickle(tmp / "train.pkl")
    test.to_pickle(tmp / "test.pkl")
    side = Path(__file__).with_name("_nrgboost_side.py")
    res: dict[str, list[dict]] = {"before": [], "after": []}
    for r in range(args.repeats):
        for label, src in (("before", args.before), ("after", str(REPO))):
            job = tmp / "job.json"
            out = tmp / f"{label}{r}"
            job.write_text(json.dumps({
                "train": str(tmp / "train.pkl"), "test": str(tmp / "test.pkl"),
                "params": {"n_trees": T, "pool_size": args.pool_size, "max_leaves": 256,
                           "n_normaliser_samples": args.n_is, "random_state": 0},
                "n_samples": args.n_samples, "out": str(out)}))
            env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), **ONE_THREAD)
            done = subprocess.run([sys.executable, str(side), str(job)], env=env, check=True,
                                  capture_output=True, text=True)
            res[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
    a, b = np.load(tmp / "before0.npz"), np.load(tmp / "after0.npz")
    same = all(np.array_equal(a[k], b[k], equal_nan=True) for k in a.files)
    same_s = pd.read_pickle(tmp / "before0.pkl").equals(pd.read_pickle(tmp / "after0.pkl"))
    best = {k: {m: min(x[m] for x in v) for m in ("fit_s", "grow_s", "cpu_s", "splitter_cpu_s")}
            for k, v in res.items()}
    b, a = best["before"], best["after"]
    return [name, T, b["fit_s"], a["fit_s"], a["fit_s"] / b["fit_s"], b["grow_s"], a["grow_s"],
            a["grow_s"] / b["grow_s"], a["cpu_s"] / b["cpu_s"], 1000 * b["splitter_cpu_s"],
            1000 * a["splitter_cpu_s"], a["splitter_cpu_s"] / b["splitter_cpu_s"],
            "yes" if same and same_s else "NO"]


def _mean_sd(v) -> str:
    v = np.asarray(v, float)
    sd = v.std(ddof=1)
    return (f"mean {v.mean():.4f} +- SD {sd:.4f} (SE {sd / np.sqrt(len(v)):.4f}; "
            f"{', '.join(f'{x:.3f}' for x in v)})")


def repeated_c2st(args, m, test_in: pd.DataFrame, name: str, T: int, label: str,
                  auc_ind: float, auc_def: float) -> str:
    """C2ST AUC of ``--c2st-repeats`` independent draws of ``--n-samples`` rows by each
    protocol (the first is the table's, ``random_state=1``; draw ``b`` uses ``1 + b`` and
    C2ST ``random_state=b``, so each scores a fresh subsample of the held-out rows), untimed."""
    n, K = args.n_samples, args.c2st_repeats
    ind, dfl = [auc_ind], [auc_def]
    for b in range(1, K):
        ind.append(c2st(test_in, m.sample(n, random_state=1 + b, chains=n,
                                          burn_in=REF_SWEEPS - 1, thin=1, start="q0"),
                        random_state=b).auc)
        dfl.append(c2st(test_in, m.sample(n, random_state=1 + b), random_state=b).auc)
    return (f"{name}, {T} trees, {label}: C2ST AUC of {K} independent draws of {n} rows, "
            f"100 sweeps/row: {_mean_sd(ind)}; default protocol: {_mean_sd(dfl)}")


def summary(name: str, rows: list, per_round: dict, schemes: list, seeds: list) -> str:
    """Mean +- standard deviation over seeds, per number of trees and refill scheme."""
    out = []
    for T in sorted({r[1] for r in rows}):
        for refill in schemes:
            tag = f"({'paper' if refill is None else f'flat k={refill}'} refill, seed "
            rs = [r for r in rows if r[1] == T and r[2].startswith(f"forestgen {tag}")]
            pr = [per_round[T, r[2]][1] for r in rs]

            def ms(v):
                v = np.asarray(v, float)
                return f"{v.mean():.3f} +- {v.std(ddof=1) if len(v) > 1 else 0.0:.3f}"

            mid = [s[len(s) // 2 - 5: len(s) // 2 + 5].mean() for s in pr]
            out.append([name, T, tag[1:].split(" refill")[0], len(rs), ms([r[4] for r in rs]),
                        ms([s[:10].mean() for s in pr]), ms(mid),
                        ms([s[-10:].mean() for s in pr]), ms([r[11] for r in rs]),
                        ms([r[10] for r in rs]), ms([r[12] for r in rs])])
    return (f"### {name}: mean +- sd over seeds {seeds}\n\n"
            + md_table(["data", "trees", "refill", "seeds", "fit CPU s", "CPU s/round first 10",
                        "middle 10", "last 10", "C2ST AUC (default)",
                        "C2ST AUC (100 sweeps/row)", "held-out LL (IS)"], out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="adult,synthetic")
    ap.add_argument("--trees", default="30,100,200")
    ap.add_argument("--peer-trees", default="30,100",
                    help="tree counts also run for the reference (it is slow)")
    ap.add_argument("--n-train", type=int, default=10_000)
    ap.add_argument("--n-test", type=int, default=5_000)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--n-is", type=int, default=200_000)
    ap.add_argument("--pool-size", type=int, default=80_000,
                    help="model-sample pool M of both implementations (default: theirs)")
    ap.add_argument("--peer-python",
                    default=str(Path.home() / ".cache/forestgen-peers/nrgboost/bin/python"),
                    help="the reference's venv interpreter")
    ap.add_argument("--out", default=None,
                    help="results name (default nrgboost, or nrgboost_before_after)")
    ap.add_argument("--before", default=None,
                    help="a forestgen checkout: compare its NRGBoost with this one's (fit "
                         "time and bitwise outputs) instead of the reference package")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side with --before")
    ap.add_argument("--note", default="", help="a line for the results file (e.g. the load)")
    ap.add_argument("--refill", default="30",
                    help="pool refill schemes, comma-separated: 'paper' or an integer k "
                         "(NRGBoost(refill_trees=k), the flat refill)")
    ap.add_argument("--seeds", default="0", help="model random_state values, comma-separated")
    ap.add_argument("--c2st-repeats", type=int, default=1,
                    help="independent draws of --n-samples rows per model and protocol, each "
                         "scored by C2ST (the table shows the first; a section the mean +- SD)")
    args = ap.parse_args()
    schemes = [None if r == "paper" else int(r) for r in args.refill.split(",")]
    seeds = [int(x) for x in args.seeds.split(",")]
    if args.out is None:
        args.out = "nrgboost_before_after" if args.before else "nrgboost"
    trees = [int(t) for t in args.trees.split(",")]
    peer_trees = {int(t) for t in args.peer_trees.split(",") if t}
    sections = []
    rows_all = []
    headers = ["data", "trees", "implementation", "fit s", "fit CPU s", "s/round (last 10)",
               "sample ms per row (100 sweeps/row)", "CPU", "sample ms per row (default)",
               "CPU", "C2ST AUC (100 sweeps/row)", "C2ST AUC (default)",
               "held-out LL (IS)", "log Z s.e."]

    def save(rows, partial=True):  # after every row, so that a cut-off run keeps its results
        note = ["**Partial: the run was still going when this was written.**"] if partial else []
        note += [args.note] if args.note else []
        write_result(args.out, "NRGBoost: forestgen vs nrgboost 0.0.3",
                     note + [md_table(headers, rows_all + rows), LL_NOTE] + sections)

    for name in args.datasets.split(","):
        if name == "adult":
            train = load_adult("train", n=args.n_train, random_state=0)
            test = load_adult("test", n=args.n_test, random_state=0)
        else:
            full = synthetic(args.n_train + args.n_test)
            train, test = full.iloc[: args.n_train], full.iloc[args.n_train:]
        ok = in_support(test, train)
        test_in = test[ok].reset_index(drop=True)
        if args.before:
            for T in trees:
                with tempfile.TemporaryDirectory() as tmp:
                    rows_all.append(before_after(args, train, test_in, name, T, Path(tmp)))
                print(rows_all[-1], flush=True)
                write_result(args.out, "NRGBoost before / after (same run, fresh processes)", [
                    md_table(["data", "trees", "fit s before", "fit s after", "fit after/before",
                              "grow s before", "grow s after", "grow after/before",
                              "fit CPU after/before", "splitter CPU ms/tree before",
                              "splitter CPU ms/tree after", "splitter after/before",
                              "bitwise-equal trees, log_prob, samples"],
                             rows_all),
                    f"`before`: the checkout at `{args.before}` (commit {_rev(args.before)}; "
                    "make one with `git worktree add --detach DIR REV`); `after`: this one "
                    f"(commit {_rev(str(REPO))}, plus any uncommitted changes). Best of "
                    f"{args.repeats} alternating runs per side; grow s = wall time in the tree "
                    "splitter summed over rounds; splitter CPU = process time of one tree grown "
                    "alone on the training rows against the fitted model's final pool (best of "
                    "5 × 5), the least load-sensitive figure. Check the machine load above."])
            continue
        rows = []
        per_round = {}
        warm_up(train, test_in)
        for T, seed, refill in ((T, seed, r) for T in trees for seed in seeds
                                for r in schemes):
            label = "forestgen" + ("" if len(schemes) == 1 and seeds == [0] else
                                   f" ({'paper' if refill is None else f'flat k={refill}'} "
                                   f"refill, seed {seed})")
            t0, c0 = time.perf_counter(), time.process_time()
            m = NRGBoost(n_trees=T, pool_size=args.pool_size, n_normaliser_samples=args.n_is,
                         max_leaves=256, refill_trees=refill, random_state=seed).fit(train)
            fit_s, fit_c = time.perf_counter() - t0, time.process_time() - c0
            secs = np.diff([0.0] + [r["seconds"] for r in m.rounds_])
            per_round[T, label] = (
                secs, np.diff([0.0] + [r["cpu_seconds"] for r in m.rounds_]),
                np.array([r["gibbs_tree_evals"] for r in m.rounds_], float))
            t0, c0 = time.perf_counter(), time.process_time()
            s_def = m.sample(args.n_samples, random_state=1)
            samp_def, samp_def_c = time.perf_counter() - t0, time.process_time() - c0
            load_first = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), time.process_time()
            s_ind = m.sample(args.n_samples, random_state=1, chains=args.n_samples,
                             burn_in=REF_SWEEPS - 1, thin=1, start="q0")
            samp_ind, samp_ind_c = time.perf_counter() - t0, time.process_time() - c0
            ll = m.log_prob(test_in)
            auc_def = c2st(test_in, s_def).auc
            auc_ind = c2st(test_in, s_ind).auc
            if args.c2st_repeats > 1:
                sections.append(repeated_c2st(args, m, test_in, name, T, label,
                                              auc_ind, auc_def))
            k = 1000 / args.n_samples
            row = [name, T, label, fit_s, fit_c, float(np.mean(secs[-10:])),
                   samp_ind * k, samp_ind_c * k, samp_def * k, samp_def_c * k,
                   auc_ind, auc_def, float(np.mean(ll)), m.log_z_se_]
            rows.append(row)
            print(row, flush=True)
            save(rows)
            if T in peer_trees and refill == schemes[0] and seed == seeds[0]:
                with tempfile.TemporaryDirectory() as tmp:
                    r = run_peer(args, train, test_in, T, Path(tmp))
                    load_peer = os.getloadavg()[0]
                    t0, c0 = time.perf_counter(), time.process_time()
                    s_re = m.sample(args.n_samples, random_state=1, chains=args.n_samples,
                                    burn_in=REF_SWEEPS - 1, thin=1, start="q0")
                    re_w, re_c = time.perf_counter() - t0, time.process_time() - c0
                sections.append(f"{name}, {T} trees: the reference's q0 log-normaliser added to "
                                f"its log Z = {r['log_q0_norm']:.3f} (log N = "
                                f"{np.log(len(train)):.3f})")
                sections.append(
                    f"{name}, {T} trees: 1-min load average {load_first:.2f} when forestgen's "
                    f"100-sweep sampling was first timed, {load_peer:.2f} when the reference's "
                    f"process had ended (it samples at its end, then estimates log Z) and "
                    f"forestgen's was timed again (the same draws: "
                    f"{'yes' if s_re.equals(s_ind) else 'NO'})")
                pll = np.asarray(r["test_ll"])
                nan = float("nan")
                n, K = args.n_samples, args.c2st_repeats
                ref_auc = [c2st(test_in, r["samples"].iloc[b * n: (b + 1) * n],
                                random_state=b).auc for b in range(K)]
                row = [name, T, "nrgboost 0.0.3", r["fit_s"], r["fit_cpu_s"], nan,
                       r["sample_s"] * k / K, r["sample_cpu_s"] * k / K, nan, nan,
                       ref_auc[0], nan, float(np.mean(pll)), r["log_z_se"]]
                if K > 1:
                    sections.append(f"{name}, {T} trees, nrgboost 0.0.3: C2ST AUC of {K} "
                                    f"independent draws of {n} rows (100 sweeps/row): "
                                    f"{_mean_sd(ref_auc)}")
                rows.append(row)
                print(row, flush=True)
                f = rows[-2]
                rows.append([name, T, "ratio (ref / forestgen)", row[3] / f[3], row[4] / f[4],
                             nan, row[6] / f[6], row[7] / f[7], row[6] / f[8], row[7] / f[9],
                             nan, nan, nan, nan])
                rows.append([name, T, "forestgen, 100-sweep sampling timed again after the "
                             "reference", nan, nan, nan, re_w * k, re_c * k] + [nan] * 6)
                rows.append([name, T, "ratio (ref / forestgen timed again)", nan, nan, nan,
                             row[6] / (re_w * k), row[7] / (re_c * k)] + [nan] * 6)
                save(rows)
        rows_all += rows
        pr = [[name, T, label, what] + [float(np.mean(v)) for v in
                                        (s[:10], s[len(s) // 2 - 5: len(s) // 2 + 5], s[-10:])]
              for (T, label), both in per_round.items()
              for what, s in zip(("wall s", "CPU s", "Gibbs tree evals"), both)]
        sections.append(f"### {name}: {len(train)} train rows, {len(test_in)} of {len(test)} "
                        f"test rows inside the training support\n\nforestgen per round "
                        f"(rounds 1-10 / middle 10 / last 10; CPU = process time of all "
                        f"threads, less sensitive to machine load; Gibbs tree evals = the "
                        f"pool refill's chain sweeps x trees):\n\n"
                        + md_table(["data", "trees", "implementation", "per round",
                                    "first 10", "middle 10", "last 10"], pr))
        if len(schemes) > 1 or len(seeds) > 1:
            sections.append(summary(name, rows, per_round, schemes, seeds))
    if not args.before:
        save([], partial=False)


if __name__ == "__main__":
    main()
