"""Chain settings on the leaderboard_s51 splits in one process (stop 52, issue 37 item 2).

    python benchmarks/leaderboard/chain_cells.py REPO CONFIG OUT.jsonl [TABLES]

``REPO``: a copy of the repository (its ``forestgen`` and ``benchmarks/leaderboard``);
``CONFIG``: ``default`` or ``k=v+k2=v2`` — Chain parameters (values as Python literals),
``order=target_last`` visits the TSTR target last (``discrete_first``: the discrete columns
first, fewest levels first; ``nominal_first``: those but integer columns), ``C.NAME=v`` sets
the constant ``NAME`` of :mod:`forestgen.families.chain.chain`, ``C.rule=small1se`` replaces
``leaf_size_choice`` by the smallest leaf within one standard error of the best,
``C.regress=1`` grows numeric columns' trees with a variance criterion on their target bins'
ranks (a user ``@njit`` gain). Each cell
of ``/tmp/leadlb/WORK`` (the leaderboard_s51 work directory: ``<table>_s<seed>/train.csv``,
``test.csv`` and a ``job.json``) is fitted and sampled as ``cell.py`` does, scored by
``score.py``'s readers and :func:`forestgen.metrics.c2st` / :func:`~forestgen.metrics.tstr`
with the cell's seed, and written with the held-out log-likelihood, the column marginals'
(``bench_scaled_defaults.marginal_ll``) and ``score.py``'s association gaps (numeric pairs,
numeric-categorical pairs, categorical pairs). Cells already in ``OUT`` are skipped.
"""
import ast
import json
import math
import resource
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(sys.argv[1])
sys.path[:0] = [str(REPO), str(REPO / "benchmarks/leaderboard"), str(REPO / "benchmarks")]
warnings.simplefilter("ignore")
from cell import typed  # noqa: E402
from run import kinds_for_metrics  # noqa: E402
from score import _read  # noqa: E402

import forestgen as fg  # noqa: E402
import forestgen.families.chain.chain as CH  # noqa: E402
import forestgen.metrics as fm  # noqa: E402

W = Path("/tmp/leadlb/WORK")  # the leaderboard_s51 splits (as leaderboard_s52's)
TABLES = ("abalone adult airquality anes96 breast_cancer california diabetes diamonds fair "
          "iris macrodata penguins wine").split()


def small1se(ll):
    """The smallest leaf size within one SE of the best tree; no split as before."""
    ok = ~np.isnan(ll).any(axis=0)
    if not ok.any():
        return 0
    x = np.where(np.isneginf(ll[:, ok]), -1e300, ll[:, ok])
    n = x.shape[1]

    def se(d):
        return d.std(ddof=1) / math.sqrt(n) if n > 1 else 0.0

    best = int(np.argmax(x.mean(axis=1)[:-1]))
    diff = x[-1] - x[best]
    if diff.mean() > se(diff):
        return len(x) - 1
    for k in range(best):
        dk = x[best] - x[k]
        if dk.mean() <= se(dk):
            return k
    return best


def regress():
    """Numeric columns' trees grown on the variance of their bins' ranks."""
    import numba

    from forestgen.splitters.impurity import ImpuritySplitter

    @numba.njit
    def vgain(left, right):
        wl = wr = sl = sr = ql = qr = 0.0
        for c in range(left.shape[0]):
            wl += left[c]
            wr += right[c]
            sl += c * left[c]
            sr += c * right[c]
            ql += c * c * left[c]
            qr += c * c * right[c]
        w = wl + wr
        if wl <= 0 or wr <= 0:
            return 0.0
        s, q = sl + sr, ql + qr
        return ((q - s * s / w) - (ql - sl * sl / wl) - (qr - sr * sr / wr)) / w

    rs = ImpuritySplitter(criterion=vgain)
    orig = CH.Chain._grow_one

    def grow_one(self, t, Z, codes, binner, splitter, rng):
        if not self.encoder_.schema.columns[int(self.order_[t])].is_discrete:
            splitter = rs
        return orig(self, t, Z, codes, binner, splitter, rng)

    CH.Chain._grow_one = grow_one


