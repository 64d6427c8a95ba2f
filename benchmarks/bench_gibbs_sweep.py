"""CPU per Gibbs chain-sweep of a fitted NRGBoost, for this checkout and, with ``--before``,
another forestgen checkout (each in a fresh process, alternating), on the same saved model.

The model: ``NRGBoost(n_trees=T, random_state=0)`` fitted on the 10,000 synthetic training rows
of ``bench_nrgboost.py`` (fitted once by this checkout and saved; pass ``--model`` to reuse
one). Each side runs ``--chains`` chains (16) from the model's kept chain starts (repeated)
for ``--sweeps`` sweeps,
single-threaded (``NUMBA_NUM_THREADS=1``), best of 3, after a warm-up call; it also prints a
checksum of the recorded states, so equal checksums mean the two samplers drew the same
chains.

    nice -n 10 python benchmarks/bench_gibbs_sweep.py --trees 1,20,80 --before DIR
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import REPO, md_table, write_result  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
from forestgen import NRGBoost
from forestgen.families.energy.gibbs import GibbsSampler
path, T, nsw, nch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
full = NRGBoost.load(path)
m = full.truncated(T) if T < full.n_trees_ else full
X0 = full.chain_start_[np.arange(nch) % len(full.chain_start_)].copy()
S = GibbsSampler()
S.run(m.energy_, X0, n_sweeps=2, record_from=0, thin=1, n_records=2,
      rng=np.random.default_rng(0))
best = 1e9
for _ in range(3):
    c = time.process_time()
    out = S.run(m.energy_, X0, n_sweeps=nsw, record_from=0, thin=1, n_records=nsw,
                rng=np.random.default_rng(1))
    best = min(best, time.process_time() - c)
w = np.arange(1, out.size + 1, dtype=np.int64).reshape(out.shape)
import forestgen
print(json.dumps({"us": 1e6 * best / (nch * nsw), "checksum": int((out * w).sum() % 1000003),
                  "src": forestgen.__file__}))
"""


def side(src: str, model: str, T: int, sweeps: int, chains: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()), NUMBA_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, model, str(T), str(sweeps),
                           str(chains)], env=env,
                          cwd=str(Path(src).resolve()), check=True, capture_output=True,
                          text=True)  # cwd: ``-c`` puts it first on sys.path
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", default="1,20,80", help="model prefixes timed")
    ap.add_argument("--fit-trees", type=int, default=None, help="trees fitted (default: max)")
    ap.add_argument("--sweeps", type=int, default=300)
    ap.add_argument("--chains", type=int, default=16,
                    help="chains (the kept chain starts, repeated); blocks of up to 64")
    ap.add_argument("--model", default=None, help="a saved NRGBoost to reuse")
    ap.add_argument("--before", default=None, help="another forestgen checkout to compare")
    ap.add_argument("--out", default="nrgboost_gibbs_sweep")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    trees = [int(t) for t in args.trees.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from benchmarks.bench_nrgboost import synthetic
            from forestgen import NRGBoost

            model = str(Path(tmp) / "model.fgm")
            NRGBoost(n_trees=args.fit_trees or max(trees), random_state=0,
                     progress=False).fit(synthetic(13_000).iloc[:10_000]).save(model)
        rows = []
        for T in trees:
            after = side(str(REPO), model, T, args.sweeps, args.chains)
            row = [T, after["us"]]
            if args.before:
                before = side(args.before, model, T, args.sweeps, args.chains)
                assert before["src"] != after["src"], "both sides imported the same forestgen"
                row += [before["us"], before["us"] / after["us"],
                        "yes" if before["checksum"] == after["checksum"] else "NO"]
            rows.append(row)
            print(row, flush=True)
    headers = ["trees", "µs CPU per chain-sweep (this checkout)"]
    if args.before:
        headers += ["µs (before)", "before / this", "same chains"]
    write_result(args.out, "NRGBoost Gibbs sweep: CPU per chain-sweep",
                 ([args.note] if args.note else [])
                 + [md_table(headers, rows),
                    f"This checkout: {REPO}; before: {args.before or 'not run'}. "
                    f"{args.chains} chains, {args.sweeps} sweeps, single thread, best of 3 "
                    "(process CPU time)."])


if __name__ == "__main__":
    main()
