"""R arf's held-out log-likelihood from its fitted parameters, with cells scored as masses.

``rarf_run.R`` writes the parameters of R arf's FORDE (per leaf: a truncated normal per numeric
column, a pmf per categorical column, the leaf's coverage). The model's density is the mixture
``sum_l cvg_l / T * prod_j f_lj(x_j)`` over every leaf ``l`` of the ``T`` trees, with R's
``dtruncnorm`` on the leaf's interval ``(min, max]`` (arf 0.2.4's ``lik()`` gives a value on the
lower bound 0). :func:`rarf_loglik` computes it (reproducing ``lik()``'s normalised figure, which
the leaderboard checks cell by cell) and, for the cells given in ``lo``/``hi``, replaces the
density ``f_lj(x_j)`` by the probability of the cell ``P_lj(lo < X <= hi)``: a mass on the base
measure forestgen uses there (:mod:`basemeasure`). Summing over every leaf rather than the one
leaf per tree that holds the value matters for the cell, which may reach into a tree's other
leaves, and on tables with missing training values, where ranger's learned NaN directions make
leaves of one tree overlap (``lik()`` keeps only ranger's leaf there, a sub-density).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import logsumexp, ndtr


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=["", "NA"])


def rarf_loglik(outdir: Path, lo: pd.DataFrame | None = None,
                hi: pd.DataFrame | None = None) -> np.ndarray:
    """Per held-out row: R arf's log-likelihood, with the (lo, hi] cells as masses.

    ``lo``/``hi`` have the test table's shape and column order (NaN: keep the density).
    A missing value is marginalised out (its factor is 1), as forestgen's ``log_prob`` does;
    ``lik()`` gives such a row -inf.
    """
    outdir = Path(outdir)
    test = _read(outdir / "test_as_read.csv")
    cnt = _read(outdir / "params_cnt.csv")
    cat = _read(outdir / "params_cat.csv")
    forest = _read(outdir / "params_forest.csv").sort_values("f_idx")
    leaves = forest.f_idx.to_numpy()
    pos = pd.Series(np.arange(leaves.size), index=leaves)
    logw = np.log(forest.cvg.to_numpy(float) / forest.tree.max())
    n = len(test)
    with np.errstate(divide="ignore", invalid="ignore"):
        logf = np.zeros((n, leaves.size))
        for j, col in enumerate(test.columns):
            c = cnt[cnt.variable == col]
            if len(c):
                k = pos[c.f_idx.to_numpy()].to_numpy()
                mn, mx, mu, sd = (np.full(leaves.size, np.nan) for _ in range(4))
                mn[k], mx[k] = c["min"].to_numpy(float), c["max"].to_numpy(float)
                mu[k], sd[k] = c.mu.to_numpy(float), c.sigma.to_numpy(float)
                z = ndtr((mx - mu) / sd) - ndtr((mn - mu) / sd)
                x = pd.to_numeric(test[col], errors="coerce").to_numpy(float)[:, None]
                u = (x - mu) / sd
                f = np.exp(-0.5 * u * u) / (np.sqrt(2 * np.pi) * sd * z)
                f = np.where((x > mn) & (x <= mx), f, 0.0)
                if lo is not None:
                    a = lo.iloc[:, j].to_numpy(float)[:, None]
                    b = hi.iloc[:, j].to_numpy(float)[:, None]
                    cell = ~np.isnan(a[:, 0])
                    pa = (ndtr((np.clip(a, mn, mx) - mu) / sd) - ndtr((mn - mu) / sd)) / z
                    pb = (ndtr((np.clip(b, mn, mx) - mu) / sd) - ndtr((mn - mu) / sd)) / z
                    f[cell] = np.clip(pb - pa, 0.0, None)[cell]
                f[np.isnan(x[:, 0])] = 1.0
                logf += np.log(f)
                continue
            c = cat[cat.variable == col]
            if len(c):
                vals = np.array([None if pd.isna(v) else str(v) for v in test[col]],
                                dtype=object)
                table = c.assign(val=c.val.astype(str)).pivot_table(
                    index="val", columns="f_idx", values="prob", fill_value=0.0)
                table = table.reindex(columns=leaves, fill_value=0.0)
                p = np.zeros((n, leaves.size))
                p[np.array([v is None for v in vals])] = 1.0
                seen = np.array([v is not None and v in table.index for v in vals])
                if seen.any():
                    p[seen] = table.loc[list(vals[seen])].to_numpy(float)
                logf += np.log(p)
        return logsumexp(logf + logw, axis=1)
