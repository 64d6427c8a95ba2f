"""Anchored mixed with the column marginals: C2ST of the draws and held-out log-likelihood.

    python benchmarks/bench_anchored_backoff.py TABLES_DIR TABLE[,TABLE...]

For each table (seed 0, the leaderboard's split: ``bench_anchored.split``) and each weight
``l`` of (0, 0.02, 0.05, 0.1, 0.2): the model ``(1 - l) Anchored() + l marginals`` (the product
of the column marginals, ``forestgen.auto.marginals_model``); its test log-likelihood per row
(the log of the mixture of the two densities) and the C2ST of as many draws as test rows, a
binomial share ``l`` of them drawn from the marginals. Prints one line per table:
``table seed marg <marginals LL> {l: (AUC, LL)}``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anchored import split  # noqa: E402

import forestgen.metrics as fm  # noqa: E402
from forestgen.auto import marginals_model  # noqa: E402
from forestgen.learners import Anchored  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore")
    tables, seed = Path(sys.argv[1]), 0
    for name in sys.argv[2].split(","):
        train, test, kinds = split(tables, name, seed)
        a, m = Anchored(random_state=seed).fit(train), marginals_model().fit(train)
        la, lm = a.log_prob(test), m.log_prob(test)
        n, out = len(test), {}
        for lam in (0.0, 0.02, 0.05, 0.1, 0.2):
            ll = float(np.mean(np.logaddexp(np.log1p(-lam) + la, np.log(lam) + lm))) if lam \
                else float(la.mean())
            k = np.random.default_rng(seed).binomial(n, lam)
            syn = a.sample(n - k, random_state=seed)
            if k:
                syn = pd.concat([syn, m.sample(k, random_state=seed + 1)], ignore_index=True)
            auc = fm.c2st(test, syn, kinds=kinds, random_state=seed, n_threads=1).auc
            out[lam] = (round(float(auc), 3), round(ll, 2))
        print(name, seed, "marg", round(float(lm.mean()), 2), out, flush=True)


if __name__ == "__main__":
    main()
