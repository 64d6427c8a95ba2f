"""Issue 37: does redrawing the columns of an anchor row one after the other (a Gibbs sweep from
the anchor, each column's tree reading the values already redrawn) keep the joint law better
than redrawing every column from the anchor's own values (synthpop's and ``Anchored``'s
draws)? A donor sampler (``bench_anchored.donor``'s) in both forms, scored as the leaderboard
scores its cells (C2ST against held-out rows and TSTR of the table's target).

    python benchmarks/leaderboard/tables.py /tmp/tables
    python benchmarks/bench_sequential_donor.py /tmp/tables california,abalone,fair,airquality

Prints ``table seed {form: (C2ST AUC, TSTR)}`` for ``donor`` (every column from the anchor's
values), ``seq`` (one sequential sweep) and ``seq2`` (two sweeps).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anchored import split  # noqa: E402

import forestgen.metrics as fm  # noqa: E402


def donor(train: pd.DataFrame, kinds: dict, n: int, seed: int, leaf: int = 5,
          seq: bool = False, sweeps: int = 1) -> pd.DataFrame:
    """Donor draws: each column copied from a random training row in the leaf its tree (grown
    on the other columns) gives the anchor row, or with ``seq`` the row redrawn so far."""
    rng = np.random.default_rng(seed)
    cols = {}
    for c in train.columns:
        if kinds[c] == "categorical":
            cols[c] = pd.Categorical(train[c]).codes.astype(float)
        else:
            v = train[c].astype(float).to_numpy()
            cols[c] = np.where(np.isnan(v), np.nanmin(v) - 1, v) if np.isnan(v).any() else v
    E = pd.DataFrame(cols).to_numpy()
    anchors = rng.integers(len(train), size=n)
    cur = E[anchors].copy()
    picks = np.tile(anchors[:, None], (1, E.shape[1]))
    trees = []
    for j, c in enumerate(train.columns):
        X = np.delete(E, j, axis=1)
        tree = (DecisionTreeClassifier if kinds[c] == "categorical" else DecisionTreeRegressor)(
            min_samples_leaf=leaf, random_state=seed).fit(X, E[:, j])
        trees.append((tree, tree.apply(X)))
    src = cur.copy()
    for _ in range(sweeps):
        for j in range(len(train.columns)):
            tree, at = trees[j]
            where = tree.apply(np.delete(cur if seq else src, j, axis=1))
            for leaf_id in np.unique(where):
                rows = np.flatnonzero(where == leaf_id)
                pool = np.flatnonzero(at == leaf_id)
                pk = pool[rng.integers(len(pool), size=len(rows))]
                picks[rows, j] = pk
                cur[rows, j] = E[pk, j]
        src = cur.copy()
    out = {c: train[c].to_numpy()[picks[:, j]] for j, c in enumerate(train.columns)}
    syn = pd.DataFrame(out)
    for c in train.columns:
        syn[c] = syn[c].astype(train[c].dtype)
    return syn


def main() -> None:
    tables = Path(sys.argv[1])
    for name in sys.argv[2].split(","):
        target = json.loads((tables / name / "meta.json").read_text())["target"]
        for seed in (0, 1, 2):
            train, test, kinds = split(tables, name, seed)
            out = {}
            for g, kw in [("donor", {}), ("seq", {"seq": True}),
                          ("seq2", {"seq": True, "sweeps": 2})]:
                syn = donor(train, kinds, len(train), seed, **kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    auc = fm.c2st(test, syn, kinds=kinds, random_state=seed, n_threads=1).auc
                    u = fm.tstr(train, syn, target, test=test, kinds=kinds, random_state=seed,
                                n_threads=1)
                t = u.tstr["auc" if u.task == "classification" else "r2"]
                out[g] = (round(float(auc), 3), round(float(t), 3))
            print(name, seed, out, flush=True)


if __name__ == "__main__":
    main()
