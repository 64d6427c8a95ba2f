"""Child process of ``bench_nrgboost.py --before``: fit NRGBoost with whichever forestgen is on
``PYTHONPATH``, time the fit, and save its outputs for the bitwise comparison.

Usage: ``python _nrgboost_side.py job.json`` (written by the parent); prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd

from forestgen import NRGBoost

job = json.loads(open(sys.argv[1]).read())
train, test = pd.read_pickle(job["train"]), pd.read_pickle(job["test"])
NRGBoost(**{**job["params"], "n_trees": 2}).fit(train.head(300))  # compile / load kernels
t0, c0 = time.perf_counter(), time.process_time()
m = NRGBoost(**job["params"]).fit(train)
fit_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
np.savez(job["out"] + ".npz", log_prob=m.log_prob(test), value=m.energy_.trees.value,
         feature=m.energy_.trees.feature, cat_left=m.energy_.trees.cat_left)
m.sample(job["n_samples"], random_state=1).to_pickle(job["out"] + ".pkl")


def grow_once(seed: int):
    """One tree of the energy splitter alone, on the training codes against the final pool
    (the splitter's API changed with issue 10: both are supported)."""
    import forestgen.families.energy.splitter as E

    C = np.ascontiguousarray(m.grid_.codes(m.encoder_.transform(train))[0].T)
    wd = np.full(C.shape[1], 1.0 / C.shape[1])
    Xq, wq = np.ascontiguousarray(m.pool_.codes.T), m.pool_.weights()
    rng = np.random.default_rng(seed)
    if hasattr(E, "grid_data"):
        from forestgen.splitters.base import GrowLimits

        return lambda: E.EnergySplitter().grow(E.grid_data(m.grid_, C, Xq, wq), None, wd, rng,
                                               GrowLimits(max_features=1.0, max_leaves=256))
    sp = E.EnergySplitter(criterion="chi2", max_leaves=256)
    return lambda: sp.grow(m.grid_, C, wd, Xq, wq, None, rng)


run = grow_once(0)
run()
splitter_s = []
for _ in range(5):
    t0 = time.process_time()
    for _ in range(5):
        run()
    splitter_s.append((time.process_time() - t0) / 5)
print(json.dumps({"fit_s": fit_s, "cpu_s": cpu_s, "splitter_cpu_s": min(splitter_s),
                  "grow_s": float(sum(r["grow_seconds"] for r in m.rounds_))}))