def main():
    cfg, out = sys.argv[2], Path(sys.argv[3])
    tables = sys.argv[4].split(",") if len(sys.argv) > 4 else TABLES
    params = {}
    for kv in ([] if cfg == "default" else cfg.split("+")):
        k, _, v = kv.partition("=")
        if k == "C.regress":
            regress()
        elif k == "C.rule":
            CH.leaf_size_choice = {"small1se": small1se}[v]
        elif k.startswith("C."):
            setattr(CH, k[2:], ast.literal_eval(v))
        else:
            try:
                params[k] = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                params[k] = v
    mcache = out.parent / "marginal_ll.json"
    marg = json.loads(mcache.read_text()) if mcache.exists() else {}
    done = set()
    if out.exists():
        done = {(r["table"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}
    fg.Chain(random_state=0).fit(pd.DataFrame({"a": np.arange(30.0), "b": list("ab") * 15}))
    for t in tables:
        for s in range(3):
            if (t, s) in done:
                continue
            d = W / f"{t}_s{s}"
            job = json.loads(next(d.glob("*/job.json")).read_text())
            meta = job["meta"]
            train, test = typed(str(d / "train.csv"), meta), typed(str(d / "test.csv"), meta)
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            kw = dict(params)
            if kw.get("order") == "target_last":  # the TSTR target visited last
                cols0 = [c for c in train.columns if c != meta["target"]]
                kw["order"] = cols0 + [meta["target"]]
            if kw.get("order") in ("discrete_first", "nominal_first"):  # fewest levels first
                sch = fg.Chain(min_leaf=5, prior_strength=0.5, kernel_bandwidth=0.3,
                               random_state=0).fit(train).encoder_.schema
                disc = sorted([c.name for c in sch.columns if c.is_discrete and (
                    kw["order"] == "discrete_first" or c.kind != "integer")],
                    key=lambda name: sch[name].n_levels)
                kw["order"] = disc + [c for c in train.columns if c not in disc]
            m = fg.Chain(**kw, random_state=s).fit(train)
            syn = m.sample(job["n_synth"], random_state=s)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
            ll = float(np.mean(np.asarray(m.log_prob(test), float)))
            p = out.parent / f"{out.stem}.syn_{t}_{s}.csv"  # one per run: runs side by side
            pd.DataFrame(syn).to_csv(p, index=False)
            kinds, cols = kinds_for_metrics(meta), list(meta["columns"])
            tr, te, sy = (_read(str(q), cols, kinds) for q in (d / "train.csv", d / "test.csv", p))
            c2 = fm.c2st(te, sy, kinds=kinds, random_state=s, n_threads=1)
            u = fm.tstr(tr, sy, meta["target"], test=te, kinds=kinds, random_state=s,
                        n_threads=1)
            key = "auc" if u.task == "classification" else "r2"
            if f"{t}_{s}" not in marg:
                from bench_scaled_defaults import marginal_ll

                marg[f"{t}_{s}"] = marginal_ll(train, test)
                mcache.write_text(json.dumps(marg))
            gap = fm.association_gap(tr, sy, kinds=kinds, max_rows=5000, random_state=s).matrix
            num = [c for c in cols if kinds[c] == "numeric"]
            cat = [c for c in cols if kinds[c] == "categorical"]

            def pair_mean(a, b, g=gap):
                v = [g.loc[x, y] for x in a for y in b if x != y]
                return float(np.mean(v)) if v else None

            rec = dict(config=cfg, table=t, seed=s, c2st_auc=c2.auc, tstr=u.tstr[key],
                       corr_gap=pair_mean(num, num), mixed_gap=pair_mean(num, cat),
                       contingency_gap=pair_mean(cat, cat),
                       test_ll=ll, marginal_ll=marg[f"{t}_{s}"], cpu_s=cpu,
                       min_leaf_=np.asarray(m.min_leaf_).tolist())
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(t, s, round(c2.auc, 3), round(u.tstr[key], 3), round(ll, 2), flush=True)


if __name__ == "__main__":
    main()
