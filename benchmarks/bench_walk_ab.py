"""ARF's fused log-p walk, one thread, median of 7 calls: complete rows, rows with NaN and
``log_prob`` given an interval (2,000 adult query rows, 30 trees, 4,000 training rows).

Run it once per checkout, alternating, for an A/B of the walk kernels on a loaded machine
(a short run per side, so both see about the same load):

    for t in /path/to/before /path/to/after; do
        PYTHONPATH=$t NUMBA_NUM_THREADS=1 python benchmarks/bench_walk_ab.py $t; done
"""

from __future__ import annotations

import sys
import time
import warnings

import numba
import numpy as np

from forestgen import ARF
from forestgen.data import load_adult


def main() -> None:
    warnings.filterwarnings("ignore")
    numba.set_num_threads(1)
    df = load_adult().sample(6000, random_state=0).reset_index(drop=True)
    train, test = df.iloc[:4000].reset_index(drop=True), df.iloc[4000:].reset_index(drop=True)
    rng = np.random.default_rng(1)
    nan = test.copy()
    for c in nan.columns:
        nan.loc[rng.random(len(nan)) < 0.1, c] = None
    m = ARF(n_trees=30, random_state=0, n_jobs=1).fit(train)
    free = test.iloc[:300].drop(columns=["age"])
    tasks = {"log_prob": lambda: m.log_prob(test), "log_prob NaN": lambda: m.log_prob(nan),
             "given an interval": lambda: m.log_prob(free, conditions={"age": (30, 50)})}
    for f in tasks.values():  # compile
        f()
    out = {}
    for name, f in tasks.items():
        ts = []
        for _ in range(7):
            t = time.process_time()
            f()
            ts.append(time.process_time() - t)
        out[name] = round(float(np.median(ts)), 4)
    print(sys.argv[1] if len(sys.argv) > 1 else "this", out)


if __name__ == "__main__":
    main()
