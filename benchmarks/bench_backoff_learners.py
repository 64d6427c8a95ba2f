"""Every learner at its defaults against the product of the column marginals, on held-out rows.

    python benchmarks/bench_backoff_learners.py TABLES_DIR OUT.jsonl [--seeds 1]
        [--max-train 500] [--learners gef,rfde,...] [--limit 300]

``TABLES_DIR``: the leaderboard's exported tables (``benchmarks/leaderboard/tables.py``). Per
table, seed and learner: the leaderboard's split (``run.split``), the learner fitted at its
defaults (``random_state=seed``; GeF on the leaderboard's class column, ``cell.class_target``),
its mean held-out ``log_prob`` and that of ``forestgen.auto.marginals_model()`` (kernel
histograms, discrete pmfs), the chosen back-off weight where the learner has one, and its CPU
seconds. A cell runs in a child process under a limit of ``--limit`` CPU seconds; a timeout or
failure is a recorded cell.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "leaderboard"))

import numpy as np  # noqa: E402

LEARNERS = ("arf", "gef", "rfde", "def", "nrgboost", "gfboost", "eogt", "chain")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one(table_dir: Path, seed: int, max_train: int, work: Path, name: str) -> dict:
    warnings.simplefilter("ignore")
    import inspect

    from cell import class_target, typed
    from run import split

    from forestgen import registry
    from forestgen.auto import marginals_model

    data = split(table_dir, seed, max_train, work)
    meta = data["meta"]
    train, test = typed(data["train"], meta), typed(data["test"], meta)
    out = {"table": meta["name"], "seed": seed, "learner": name}
    model = registry.get("learner", name)(random_state=seed)
    kw = {}
    if "target" in inspect.signature(model.fit).parameters:
        kw["target"] = class_target(train, meta["target"], meta)
    t0 = cpu()
    model.fit(train, **kw)
    out["fit_cpu_s"] = cpu() - t0
    out["test_ll"] = float(np.mean(np.asarray(model.log_prob(test), float)))
    out["lambda"] = getattr(model, "marginal_weight_", None)
    out["test_ll_marginals"] = float(np.mean(marginals_model().fit(train).log_prob(test)))
    return out


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--cell":  # one cell, in its own process
        t, s, mt, w, name = json.loads(sys.argv[2])
        print(json.dumps(one(Path(t), s, mt, Path(w), name)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tables", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--max-train", type=int, default=500)
    ap.add_argument("--learners", default=",".join(LEARNERS))
    ap.add_argument("--limit", type=float, default=300.0)
    a = ap.parse_args()
    names = sorted(p.name for p in a.tables.iterdir() if (p / "meta.json").exists())
    work = a.out.parent / (a.out.stem + "_work")
    done = set()
    if a.out.exists():
        done = {(r["table"], r["seed"], r["learner"])
                for r in map(json.loads, a.out.read_text().splitlines())}
    with open(a.out, "a") as fh:
        for s in range(a.seeds):
            for t in names:
                for name in a.learners.split(","):
                    if (t, s, name) in done:
                        continue
                    t0 = time.perf_counter()
                    job = json.dumps([str(a.tables / t), s, a.max_train, str(work), name])
                    lim = int(a.limit)

                    def cap(lim=lim):
                        resource.setrlimit(resource.RLIMIT_CPU, (lim, lim + 5))

                    rec = {"table": t, "seed": s, "learner": name}
                    try:
                        r = subprocess.run([sys.executable, __file__, "--cell", job],
                                           capture_output=True, text=True, preexec_fn=cap,
                                           timeout=20 * lim)
                        if r.returncode == 0:
                            rec = json.loads(r.stdout.strip().splitlines()[-1])
                        else:
                            rec["error"] = (f"rc {r.returncode}: "
                                            + " | ".join(r.stderr.strip().splitlines()[-2:]))[:300]
                    except subprocess.TimeoutExpired:
                        rec["error"] = "wall-clock backstop"
                    rec["wall_s"] = time.perf_counter() - t0
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
