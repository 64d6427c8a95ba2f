"""Speed of ARF, NRGBoost and GF.Boost fit and queries, this checkout against another, in one run
(issue 31: the family packages, slots and numeric core must not slow anything down).

Each checkout runs in its own subprocess (``PYTHONPATH`` = its root, so its own Numba cache);
the subprocesses alternate, repeat by repeat, and time themselves in CPU seconds
(``time.process_time``: every thread of the process). Numba compilation is excluded (one small
run of every task first). The table is adult (``forestgen.data.load_adult``), 4,000 training
rows and 2,000 query rows, a tenth of the query entries set to NaN for the marginal query.

    python benchmarks/bench_framework_speed.py --reference /path/to/other/checkout --repeats 3

``--tasks walk`` times the leaf mixture's ``log p`` walk alone (ARF, 30 trees; the same rows):
``log_prob`` of complete rows and of rows with NaN, ``predict_proba`` of rows with NaN (the
walk's moments), conditional ``log_prob`` given a level, a point and an interval (the walk
with point and range evidence) and ``log_prob`` given only an interval (the pruned range sum).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]

_WORKER = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.filterwarnings("ignore")
    import numpy as np
    from forestgen import ARF, GFBoost, NRGBoost
    from forestgen.data import load_adult

    df = load_adult().sample(6000, random_state=0).reset_index(drop=True)
    train, test = df.iloc[:4000].reset_index(drop=True), df.iloc[4000:].reset_index(drop=True)
    rng = np.random.default_rng(1)
    nan = test.copy()
    for c in nan.columns:
        nan.loc[rng.random(len(nan)) < 0.1, c] = None
    learners = {
        "ARF": lambda small: ARF(n_trees=3 if small else 30, random_state=0, n_jobs=-1),
        "NRGBoost": lambda small: NRGBoost(n_trees=2 if small else 20, max_leaves=64,
                                           pool_size=2000 if small else 20000,
                                           n_normaliser_samples=2000 if small else 50000,
                                           random_state=0),
        "GFBoost": lambda small: GFBoost(n_trees=5 if small else 50,
                                         n_iter=10 if small else 400, random_state=0),
    }

    def run(small):
        out = {}
        tr = train.iloc[:300] if small else train
        q, qn = (test.iloc[:50], nan.iloc[:50]) if small else (test, nan)
        for name, make in learners.items():
            t = time.process_time()
            m = make(small).fit(tr)
            out[f"{name} fit"] = time.process_time() - t
            for what, f in [("log_prob", lambda: m.log_prob(q)),
                            ("log_prob NaN", lambda: m.log_prob(qn)),
                            ("sample", lambda: m.sample(len(q), random_state=2)),
                            ("conditional sample",
                             lambda: m.sample(len(q) // 4, random_state=3,
                                              conditions={"sex": "Female"})),
                            ("impute", lambda: m.impute(qn.iloc[: len(q) // 4]))]:
                t = time.process_time()
                f()
                out[f"{name} {what}"] = time.process_time() - t
        return out

    run(True)  # Numba compilation
    print(json.dumps(run(False)))
""")

_WALK_WORKER = textwrap.dedent("""
    import json, time, warnings
    warnings.filterwarnings("ignore")
    import numpy as np
    from forestgen import ARF
    from forestgen.data import load_adult

    df = load_adult().sample(6000, random_state=0).reset_index(drop=True)
    train, test = df.iloc[:4000].reset_index(drop=True), df.iloc[4000:].reset_index(drop=True)
    rng = np.random.default_rng(1)
    nan = test.copy()
    for c in nan.columns:
        nan.loc[rng.random(len(nan)) < 0.1, c] = None
    free = ["education", "hours-per-week", "race", "capital-gain"]

    def run(small):
        out = {}
        m = ARF(n_trees=3 if small else 30, random_state=0).fit(
            train.iloc[:300] if small else train)
        q, qn = (test.iloc[:50], nan.iloc[:50]) if small else (test, nan)
        reps = 1 if small else 3
        for what, f in [("log_prob", lambda: m.log_prob(q)),
                        ("log_prob NaN", lambda: m.log_prob(qn)),
                        ("predict_proba NaN", lambda: m.predict_proba(qn, "sex")),
                        ("conditional log_prob given a level",
                         lambda: m.log_prob(q[free], conditions={"sex": "Female"})),
                        ("conditional log_prob given a point",
                         lambda: m.log_prob(q[free], conditions={"age": 40})),
                        ("conditional log_prob given an interval",
                         lambda: m.log_prob(q[free], conditions={"age": (30, 50)})),
                        ("interval evidence log_prob",
                         lambda: m.log_prob(q[["age"]].assign(age=np.nan),
                                            conditions={"hours-per-week": (35, 45)}))]:
            t = time.process_time()
            for _ in range(reps):
                f()
            out[f"ARF {what}"] = (time.process_time() - t) / reps
        return out

    run(True)  # Numba compilation
    print(json.dumps(run(False)))
""")
WORKERS = {"all": _WORKER, "walk": _WALK_WORKER}


def _run(root: Path, threads: int, tasks: str = "all") -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), NUMBA_NUM_THREADS=str(threads),
               OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, "-c", WORKERS[tasks]], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True, help="root of the other checkout")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tasks", choices=sorted(WORKERS), default="all")
    ap.add_argument("--out", default=str(HERE / "benchmarks/results/framework_speed.json"))
    args = ap.parse_args()
    roots = {"reference": Path(args.reference).resolve(), "this": HERE}
    times: dict[str, dict[str, list[float]]] = {k: {} for k in roots}
    for r in range(args.repeats):
        for who, root in (roots.items() if r % 2 == 0 else reversed(roots.items())):
            for k, v in _run(root, args.threads, args.tasks).items():
                times[who].setdefault(k, []).append(v)
            print(f"repeat {r + 1} {who} done", flush=True)
    print("| task | reference CPU s | this CPU s | this / reference |\n|---|---|---|---|")
    rows = {}
    for k in times["this"]:
        a, b = np.median(times["reference"][k]), np.median(times["this"][k])
        rows[k] = {"reference": float(a), "this": float(b), "ratio": float(b / a)}
        print(f"| {k} | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    Path(args.out).write_text(json.dumps({"repeats": args.repeats, "threads": args.threads,
                                          "times": times, "medians": rows}, indent=1))


if __name__ == "__main__":
    main()
