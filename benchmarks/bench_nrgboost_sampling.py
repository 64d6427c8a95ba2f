"""NRGBoost sampling protocols: CPU per row and C2ST AUC, same model, same seeds (issue 13).

Fits (or loads with ``--model``) one forestgen NRGBoost on the mixed synthetic table of
``bench_nrgboost.py`` (10,000 training rows, package defaults, ``random_state=0``), then draws
1,000 rows per protocol and sample seed, timing ``sample`` in process CPU seconds and scoring
the rows with the bench's C2ST (``forestgen.metrics.c2st`` against the held-out rows, the
discriminator seeded like the sample). A protocol ``C:B`` = ``C`` chains started at final
training-pool states, ``B`` sweeps of burn-in, then a row per sweep; ``ind`` = one chain per row
from a ``q0`` draw with 100 sweeps (the reference's protocol), ``ind:B`` the same with ``B``
sweeps; ``real`` = training rows instead of samples (the C2ST floor of real against real).

    python benchmarks/bench_nrgboost_sampling.py --trees 100 --seeds 1,2 \
        --protocols 64:10,32:3,128:0,256:0
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import md_table, write_result  # noqa: E402
from benchmarks.bench_nrgboost import in_support, synthetic  # noqa: E402
from forestgen import NRGBoost  # noqa: E402
from forestgen.metrics import c2st  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--protocols", default="64:10,32:3,128:0,256:0")
    ap.add_argument("--n-samples", type=int, default=1000)
    ap.add_argument("--model", default=None, help="a saved model to load (fitted and saved "
                                                  "there when the file does not exist)")
    ap.add_argument("--out", default="nrgboost_sampling")
    ap.add_argument("--note", default="", help="a line for the results file (e.g. the load)")
    args = ap.parse_args()
    full = synthetic(13_000)
    train, test = full.iloc[:10_000], full.iloc[10_000:]
    test_in = test[in_support(test, train)].reset_index(drop=True)
    if args.model and Path(args.model).exists():
        m = NRGBoost.load(args.model)
    else:
        m = NRGBoost(n_trees=args.trees, max_leaves=256, random_state=0).fit(train)
        if args.model:
            m.save(args.model)
    m.sample(50, random_state=0)  # compile outside the timings
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    for proto in args.protocols.split(","):
        if proto.startswith("ind"):
            b = int(proto.split(":")[1]) if ":" in proto else 100
            kw = dict(chains=args.n_samples, burn_in=b, thin=1, start="q0")
        elif proto == "real":
            kw = None
        else:
            ch, b = proto.split(":")
            kw = dict(chains=int(ch), burn_in=int(b))
        cpu, auc = [], []
        for s in seeds:
            c0 = time.process_time()
            x = (train.sample(args.n_samples, random_state=s).reset_index(drop=True)
                 if kw is None else m.sample(args.n_samples, random_state=s, **kw))
            cpu.append(time.process_time() - c0)
            auc.append(c2st(test_in, x, random_state=s).auc)
        rows.append([proto, m.n_trees_, 1000 * np.mean(cpu) / args.n_samples,
                     " / ".join(f"{a:.3f}" for a in auc), float(np.mean(auc))])
        print(rows[-1], flush=True)
    write_result(args.out, "NRGBoost sampling protocols (CPU per row, C2ST AUC)",
                 ([args.note] if args.note else []) + [
                     md_table(["protocol (chains:burn-in)", "trees", "CPU ms per row",
                               "C2ST AUC per seed", "C2ST AUC mean"], rows)])


if __name__ == "__main__":
    main()
