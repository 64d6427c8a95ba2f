"""XGBoost baseline for ``bench_nrgboost_table1.py`` (run with the peer venv's interpreter).

Random search as in the NRGBoost paper's §7.3 (fewer trials when the job says so): learning
rate LogU[1e-3, 1], max_leaves in 16..1024 (powers of 2), min_child_weight LogU[0.1, 1e3],
reg_lambda / reg_alpha 0 w.p. 1/2 else LogU[1e-3, 10]; lossguide, hist, max_depth 0, up to
1000 rounds with early stopping (patience 50) on the validation set; ``predict`` uses
the best round. Input/output: one .npz each.
"""

import sys
import time

import numpy as np
import xgboost as xgb


def main(job, out):
    d = np.load(job)
    rng = np.random.default_rng(int(d["seed"]))
    best = (np.inf, None)
    c0 = time.process_time()
    def logu(lo, hi):
        return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))

    for _ in range(int(d["trials"])):
        p = {"learning_rate": float(np.exp(rng.uniform(np.log(1e-3), 0))),
             "max_leaves": int(2 ** rng.integers(4, 11)),
             "min_child_weight": float(np.exp(rng.uniform(np.log(0.1), np.log(1e3)))),
             "reg_lambda": 0.0 if rng.random() < 0.5 else logu(1e-3, 10),
             "reg_alpha": 0.0 if rng.random() < 0.5 else logu(1e-3, 10),
             "grow_policy": "lossguide", "tree_method": "hist", "max_depth": 0,
             "n_estimators": 1000, "early_stopping_rounds": 50, "n_jobs": 1}
        m = xgb.XGBRegressor(**p)
        m.fit(d["Xtr"], d["ytr"], eval_set=[(d["Xva"], d["yva"])], verbose=False)
        err = np.mean((m.predict(d["Xva"]) - d["yva"]) ** 2)
        if err < best[0]:
            best = (err, m)
    np.savez(out, pred=best[1].predict(d["Xte"]), cpu_s=time.process_time() - c0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
