"""NRGBoost's rounds chosen on held-out rows (stop 54): before / after tables from the cells of
``bench_scaled_defaults.py``.

    python benchmarks/report_nrgboost_rounds.py benchmarks/results/nrgboost_heldout_rounds_s54.jsonl

Prints, per table, each variant's rounds, fit CPU seconds, C2ST AUC, held-out log-likelihood
against the column marginals' and held-out ``predict_proba`` accuracy; then per variant the
mean ``abs(AUC - 0.5)`` over the leaderboard's tables (:data:`LEADERBOARD`), the tables whose
held-out log-likelihood is below the marginals', and the total fit CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import md_table  # noqa: E402

#: the 13 tables of the project leaderboard (``/work/tables/usual``)
LEADERBOARD = ("abalone", "adult", "airquality", "anes96", "breast_cancer", "california",
               "diabetes", "diamonds", "fair", "iris", "macrodata", "penguins", "wine")
VARIANTS = ("before", "t200", "after")


def main(path: str) -> int:
    rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]
    cell = {(r["table"], r["variant"]): r for r in rows if "test_ll" in r}
    tables = sorted({t for t, _ in cell}, key=lambda t: (t in LEADERBOARD, t))
    body = []
    for t in tables:
        for v in VARIANTS:
            r = cell.get((t, v))
            if r is None:
                continue
            body.append([t, v, r.get("n_train"), r.get("d"), r.get("n_trees_"), r["fit_cpu_s"],
                         r["c2st"], r["test_ll"], r["marginal_ll"],
                         "yes" if r["test_ll"] < r["marginal_ll"] else "",
                         r.get("proba_acc_test", ""), r.get("majority", "")])
    print(md_table(["table", "variant", "n_train", "d", "rounds", "fit CPU s", "C2ST",
                    "held-out LL", "marginals' LL", "below", "proba acc", "majority"], body,
                   digits=3))
    print()
    summ = []
    for v in VARIANTS:
        lb = [cell[(t, v)] for t in LEADERBOARD if (t, v) in cell]
        small = [cell[(t, v)] for t in tables if t not in LEADERBOARD and (t, v) in cell
                 and t not in ("fit5000", "wide5000")]
        every = [cell[(t, v)] for t in tables if (t, v) in cell]
        below = [r["table"] for r in every if r["test_ll"] < r["marginal_ll"]]
        summ.append([v, f"{len(lb)}/{len(LEADERBOARD)}",
                     np.mean([abs(r["c2st"] - 0.5) for r in lb]) if lb else "",
                     np.mean([r["test_ll"] - r["marginal_ll"] for r in lb]) if lb else "",
                     np.mean([abs(r["c2st"] - 0.5) for r in small]) if small else "",
                     ", ".join(below) or "none",
                     sum(r["fit_cpu_s"] for r in lb + small)])
    print(md_table(["variant", "leaderboard tables", "mean abs(AUC-0.5), leaderboard",
                    "mean LL - marginals', leaderboard", "mean abs(AUC-0.5), tips, quine, "
                    "Cars93, Boston", "below the marginals (all tables run)",
                    "fit CPU s (all but the 5,000-row table)"], summ, digits=3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
