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
print(json.dumps({"fit_s": fit_s, "cpu_s": cpu_s,
                  "grow_s": float(sum(r["grow_seconds"] for r in m.rounds_))}))
