"""Where NRGBoost's fit and a Gibbs sweep spend their CPU time (issue 33 item 4).

1. One fit on the 10,000 synthetic training rows of ``bench_nrgboost.py`` with the bench's
   protocol (pool 80,000, 256 leaves, flat refill k = 30, 200,000 q0 rows for log Z) under
   ``cProfile`` with process time, single-threaded: CPU seconds per step.
2. The energy of 200,000 q0 rows under the fitted trees: tree walk against leaf bitsets
   (``leaf_energy_kernel``), same sums bit for bit.
3. CPU per Gibbs chain-sweep at the fitted size (chains from q0) and with one tree (about the
   floor: the per-column softmax over all codes).

    NUMBA_NUM_THREADS=1 nice -n 10 python benchmarks/profile_nrgboost.py --trees 60
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import md_table, write_result  # noqa: E402
from benchmarks.bench_nrgboost import synthetic  # noqa: E402

STEPS = [("Gibbs refill of the pool (gibbs_kernel)", "gibbs.py", "gibbs_kernel"),
         ("tree growing (grow_energy_tree)", "grow.py", "grow_energy_tree"),
         ("energy of rows, leaf bitsets (leaf_energy_kernel)", "leaf_sets.py",
          "leaf_energy_kernel"),
         ("energy of rows, tree walk (energy_kernel)", "ensembler.py", "energy_kernel"),
         ("  of which log Z by importance sampling", "nrgboost.py", "_estimate_log_z"),
         ("appending a tree (EnergyTrees.append)", "ensembler.py", "append"),
         ("leaf bitset tables (build / extend)", "ensembler.py", "leaf_sets"),
         ("pool weights, logsumexp, resampling (SamplePool.update, own time)", "gibbs.py",
          "update")]


def fit_profile(T: int):
    from forestgen import NRGBoost

    df = synthetic(13_000).iloc[:10_000]
    kw = dict(pool_size=80_000, max_leaves=256, n_normaliser_samples=200_000, refill_trees=30)
    NRGBoost(n_trees=3, random_state=0, **kw).fit(df.head(300))  # compile / load kernels
    prof = cProfile.Profile(time.process_time)
    c0 = time.process_time()
    prof.enable()
    m = NRGBoost(n_trees=T, random_state=0, **kw).fit(df)
    prof.disable()
    total = time.process_time() - c0
    stats = pstats.Stats(prof).stats
    rows = []
    for label, file, fn in STEPS:
        hit = [v for k, v in stats.items() if k[0].endswith(file) and k[2] == fn]
        own = fn == "update"
        cpu = sum(v[2] if own else v[3] for v in hit)
        rows.append([label, cpu, 100 * cpu / total])
    return m, total, rows


def energy_walk_vs_bits(m):
    from forestgen.families.energy.ensembler import energy_kernel
    from forestgen.families.energy.leaf_sets import leaf_energy_kernel

    e, tr = m.energy_, m.energy_.trees
    C = e.sample_q0(200_000, np.random.default_rng(0))
    view = tr.leaf_sets(e.grid).view(tr.value)
    out = {}
    for name, run in (("walk", lambda: energy_kernel.serial(C, tr.roots, *tr.args())),
                      ("bits", lambda: leaf_energy_kernel.serial(C, 0, tr.n_trees,
                                                                  e.grid.code_offsets, view,
                                                                  256))):
        run()
        best = 1e9
        for _ in range(3):
            c = time.process_time()
            res = run()
            best = min(best, time.process_time() - c)
        out[name] = (best, res)
    return out


def sweep_parts(m, chains: int = 128, sweeps: int = 10):
    """µs CPU per chain-sweep with all trees and with the first tree only."""
    import forestgen.families.energy.gibbs as G

    e = m.energy_
    X0 = e.sample_q0(chains, np.random.default_rng(5))
    S = G.GibbsSampler()

    def timed(model):
        S.run(model.energy_, X0[:2], n_sweeps=1, record_from=0, thin=1, n_records=1,
              rng=np.random.default_rng(0))
        best = 1e9
        for _ in range(3):
            c = time.process_time()
            S.run(model.energy_, X0, n_sweeps=sweeps, record_from=sweeps - 1, thin=1,
                  n_records=1, rng=np.random.default_rng(1))
            best = min(best, time.process_time() - c)
        return 1e6 * best / (chains * sweeps)

    full = timed(m)
    one = timed(m.truncated(1))
    sets = e.trees.leaf_sets(e.grid)
    return full, one, len(sets.cols), sets.words


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", type=int, default=60)
    ap.add_argument("--out", default="nrgboost_s43_profile")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    m, total, rows = fit_profile(args.trees)
    print(total, rows, flush=True)
    ew = energy_walk_vs_bits(m)
    same = bool(np.array_equal(ew["walk"][1], ew["bits"][1]))
    full, one, nnz, words = sweep_parts(m)
    sections = ([args.note] if args.note else []) + [
        f"## Fit, {args.trees} trees: {total:.2f} CPU s (cProfile, process time)",
        md_table(["step", "CPU s", "% of fit"], rows, 2),
        "Times are inclusive (a step's callees count in it) except the pool's own time; "
        "log Z by importance sampling is the part of the energy kernels run by the "
        "normaliser after the last round.",
        "## Energy of 200,000 q0 rows under the fitted trees (best of 3, one thread)",
        md_table(["tree walk CPU s", "leaf bitsets CPU s", "walk / bitsets", "bitwise equal"],
                 [[ew["walk"][0], ew["bits"][0], ew["walk"][0] / ew["bits"][0], same]]),
        f"## Gibbs sweep at {args.trees} trees (128 chains from q0, 10 sweeps, best of 3)",
        md_table(["µs CPU per chain-sweep", "with 1 tree (softmax floor)",
                  "tree-column pairs", "words per leaf bitset"],
                 [[full, one, nnz, words]]),
    ]
    write_result(args.out, "NRGBoost: where the fit and the Gibbs sweep spend CPU", sections)


if __name__ == "__main__":
    main()
