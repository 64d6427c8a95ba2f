"""Anchored against the Chain, ARF and a donor sampler, by C2ST against held-out rows.

    python benchmarks/bench_anchored.py TABLES_DIR TABLE[,...] SEED[,...] GEN[/GEN...] [tstr]

``TABLES_DIR``: the leaderboard's exported tables (``benchmarks/leaderboard/tables.py``); each
(table, seed) is the leaderboard's split (70/30, at most 500 training and 500 test rows;
``benchmarks/leaderboard/run.py``), scored as its cells are (``forestgen.metrics.c2st`` of the
test rows against as many synthetic rows, one thread). Generators, separated by ``/``:

* ``chain``, ``arf``: ``Chain()`` and ``ARF()`` at their defaults;
* ``anchored`` or ``anchored:k=v:...``: ``Anchored`` with parameters (a number, or a
  rule such as ``marginal_weight=auto``; ``nl=c[:tl=t]``: the
  numeric leaf a kernel of bandwidth factor ``c``, no defensive share, column share ``t``);
* ``donor``: the sampler of synthyverse's ``synthpop`` written here from its description —
  scikit-learn trees per column on all the other columns (leaves of at least 5 rows), an anchor
  row drawn per synthetic row and each column's value copied from a random training row in
  the anchor's leaf (no density: the reference for the draws ``Anchored`` makes).

* ``marginals``: the product of the column marginals (``forestgen.auto.marginals_model``).

Prints one line per (table, seed): ``table seed {generator: (AUC, test log-likelihood per
row, CPU s)}`` (no log-likelihood for ``donor``), and for ``Anchored`` the back-off weight it
kept (``"<generator> weight"``: ``marginal_weight_``). With ``tstr`` last, each generator draws as
many rows as the training rows (as the leaderboard's cells) and the tuple ends with the
leaderboard's TSTR of the table's target (``forestgen.metrics.tstr``: AUC or R^2 on the test
rows of a model trained on the draws).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent / "leaderboard"))
from cell import typed  # noqa: E402

import forestgen.metrics as fm  # noqa: E402


def split(tables: Path, name: str, seed: int, max_train: int = 500):
    """The leaderboard's train/test rows for one seed, and its column kinds."""
    d = tables / name
    meta = json.loads((d / "meta.json").read_text())
    df = pd.read_csv(d / "full.csv", keep_default_na=False, na_values=[""])
    for c, s in meta["columns"].items():
        if s["kind"] == "datetime":
            df[c] = (pd.to_datetime(df[c]) - pd.Timestamp("1970-01-01")).dt.days.astype(float)
            meta["columns"][c] = {"kind": "numeric"}
    path = Path("/tmp") / f"bench_anchored_{name}.csv"
    df.to_csv(path, index=False)
    df = typed(str(path), meta)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(df))
    n_test = int(round(0.3 * len(df)))
    test, train = df.iloc[np.sort(perm[:n_test])], df.iloc[np.sort(perm[n_test:])]
    if len(train) > max_train:
        train = train.iloc[np.sort(rng.choice(len(train), max_train, replace=False))]
    if len(test) > max_train:
        test = test.iloc[np.sort(rng.choice(len(test), max_train, replace=False))]
    kinds = {c: "categorical" if s["kind"] in ("categorical", "ordered", "bool") else "numeric"
             for c, s in meta["columns"].items()}
    return train.reset_index(drop=True), test.reset_index(drop=True), kinds


def donor(train: pd.DataFrame, kinds: dict, n: int, seed: int, leaf: int = 5) -> pd.DataFrame:
    """The donor sampler (module docstring)."""
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

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
    out = {}
    for j, c in enumerate(train.columns):
        X = np.delete(E, j, axis=1)
        tree = (DecisionTreeClassifier if kinds[c] == "categorical" else DecisionTreeRegressor)(
            min_samples_leaf=leaf, random_state=seed).fit(X, E[:, j])
        at = tree.apply(X)
        where = at[anchors]
        values = train[c].to_numpy()
        picked = np.empty(n, dtype=values.dtype)
        for leaf_id in np.unique(where):
            rows = np.flatnonzero(where == leaf_id)
            pool = np.flatnonzero(at == leaf_id)
            picked[rows] = values[pool[rng.integers(len(pool), size=len(rows))]]
        out[c] = picked
    syn = pd.DataFrame(out)
    for c in train.columns:
        syn[c] = syn[c].astype(train[c].dtype)
    return syn


def anchored(spec: str, train: pd.DataFrame, seed: int):
    from forestgen.learners import Anchored
    from forestgen.leaves import KernelLeaf

    kw: dict = {}
    for part in spec.split(":")[1:]:
        k, v = part.split("=")
        try:
            kw[k] = float(v) if "." in v else int(v)
        except ValueError:  # a rule: "held_out", "auto"
            kw[k] = v
    if "nl" in kw:
        kw["numeric_leaf"] = KernelLeaf(bandwidth=kw.pop("nl"), defensive=0.0,
                                        tail=kw.pop("tl", 0.001), adaptive=True)
    return Anchored(random_state=seed, **kw).fit(train)


def main() -> None:
    from forestgen.auto import marginals_model
    from forestgen.learners import ARF, Chain

    tables, names, seeds, gens = (Path(sys.argv[1]), sys.argv[2].split(","),
                                  [int(s) for s in sys.argv[3].split(",")], sys.argv[4].split("/"))
    with_tstr = sys.argv[5:] == ["tstr"]
    for name in names:
        target = json.loads((tables / name / "meta.json").read_text())["target"]
        for seed in seeds:
            train, test, kinds = split(tables, name, seed)
            n, res = len(train) if with_tstr else len(test), {}
            for g in gens:
                t0 = time.process_time()
                model = None
                if g == "chain":
                    model = Chain(random_state=seed).fit(train)
                elif g == "arf":
                    model = ARF(random_state=seed).fit(train)
                elif g == "marginals":
                    model = marginals_model().fit(train)
                elif g.startswith("anchored"):
                    model = anchored(g, train, seed)
                elif g != "donor":
                    raise SystemExit(f"unknown generator {g!r}")
                syn = donor(train, kinds, n, seed) if model is None else \
                    model.sample(n, random_state=seed)
                cpu = time.process_time() - t0
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    auc = fm.c2st(test, syn, kinds=kinds, random_state=seed, n_threads=1).auc
                    ll = np.nan if model is None else float(np.mean(model.log_prob(test)))
                res[g] = (round(float(auc), 3), round(ll, 2), round(cpu, 1))
                if hasattr(model, "marginal_weight_"):  # the back-off weight it chose
                    res[g + " weight"] = model.marginal_weight_
                if with_tstr:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        u = fm.tstr(train, syn, target, test=test, kinds=kinds,
                                    random_state=seed, n_threads=1)
                    res[g] += (round(float(u.tstr["auc" if u.task == "classification"
                                                   else "r2"]), 3),)
            print(name, seed, res, flush=True)


if __name__ == "__main__":
    main()
