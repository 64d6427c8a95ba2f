"""``forestgen evaluate REAL.csv SYNTH.csv [--target col] [--holdout H.csv] [--out report]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["add_evaluate_parser", "main", "read_table", "run_evaluate"]



def read_table(path: str | Path, metadata: dict | None = None) -> pd.DataFrame:
    """Read a CSV or Parquet table, ``?`` and empty fields as missing, dates as dates
    (:func:`forestgen.data.files.read_table`)."""
    from forestgen.data.files import read_table as _read

    return _read(path, metadata)


def add_evaluate_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the ``evaluate`` sub-command on an argparse ``subparsers`` object."""
    from forestgen.cli_common import EXIT_CODES, formatter, wrap

    p = subparsers.add_parser(
        "evaluate", help="score synthetic data against real data", formatter_class=formatter,
        epilog="example:\n  forestgen evaluate real.csv synthetic.csv --holdout test.csv "
               "--target income --out report.html\n\n" + EXIT_CODES,
        description=wrap("Compare a synthetic table with the real table it imitates "
                          "(fidelity, coverage, utility with --target, privacy with "
                          "--holdout), print a summary and optionally write a report with "
                          "figures. Tables are CSV or Parquet, typed as forestgen fit reads "
                          "them (dates as dates)."))
    p.add_argument("real", help="real (training) table: .csv, .csv.gz, .tsv or .parquet")
    p.add_argument("synthetic", help="synthetic table (same columns)")
    p.add_argument("--target", default=None, help="target column for TSTR/TRTR utility")
    p.add_argument("--holdout", default=None, help="real holdout CSV (TSTR test set, DCR baseline)")
    p.add_argument("-o", "--out", default=None,
                   help="write the report (.html/.htm or .md/.markdown)")
    p.add_argument("--metrics", default=None,
                   help="comma-separated subset of metrics (default: all)")
    p.add_argument("--schema", default=None, metavar="JSON",
                   help="SDV-style metadata declaring column kinds (as for forestgen fit)")
    p.add_argument("--categorical", default=None,
                   help="comma-separated columns to score as categorical even if numeric-coded "
                        "(other kinds come from the CSV dtypes)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--threads", type=int, default=1,
                   help="OpenMP/BLAS threads for model fits (default 1; 0 = library default)")
    p.set_defaults(func=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    """Run ``evaluate``; returns a process exit code (0 ok, 2 bad input)."""
    from forestgen.metrics.quality import report

    out = Path(args.out) if getattr(args, "out", None) else None
    if out is not None and out.suffix.lower() not in (".html", ".htm", ".md", ".markdown"):
        print(f"forestgen evaluate: error: --out must end in .html, .htm, .md or .markdown, "
              f"got {out}", file=sys.stderr)
        return 2
    try:
        from forestgen.cli_common import read_schema

        schema = read_schema(getattr(args, "schema", None))
        real = read_table(args.real, schema)
        synthetic = read_table(args.synthetic, schema)
        holdout = read_table(args.holdout, schema) if getattr(args, "holdout", None) else None
        metrics = getattr(args, "metrics", None)
        cats = getattr(args, "categorical", None)
        kinds = {c.strip(): "categorical" for c in cats.split(",")} if cats else None
        if schema is not None:
            kinds = {**schema["columns"], **(kinds or {})}
        rep = report(real, synthetic, holdout=holdout, target=getattr(args, "target", None),
                     metrics=metrics.split(",") if metrics else None,
                     random_state=getattr(args, "seed", 0), kinds=kinds,
                     n_threads=getattr(args, "threads", 1) or None)
    except (OSError, ValueError, ImportError) as exc:
        print(f"forestgen evaluate: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(rep.summary())
    if out is not None:
        if out.suffix.lower() in (".html", ".htm"):
            rep.to_html(out)
        else:
            rep.to_markdown(out)
        print(f"report written to {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry: ``python -m forestgen.metrics.cli evaluate ...``."""
    parser = argparse.ArgumentParser(prog="forestgen")
    add_evaluate_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
