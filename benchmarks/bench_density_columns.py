"""Where a learner's held-out density falls below the column marginals: column by column.

    python benchmarks/bench_density_columns.py TABLES_DIR TABLE[,...] SEED [LEARNER] [JSON]

``TABLES_DIR``: the leaderboard's exported tables (``benchmarks/leaderboard/tables.py``); each
table is split as the leaderboard splits it (``bench_anchored.split``: 70/30, at most 500
training and 500 test rows). ``LEARNER`` (default ``Anchored``) is fitted with
``random_state=SEED`` and the parameters ``JSON`` (e.g. ``'{"prior_strength": 2.0}'``), and
the product of the column marginals (``forestgen.auto.marginals_model``) beside it.

Prints per table the mean held-out log-likelihood per row of both (``joint``), then per column
the mean log-likelihood of the column alone (every other entry missing, so marginalised:
the learner's one-column marginal), the difference and the learner's lowest row. A joint
deficit that no column shows is the joint law's (components too narrow for new rows); a
column's deficit is its one-column law's (e.g. spikes at repeated grid values that the
marginals keep and a smooth kernel does not).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_anchored import split  # noqa: E402

import forestgen  # noqa: E402
from forestgen.auto import marginals_model  # noqa: E402


def only(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """``rows`` with every entry but ``column``'s missing."""
    out = rows.copy()
    for c in rows.columns:
        if c != column:
            out[c] = pd.Series([None] * len(rows), dtype=rows[c].dtype, index=rows.index) \
                if isinstance(rows[c].dtype, pd.CategoricalDtype) else np.nan
    return out


def main() -> None:
    warnings.simplefilter("ignore")
    tables, names, seed = Path(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3])
    learner = getattr(forestgen, sys.argv[4] if len(sys.argv) > 4 else "Anchored")
    params = json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}
    for name in names:
        train, test, _ = split(tables, name, seed)
        model = learner(random_state=seed, **params).fit(train)
        marg = marginals_model().fit(train)
        print(f"{name} seed {seed} joint: {learner.__name__} "
              f"{np.mean(model.log_prob(test)):.3f} marginals {np.mean(marg.log_prob(test)):.3f}")
        for c in test.columns:
            rows = only(test, c)
            a, m = np.asarray(model.log_prob(rows)), np.asarray(marg.log_prob(rows))
            print(f"  {c:24s} {a.mean():9.3f} {m.mean():9.3f}  diff {a.mean() - m.mean():7.3f}"
                  f"  lowest {a.min():8.2f}")


if __name__ == "__main__":
    main()
