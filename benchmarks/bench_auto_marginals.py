"""AutoForest's choice with and without its column-marginals rule (issue 37 item 4).

    python benchmarks/bench_auto_marginals.py --tables tips,quine,penguins,wine \\
        --out benchmarks/results/scaled_defaults_s44_auto.md

Per table (the split of ``bench_scaled_defaults.py``), one ``AutoForest(random_state=0)`` fit on
the training rows; from its ``leaderboard_`` (validation C2ST distance, validation
log-likelihood, the column marginals' validation log-likelihood ``marginal_ll``) the page lists
every candidate, the one chosen (the rule: a density below the marginals only as a last
resort) and the one the former rule would have chosen from the same scores (lowest C2ST
distance, ties within the tolerance to the higher log-likelihood), with the chosen model's
held-out log-likelihood and C2ST on the test rows against the one-column ARF marginals'.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402
from bench_scaled_defaults import load_table  # noqa: E402


def former_choice(board, tolerance: float) -> str:
    """The candidate the rule before the marginals clause chose from the same scores."""
    scored = board["c2st_distance"].notna()
    finite = scored & np.isfinite(board["log_likelihood"].fillna(-np.inf))
    if finite.any():
        scored = finite
    best = board.loc[scored, "c2st_distance"].min()
    tied = board.index[scored & (board["c2st_distance"] <= best + tolerance)]
    ll = board.loc[tied, "log_likelihood"].fillna(-np.inf)
    return str(board.loc[int(ll.index[np.argmax(ll.to_numpy())]), "candidate"])


def main() -> int:
    import forestgen as fg
    import forestgen.metrics as fm

    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default="tips,quine,penguins,wine")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fg-default-scaled"))
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    cand_rows, table_rows = [], []
    for t in a.tables.split(","):
        train, test, _ = load_table(t, a.work)
        m = fg.AutoForest(random_state=0).fit(train)
        board = m.leaderboard_
        for _, r in board.iterrows():
            cand_rows.append([t, r["candidate"], r["c2st_distance"], r["log_likelihood"],
                              r["marginal_ll"], bool(r["chosen"])])
        marg = sum(np.asarray(fg.ARF(n_trees=10, random_state=0).fit(train[[c]])
                              .log_prob(test[[c]]), float) for c in train.columns)
        synth = m.sample(len(test), random_state=1)
        c2st = fm.c2st(test, synth, kinds=m.best_, random_state=0, n_threads=1).auc
        table_rows.append([t, m.best_name_, former_choice(board, m.tolerance),
                           float(np.mean(m.log_prob(test))), float(np.mean(marg)), c2st])
        print(table_rows[-1], flush=True)
    cmd = "python benchmarks/bench_auto_marginals.py " + " ".join(sys.argv[1:])
    a.out.write_text("\n".join([
        "# AutoForest with and without the column-marginals rule", "", f"Command: `{cmd}`", "",
        "## Choice and held-out scores of the chosen model", "",
        md_table(["table", "chosen", "former rule's choice", "held-out LL", "marginals LL "
                  "(one-column ARFs)", "C2ST"], table_rows, digits=3), "",
        "## Validation scores (mean over the folds)", "",
        md_table(["table", "candidate", "C2ST distance", "log-likelihood",
                  "marginals' log-likelihood", "chosen"], cand_rows, digits=3), ""]))
    print(a.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
