"""NRGBoost sampling protocols side by side with nrgboost 0.0.3, with the spread over draws.

One fit per implementation on the 10k-row synthetic table of ``bench_nrgboost.py`` (same rows,
the package defaults but the number of trees), then ``--reps`` independent draws of
``--n-samples`` rows per protocol, each scored by C2ST AUC against the same held-out rows. A single
draw's AUC varies by about 0.01-0.02, more than the differences between protocols, so each row of
the results gives the mean and sd over the draws and the CPU milliseconds per row.

Protocols (forestgen's ``sample`` arguments): the reference's (each row its own chain of 100
Gibbs sweeps from q0: ``chains=n, burn_in=99, start="q0"``, as forestgen keeps the state after
``burn_in + 1`` sweeps; up to stop 48 this script passed ``burn_in=100``, 101 sweeps, and called
it the reference's 100); chains started at the final
training-pool states with a row every ``thin`` sweeps (``thin=1`` was the default before
``sample_thin=3``). The reference draws ``reps * n_samples`` rows with its own protocol in one
call; its rows are independent chains, so consecutive blocks are independent draws.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nrgboost import (  # noqa: E402
    PEER,
    REF_SWEEPS,
    for_peer,
    from_peer,
    in_support,
    synthetic,
)

from benchmarks._common import md_table, write_result  # noqa: E402
from forestgen import NRGBoost  # noqa: E402
from forestgen.metrics import c2st  # noqa: E402

PROTOCOLS = {
    "training starts, thin 1": dict(thin=1, start="training"),
    "training starts, thin 3": dict(thin=3, start="training"),
    "q0, 100 sweeps per row (the reference's)": dict(burn_in=REF_SWEEPS - 1, start="q0",
                                                     per_row=True),
}


def run_peer(args, train, test, tmp: Path) -> tuple[dict, pd.DataFrame]:
    tr, te = tmp / "train.pkl", tmp / "test.pkl"
    ptrain = for_peer(train)
    ptrain.to_pickle(tr)
    for_peer(test, ptrain).to_pickle(te)
    job = {"train": str(tr), "test": str(te),
           "params": {"num_trees": args.trees, "num_model_samples": args.pool_size},
           "seed": 0, "n_samples": args.reps * args.n_samples, "num_steps": REF_SWEEPS,
           "samples_out": str(tmp / "samples.pkl"), "result_out": str(tmp / "result.json"),
           "n_is": 1000}
    (tmp / "job.json").write_text(json.dumps(job))
    subprocess.run([args.peer_python, str(PEER), str(tmp / "job.json")], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    res = json.loads((tmp / "result.json").read_text())
    return res, from_peer(pd.read_pickle(tmp / "samples.pkl"), train)


def spread(aucs: list[float]) -> str:
    return f"{np.mean(aucs):.3f} ± {np.std(aucs, ddof=1):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=200)
    ap.add_argument("--n-train", type=int, default=10_000)
    ap.add_argument("--n-test", type=int, default=3_000)
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--pool-size", type=int, default=80_000)
    ap.add_argument("--peer-python",
                    default=str(Path.home() / ".cache/forestgen-peers/nrgboost/bin/python"))
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--out", default="nrgboost_protocols")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    full = synthetic(args.n_train + args.n_test)
    train, test = full.iloc[: args.n_train], full.iloc[args.n_train:]
    test_in = test[in_support(test, train)].reset_index(drop=True)
    rows = []

    def save():
        write_result(args.out, "NRGBoost sampling protocols: C2ST over independent draws",
                     ([args.note] if args.note else []) + [md_table(
                         ["implementation", "protocol", "C2ST AUC (mean ± sd over draws)",
                          "draws", "sample CPU ms per row", "AUC per draw"], rows)])

    m = NRGBoost(n_trees=args.trees, pool_size=args.pool_size, max_leaves=256,
                 random_state=0).fit(train)
    for name, p in PROTOCOLS.items():
        p = dict(p)
        per_row = p.pop("per_row", False)
        aucs, cpu = [], 0.0
        for r in range(args.reps):
            c0 = time.process_time()
            x = m.sample(args.n_samples, random_state=100 + r,
                         **(dict(chains=args.n_samples) if per_row else {}), **p)
            cpu += time.process_time() - c0
            aucs.append(c2st(test_in, x).auc)
        rows.append(["forestgen", name, spread(aucs), args.reps,
                     1000 * cpu / (args.reps * args.n_samples),
                     " ".join(f"{a:.3f}" for a in aucs)])
        print(rows[-1], flush=True)
        save()
    if not args.no_peer:
        with tempfile.TemporaryDirectory() as tmp:
            res, s = run_peer(args, train, test_in, Path(tmp))
        n = args.n_samples
        aucs = [c2st(test_in, s.iloc[r * n:(r + 1) * n].reset_index(drop=True)).auc
                for r in range(args.reps)]
        rows.append(["nrgboost 0.0.3", "q0, 100 sweeps per row (its default)",
                     spread(aucs), args.reps,
                     1000 * res["sample_cpu_s"] / (args.reps * n),
                     " ".join(f"{a:.3f}" for a in aucs)])
        print(rows[-1], flush=True)
        save()


if __name__ == "__main__":
    main()
