"""Do the leaf mixture's ways of computing ``log p`` agree? The walk
(:mod:`forestgen.inference.marginal_walk`) called by ``log_prob`` and by the evidence mass
(:mod:`forestgen.inference.evidence_mass`, given the observed values as point evidence: the
same walk since issue 31, so the first column reads 0) and the enumerating path
(:func:`forestgen.inference.posterior.iter_posterior`), on rows with missing
entries; and, with leaf classes the walks do not know (subclasses), what the enumerating path
gives for ``log_prob`` (``--pairs OUT.npz``, to compare two checkouts with
``framework_bitcheck.py compare``).

    python benchmarks/framework_engines.py
    python benchmarks/framework_engines.py --pairs pairs.npz
"""

from __future__ import annotations

import sys
import warnings

import numpy as np


def _table():
    from sklearn.datasets import load_diabetes

    df = load_diabetes(as_frame=True).frame.iloc[:300].copy()
    df["sex"] = df["sex"].map(lambda v: "m" if v > 0 else "f")
    return df


def engines() -> None:
    from forestgen.inference.conditions import Evidence
    from forestgen.inference.evidence_mass import evidence_log_mass
    from forestgen.inference.leaf_factors import supported_columns
    from forestgen.inference.marginal_walk import fused_rows, marginal_log_prob
    from forestgen.inference.posterior import iter_posterior
    from forestgen.learners import ARF, DEF, RFDE

    df = _table()
    rng = np.random.default_rng(0)
    q = df.iloc[:200].copy()
    for c in ["bmi", "sex", "s5", "age"]:
        q.loc[rng.random(len(q)) < 0.3, c] = np.nan

    def mx(x):
        return float(np.max(np.abs(x))) if len(x) else float("nan")

    for name, m in {"ARF": ARF(n_trees=10, random_state=0), "DEF": DEF(n_trees=5, random_state=0),
                    "RFDE": RFDE(n_trees=5, random_state=0)}.items():
        m.fit(df)
        keep = [c for c, ok in zip(df.columns, supported_columns(m)) if ok]
        m.fit(df[keep])
        Z = m.encode_rows(q[keep])
        nan = np.full(Z.shape, np.nan)
        ev = Evidence(Z, nan.copy(), nan.copy())
        f = fused_rows(m, Z)
        a = marginal_log_prob(m, Z[f])
        done, b = evidence_log_mass(m, ev)
        c = np.empty(len(Z))
        for ch in iter_posterior(m, ev):
            c[ch.rows] = ch.lognorm
        both = done[f]
        print(f"{name}: fused {f.sum()}/{len(Z)}, evidence walk {done.sum()}/{len(Z)}; "
              f"max |marginal - evidence_mass| = {mx(a[both] - b[f][both]):.3g}, "
              f"max |marginal - enumeration| = {mx(a - c[f]):.3g}, "
              f"max |evidence_mass - enumeration| = {mx(b[done] - c[done]):.3g}")


def pairs(out: str) -> None:
    from forestgen.inference.marginal_walk import fused_rows
    from forestgen.learners import ARF, DEF, GeF
    from forestgen.leaves.categorical import CategoricalLeaf
    from forestgen.leaves.truncnorm import TruncNormalLeaf

    class PlainNormal(TruncNormalLeaf):
        """A subclass: the walks do not assume its factors."""

    class PlainCategorical(CategoricalLeaf):
        pass

    df = _table()
    rng = np.random.default_rng(0)
    q = df.iloc[:80].copy()
    qn = q.copy()
    for c, share in (("bmi", 0.4), ("sex", 0.3), ("s5", 0.3)):
        qn.loc[rng.random(len(q)) < share, c] = np.nan
    res = {}
    for name, make in {
            "ARF": lambda: ARF(n_trees=5, random_state=0, numeric_leaf=PlainNormal,
                               discrete_leaf=PlainCategorical),
            "DEF": lambda: DEF(n_trees=4, random_state=0, numeric_leaf=PlainNormal),
            "GeF": lambda: GeF(n_trees=4, random_state=0, numeric_leaf=PlainNormal)}.items():
        m = make().fit(df, target="sex") if name == "GeF" else make().fit(df)
        encode = getattr(m, "encode_rows", None) or m._encode  # checkouts before 2d1250f
        Z = encode(qn)
        print(name, "rows on the fused walk:", int(fused_rows(m, Z).sum()), "of", len(Z))
        res[name + ".lpn"] = m.log_prob(qn)
        res[name + ".lp"] = m.log_prob(q)
        res[name + ".clp"] = m.log_prob(q[["age", "bmi", "bp"]], conditions={"sex": "m"})
    np.savez(out, **res)


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    if len(sys.argv) > 2 and sys.argv[1] == "--pairs":
        pairs(sys.argv[2])
    else:
        engines()
