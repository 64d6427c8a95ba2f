"""Agreement of forestgen.metrics' SDMetrics-style scores with the ``sdmetrics`` package.

Three steps, because ``sdmetrics`` needs pandas < 3 and lives in its own environment:

1. ``python benchmarks/bench_sdmetrics_agreement.py make`` (forestgen venv): writes three
   real/synthetic table pairs to ``tests/metrics/sdmetrics_fixtures/`` (adult and abalone with
   ARF samples; a small table with datetimes, booleans, missing values, a constant column and a
   level only the synthetic side has).
2. ``/work/peers/sdmetrics/bin/python benchmarks/bench_sdmetrics_agreement.py reference``
   (a venv with ``pip install sdmetrics``, no forestgen needed): runs SDMetrics'
   ``QualityReport`` on each pair and writes ``reference.json`` beside the tables.
3. ``python benchmarks/bench_sdmetrics_agreement.py compare`` (forestgen venv): the max abs
   difference per score, written to ``benchmarks/results/sdmetrics_agreement.md``.

``tests/metrics/test_sdmetrics_scores.py`` repeats step 3 as a test.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "metrics" / "sdmetrics_fixtures"
TABLES = ("adult", "abalone", "mixed")
THRESHOLDS = ((0.5, 0.3), (0.0, 0.0))  # SDMetrics 0.32 defaults; every pair


def _key(name: str, thresholds: tuple[float, float]) -> str:
    return f"{name}@{thresholds[0]},{thresholds[1]}"


def read_pair(name: str) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """The stored real/synthetic tables and their SDV-style metadata."""
    meta = json.loads((FIXTURES / f"{name}.metadata.json").read_text())
    dates = [c for c, m in meta["columns"].items() if m["sdtype"] == "datetime"]
    frames = [pd.read_csv(FIXTURES / f"{name}.{side}.csv.gz", parse_dates=dates)
              for side in ("real", "synthetic")]
    return frames[0], frames[1], meta


def _metadata(df: pd.DataFrame) -> dict:
    cols = {}
    for c in df.columns:
        dt = df[c].dtype
        if pd.api.types.is_bool_dtype(dt):
            cols[c] = {"sdtype": "boolean"}
        elif pd.api.types.is_datetime64_any_dtype(dt):
            cols[c] = {"sdtype": "datetime", "datetime_format": "%Y-%m-%d"}
        elif pd.api.types.is_numeric_dtype(dt):
            cols[c] = {"sdtype": "numerical"}
        else:
            cols[c] = {"sdtype": "categorical"}
    return {"columns": cols, "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}


def make() -> None:
    from _common import data_path

    from forestgen import ARF
    from forestgen.data import load_adult

    FIXTURES.mkdir(parents=True, exist_ok=True)
    adult = load_adult(n=2000, random_state=0)
    abalone = pd.read_csv(data_path("abalone", "abalone.csv")).sample(1500, random_state=0)
    abalone = abalone.reset_index(drop=True)
    pairs = {}
    for name, real in (("adult", adult), ("abalone", abalone)):
        pairs[name] = (real, ARF(n_trees=10, random_state=0).fit(real).sample(len(real),
                                                                               random_state=1))
    rng = np.random.default_rng(0)

    def mixed(n: int, shift: float) -> pd.DataFrame:
        x = rng.normal(shift, 1, n)
        df = pd.DataFrame({
            "x": x, "y": 2 * x + rng.normal(size=n), "k": rng.integers(0, 50, n),
            "flag": rng.random(n) < 0.3 + shift / 4,
            "level": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
            "when": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 900, n), "D"),
            "const": 1.0,
        })
        df.loc[rng.random(n) < 0.1, "x"] = np.nan
        df.loc[rng.random(n) < 0.1, "level"] = np.nan
        return df

    real, syn = mixed(800, 0.0), mixed(700, 0.5)
    syn.loc[:20, "level"] = "d"  # a level the real table lacks
    pairs["mixed"] = (real, syn)
    for name, (real, syn) in pairs.items():
        real.to_csv(FIXTURES / f"{name}.real.csv.gz", index=False)
        syn.to_csv(FIXTURES / f"{name}.synthetic.csv.gz", index=False)
        (FIXTURES / f"{name}.metadata.json").write_text(json.dumps(_metadata(real), indent=1))


def reference() -> None:
    import warnings

    import sdmetrics

    with warnings.catch_warnings():  # 0.32 deprecates the path, not the report
        warnings.simplefilter("ignore", FutureWarning)
        from sdmetrics.reports.single_table import QualityReport

    out = {"sdmetrics_version": sdmetrics.__version__, "tables": {}}
    for name, thresholds in itertools.product(TABLES, THRESHOLDS):
        real, syn, meta = read_pair(name)
        rep = QualityReport()
        rep.real_correlation_threshold, rep.real_association_threshold = thresholds
        rep.generate(real, syn, meta, verbose=False)
        shapes = rep.get_details("Column Shapes")
        pairs = rep.get_details("Column Pair Trends")
        props = rep.get_properties().set_index("Property")["Score"]
        out["tables"][_key(name, thresholds)] = {
            "overall": rep.get_score(),
            "column_shapes": float(props["Column Shapes"]),
            "column_pair_trends": float(props["Column Pair Trends"]),
            "shapes": {r.Column: r.Score for r in shapes.itertuples()},
            "pairs": [[r[1], r[2], r[4]] for r in
                      pairs[["Column 1", "Column 2", "Metric", "Score"]].itertuples()],
        }
    (FIXTURES / "reference.json").write_text(json.dumps(out, indent=1, default=float))


def differences() -> dict[str, dict[str, float]]:
    """Max abs difference per table: overall, property scores, per-column and per-pair."""
    from forestgen.metrics import sdmetrics_quality

    ref = json.loads((FIXTURES / "reference.json").read_text())
    res = {}
    for name, thresholds in itertools.product(TABLES, THRESHOLDS):
        real, syn, meta = read_pair(name)
        r = ref["tables"][_key(name, thresholds)]
        ours = sdmetrics_quality(real, syn, meta, real_correlation_threshold=thresholds[0],
                                 real_association_threshold=thresholds[1])
        sh = ours.shapes.set_index("Column")["Score"]
        col = [abs(sh[c] - v) for c, v in r["shapes"].items()]
        pt = {(a, b): s for a, b, _, s in ours.pair_trends.itertuples(index=False)}
        pair = [(0.0 if np.isnan(pt[(a, b)]) else np.inf) if v is None or np.isnan(v)
                else abs(pt[(a, b)] - v) for a, b, v in r["pairs"]]
        res[_key(name, thresholds)] = {
            "overall": abs(ours.overall - r["overall"]),
            "column_shapes": abs(ours.column_shapes - r["column_shapes"]),
            "column_pair_trends": abs(ours.column_pair_trends - r["column_pair_trends"]),
            "max_column": float(np.max(col)), "max_pair": float(np.max(pair)),
            "n_columns": len(col), "n_pairs": len(pair),
        }
    return res


def compare() -> None:
    ref = json.loads((FIXTURES / "reference.json").read_text())
    res = differences()
    lines = ["# forestgen vs sdmetrics quality scores", "",
             "Command: `python benchmarks/bench_sdmetrics_agreement.py compare` (reference from "
             f"`sdmetrics` {ref['sdmetrics_version']} `QualityReport`, generated with "
             "`/work/peers/sdmetrics/bin/python benchmarks/bench_sdmetrics_agreement.py "
             "reference`).", "",
             "Table `name@t_corr,t_assoc`: the real-data thresholds a pair must exceed to count "
             "(0.5, 0.3 are SDMetrics 0.32's defaults; 0, 0 counts every pair). A NaN pair "
             "score on one side only counts as an infinite difference.", "",
             "| table | columns | pairs | overall | Column Shapes | Column Pair Trends | "
             "max per column | max per pair |", "|---|---|---|---|---|---|---|---|"]
    for name, d in res.items():
        lines.append(f"| {name} | {d['n_columns']} | {d['n_pairs']} | {d['overall']:.1e} | "
                     f"{d['column_shapes']:.1e} | {d['column_pair_trends']:.1e} | "
                     f"{d['max_column']:.1e} | {d['max_pair']:.1e} |")
    worst = max(max(d[k] for k in ("overall", "column_shapes", "column_pair_trends",
                                   "max_column", "max_pair")) for d in res.values())
    lines += ["", f"Max abs difference over all scores: {worst:.1e}."]
    out = ROOT / "benchmarks" / "results" / "sdmetrics_agreement.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    {"make": make, "reference": reference, "compare": compare}[sys.argv[1]]()
