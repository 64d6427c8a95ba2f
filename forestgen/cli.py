"""The forestgen command: fit a generative forest on a CSV or Parquet table, draw synthetic
rows from it, score rows under it, and compare synthetic with real data.

Exit status: 0 success; 1 an unexpected internal error (a bug: please report it; ``--debug``
prints the traceback); 2 bad input (arguments, files, tables, schemas, configs, model files);
130 interrupted (Ctrl-C). Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from forestgen.cli_common import (  # the exit statuses are part of the command's interface
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,  # noqa: F401
    CommandError,
    formatter,
    read_schema,
    wrap,
)
from forestgen.config import AUTO, DEFAULT_LEARNER

if TYPE_CHECKING:
    import pandas as pd

#: the learners ``--learner`` names (``forestgen.registry``, and ``auto``; ``tests/test_cli.py``
#: checks the list against the registry), each with what it is for
LEARNER_HELP = {
    AUTO: "AutoForest: fits ARF, ARF 'best samples', NRGBoost, the Chain and Anchored on "
          "part of the rows, keeps the one whose samples a classifier tells least from the "
          "other rows (with --target: the best predictor of that column among the near-tied; "
          "Anchored unless clearly beaten), refits it on all rows and saves it; costs about "
          "16 fits on a small table",
    "anchored": "training rows redrawn column by column from trees on all the other columns "
                "(the sampler of synthyverse's synthpop, as a normalised mixture): the "
                "samples closest to the real rows on the project leaderboard",
    "arf": "adversarial random forest (Watson et al. 2023): synthetic data, density, "
           "conditional queries; presets 'best samples', 'best density', 'fastest'",
    "gef": "generative forest from a random forest classifier (Correia et al. 2020); needs "
           "--target",
    "rfde": "random forest density estimation (Wen & Hang 2022): densities, anomaly scores",
    "def": "density estimation forest (bagged density trees)",
    "gfboost": "generative forest trained by GF.Boost (Nock & Guillame-Bert 2023)",
    "eogt": "ensemble of generative trees (same paper, section 6)",
    "chain": "sequential conditional trees (synthpop's CART chain, Nowok et al. 2016): "
             "exact density, ancestral sampling, exact conditionals",
    "nrgboost": "energy-based boosted trees (Bravo 2025): Gibbs sampling, exact "
                "single-column conditionals",
}
#: learner presets (``Learner.PRESETS``; the test checks them against the classes)
PRESET_HELP = {"arf": ("best samples", "best density", "fastest")}

#: bytes of memory a sampled value may take at most in the blocks ``sample`` streams (for the
#: estimate of the output file against the free disk space, see :func:`_check_room`)
DISK_MARGIN = 1.1


def _progress_default() -> bool:
    return sys.stderr.isatty()


# --------------------------------------------------------------------------- reading input


def read_table(path: str | Path, schema: dict | None = None,
               na_values: list[str] | None = None) -> pd.DataFrame:
    """A CSV / Parquet table typed by its values (dates, integers with NaN, booleans; see
    :mod:`forestgen.data.files`)."""
    from forestgen.data.files import read_table as _read

    return _read(path, schema, na_values)


def read_csv(path: str | Path) -> pd.DataFrame:
    """Kept for callers of the old name: :func:`read_table`."""
    return read_table(path)


def _na_values(args) -> list[str] | None:
    raw = getattr(args, "na_values", None)
    return [v for v in raw.split(",")] if raw else None


# --------------------------------------------------------------------------- commands


def _demo(args: argparse.Namespace) -> int:
    from forestgen import ARF
    from forestgen.data import load_adult

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train = load_adult("train", n=args.n_rows, random_state=0)
    test = load_adult("test")
    print(f"forestgen demo: ARF on the bundled UCI adult data ({len(train)} training rows, "
          f"{train.shape[1]} mixed-type columns)")
    print("(the first run on a machine also compiles the Numba tree kernels, about 30-60 s; "
          "they are cached for later runs)", flush=True)
    t0 = time.perf_counter()
    model = ARF(n_trees=args.n_trees, random_state=args.seed).fit(train)
    t_fit = time.perf_counter() - t0
    rounds = ", ".join(f"{r['oob_accuracy']:.3f}" for r in model.fit_diagnostics_)
    print(f"fit: {t_fit:.1f} s, {model.forest_.n_trees} trees, {model.forest_.n_leaves} leaves, "
          f"OOB accuracy per round: {rounds}")
    t0 = time.perf_counter()
    synth = model.sample(len(train), random_state=args.seed)
    t_sample = time.perf_counter() - t0
    synth_path = out / "adult_synthetic.csv"
    synth.to_csv(synth_path, index=False)
    model_path = model.save(out / "adult_arf.forestgen")
    ll_test = model.log_prob(test)
    ll_train = model.log_prob(train)
    print(f"sample: {len(synth)} rows in {t_sample:.2f} s -> {synth_path}")
    print(f"held-out log-likelihood: {ll_test.mean():.3f} nats/row on {len(test)} test rows "
          f"(train {ll_train.mean():.3f}); model saved to {model_path}")
    from forestgen.metrics import report

    rep = report(train, synth, holdout=test.sample(min(len(test), len(train)), random_state=0),
                 target="income", random_state=args.seed)
    report_path = out / "report.md"
    rep.to_markdown(report_path)
    print()
    print(rep.summary())
    print(f"\nfull quality report: {report_path}")
    return 0


def _learner_from_args(args: argparse.Namespace):
    """The learner to fit: ``--config``, else ``--learner`` (default :data:`DEFAULT_LEARNER`)
    with ``--preset``; returns ``(learner, fit keyword arguments)``."""
    from forestgen.config import build_learner, load_config

    if args.config is not None:
        if args.learner is not None or args.preset is not None:
            raise CommandError("--config names the learner and its preset; drop --learner / "
                               "--preset, or drop --config")
        cfg = load_config(args.config)
    else:
        cfg = {"learner": args.learner or DEFAULT_LEARNER, "preset": args.preset,
               "params": {}, "fit": {}}
    if args.seed is not None:
        cfg["params"]["random_state"] = args.seed
    if args.progress:
        import inspect

        from forestgen import registry

        cls = None if cfg["learner"] == AUTO else registry.get("learner", cfg["learner"])
        if cls is not None and "progress" in inspect.signature(cls.__init__).parameters:
            cfg["params"].setdefault("progress", True)
    return build_learner(cfg), dict(cfg["fit"])


def _fit(args: argparse.Namespace) -> int:
    import inspect

    _check_folder(args.out)
    schema = read_schema(args.schema)
    model, fit_kw = _learner_from_args(args)
    if schema is not None:
        if fit_kw.get("kinds"):
            raise CommandError("the config's fit.kinds and --schema both declare column kinds; "
                               "keep one")
        fit_kw["kinds"] = schema
    elif not fit_kw.get("kinds"):
        fit_kw.pop("kinds", None)
    if args.target is not None:
        if "target" not in inspect.signature(model.fit).parameters:
            raise CommandError(f"--target: {type(model).__name__} is unsupervised and takes no "
                               f"target column")
        fit_kw["target"] = args.target
    data = read_table(args.data, schema, _na_values(args))
    if len(data) == 0:
        raise CommandError(f"{args.data}: the table has a header but no rows")
    t0 = time.perf_counter()
    model.fit(data, **fit_kw)
    path = model.save(args.out)
    kinds = ", ".join(f"{s.name}: {_kind_label(s)}" for s in model.schema_.columns)
    name = type(model).__name__
    if hasattr(model, "best_name_"):  # AutoForest saves the learner it chose
        name += f" (chose {model.best_name_}: {type(model.best_).__name__})"
    print(f"fitted {name} on {len(data)} rows x {data.shape[1]} columns in "
          f"{time.perf_counter() - t0:.1f} s -> {path}")
    print(f"columns: {kinds}")
    return 0


def _kind_label(spec) -> str:
    """A column's kind as a user reads it (``date``, ``integer``, ``categorical (5 levels)``)."""
    d = spec.dtype
    if d.startswith("datetime64"):
        if spec.month_anchor is not None:
            return "date" if spec.month_anchor % 86400.0 == 0 else "datetime"
        return "date" if spec.step is not None and spec.step % 86400.0 == 0 \
            and spec.step_origin % 86400.0 == 0 else "datetime"
    if d.startswith("timedelta64"):
        return "time"
    if spec.is_discrete and not spec.numeric_levels:
        return f"{spec.kind} ({spec.n_levels} levels)"
    return spec.kind


def _load(path):
    from forestgen.base import GenerativeForest

    if not Path(path).exists():
        raise CommandError(f"{path}: no such model file")
    try:
        return GenerativeForest.load(path)
    except Exception as e:  # noqa: BLE001 - any failure to load is a damaged / foreign file
        text = " ".join(str(e).split())
        raise CommandError(text if str(path) in text else
                           f"{path}: not a readable forestgen model ({type(e).__name__}: "
                           f"{text})") from None


def _check_folder(out, flag: str = "--out") -> None:
    """Refuse an output path whose folder does not exist before any work is done."""
    folder = Path(out).resolve().parent
    if not folder.is_dir():
        raise CommandError(f"{flag} {out}: the folder {folder} does not exist")


def _check_room(model, n: int, out: Path) -> None:
    """Refuse an ``-n`` whose output would not fit: rows are drawn and written in blocks
    (memory stays bounded), so the bound is the free space where the file goes, estimated from
    the written size of 200 drawn rows."""
    import io
    import shutil

    from forestgen.data.files import csv_frame, table_format

    probe = model.sample(min(n, 200), random_state=0)
    buf = io.StringIO()
    csv_frame(probe).to_csv(buf, index=False)
    per_row = max(len(buf.getvalue()) / max(len(probe), 1), 1.0)
    if table_format(out) == "parquet" or out.name.lower().endswith(".gz"):
        per_row /= 4  # compressed: a loose lower bound, so only hopeless sizes are refused
    need = n * per_row * DISK_MARGIN
    free = shutil.disk_usage(out.resolve().parent).free
    if need > free:
        raise CommandError(f"-n {n}: the output would take about {_size(need)} and "
                           f"{out.resolve().parent} has {_size(free)} free; draw fewer rows "
                           f"or write elsewhere")


def _size(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024 or unit == "PiB":
            return f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} PiB"  # pragma: no cover


def _sample(args: argparse.Namespace) -> int:
    from forestgen.data.files import table_format

    if args.n < 0:
        raise CommandError(f"-n must be >= 0, got {args.n}")
    out = Path(args.out)
    table_format(out)  # a known extension and an existing folder before any work
    _check_folder(out)
    model = _load(args.model)
    if args.n > 0:
        _check_room(model, args.n, out)
    if any(s.dtype.startswith("timedelta64") for s in model.schema_.columns) and \
            table_format(out) == "csv":
        _sample_small_blocks(model, args, out)
    else:
        model.sample_to(out, args.n, random_state=args.seed, progress=args.progress)
    print(f"wrote {args.n} rows to {out}")
    return 0


def _sample_small_blocks(model, args, out: Path) -> None:
    """Rows in blocks through :func:`forestgen.data.files.csv_frame` (times of day written as
    ``HH:MM:SS``); the same rows as ``sample_to``."""
    from forestgen.base import SAMPLE_BLOCK
    from forestgen.data.files import csv_frame
    from forestgen.progress import ProgressBar
    from forestgen.validation import as_generator

    bar = ProgressBar(f"sample {out.name}", args.n, args.progress, unit="rows")
    tmp = out.with_name(f".{out.name}.partial")
    comp = "gzip" if out.name.lower().endswith(".gz") else None
    rng = as_generator(args.seed)
    try:
        with open(tmp, "wb") as fh:
            for start in range(0, max(args.n, 1), SAMPLE_BLOCK):
                block = model.sample(min(SAMPLE_BLOCK, args.n - start), random_state=rng)
                csv_frame(block).to_csv(fh, header=start == 0, index=False, compression=comp)
                bar.step(len(block))
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    bar.close()


def _score(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    from forestgen.data.files import read_table as _read
    from forestgen.data.metadata import to_metadata

    if args.out:
        _check_folder(args.out)
    model = _load(args.model)
    # typed as the model's columns are (a column declared categorical stays text, dates parse)
    data = _read(args.data, to_metadata(model), _na_values(args), absent_ok=True)
    names = model.schema_.names
    if len(data) == 0:
        raise CommandError(f"{args.data}: the table has a header but no rows to score")
    absent = [c for c in names if c not in data.columns]
    extra = [c for c in data.columns if c not in names]
    if extra:
        raise CommandError(f"{args.data}: column(s) {extra} are not in the model; its columns "
                           f"are {names}")
    if absent and not args.marginalise:
        raise CommandError(f"{args.data}: missing the model's column(s) {absent}; add them, or "
                           f"pass --marginalise to score the other columns' marginal density")
    lp = model.log_prob(data)
    d = data.shape[1]
    zero = np.isneginf(lp)
    fin = lp[~zero]
    if absent:
        print(f"column(s) {absent} absent: scores are the marginal density of the other "
              f"{d} column(s)")
    if zero.any():
        print(f"{int(zero.sum())} of {len(lp)} rows have zero density under the model (outside "
              f"its support: log-likelihood -inf); they are left out of the mean below")
    if len(fin):
        print(f"mean log-likelihood: {np.mean(fin):.4f} nats/row ({np.mean(fin) / d:.4f} per "
              f"column) over {len(fin)} rows")
    if args.out:
        from forestgen.data.files import write_table

        write_table(pd.DataFrame({"log_prob": lp}), args.out)
    return 0


# --------------------------------------------------------------------------- parser


def _learners_text() -> str:
    rows = [wrap(f"{name:<9} " + ("[default] " if name == DEFAULT_LEARNER else "") + text,
                  "  ") for name, text in LEARNER_HELP.items()]
    return "learners (--learner):\n" + "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="forestgen", description=__doc__.split("\n\n")[0],
                                epilog=EXIT_CODES, formatter_class=formatter)
    p.add_argument("--debug", action="store_true",
                   help="print the traceback of an unexpected error (also FORESTGEN_DEBUG=1)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("demo", help="fit ARF on the bundled adult data, write synthetic rows "
                       "and a quality report", formatter_class=formatter, epilog=EXIT_CODES,
                       description=wrap("Fit ARF on the bundled UCI adult data, draw as many "
                       "synthetic rows, score held-out rows and write a quality report."))
    d.add_argument("-o", "--out", default="forestgen_demo_out", metavar="DIR",
                   help="output folder (default: %(default)s)")
    d.add_argument("--n-rows", type=int, default=None, metavar="N",
                   help="training rows (default: all 32,561)")
    d.add_argument("--n-trees", type=int, default=10, metavar="N",
                   help="trees of the ARF (default: %(default)s)")
    d.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    d.set_defaults(func=_demo)

    f = sub.add_parser(
        "fit", help="fit a learner on a CSV or Parquet table and save the model",
        formatter_class=formatter,
        description=wrap("Fit a learner on a table and save it. Column kinds come from the "
                          "values (dates and times of day are detected, whole numbers with "
                          "missing entries stay integers) or from --schema. A numeric column "
                          "with a few stray strings is refused by name unless --schema "
                          "declares it."),
        epilog=_learners_text() + "\n\nexamples:\n"
               "  forestgen fit data.csv\n"
               "  forestgen fit data.parquet --preset 'best samples' --out m.forestgen\n"
               "  forestgen fit data.csv --schema schema.json --seed 1\n"
               "  forestgen fit data.csv --config configs/nrgboost.yaml\n\n" + EXIT_CODES)
    f.add_argument("data", help="training table: .csv, .csv.gz, .tsv or .parquet")
    f.add_argument("--learner", default=None, choices=sorted(LEARNER_HELP),
                   help=f"learner to fit (default: {DEFAULT_LEARNER}, with its defaults)")
    f.add_argument("--preset", default=None, metavar="NAME",
                   help="a preset of the learner: " + "; ".join(
                       f"{k}: {', '.join(repr(x) for x in v)}" for k, v in PRESET_HELP.items()))
    f.add_argument("--config", default=None, metavar="YAML",
                   help="a YAML preset naming the learner and its parameters (configs/*.yaml "
                        "in the repository); replaces --learner / --preset")
    f.add_argument("--schema", default=None, metavar="JSON",
                   help="SDV-style metadata declaring column kinds, ranges, decimals, levels, "
                        "nullability and datetime formats: the dict kinds= takes (docs: "
                        "command line, metadata)")
    f.add_argument("--target", default=None, metavar="COLUMN",
                   help="class column, for supervised learners (gef); for auto, the "
                        "column the synthetic rows should predict best")
    f.add_argument("-o", "--out", default="model.forestgen", metavar="PATH",
                   help="where to save the model (default: %(default)s)")
    f.add_argument("--seed", type=int, default=None,
                   help="random seed of the learner (default: the config's, else random)")
    f.add_argument("--na-values", default=None, metavar="A,B",
                   help="extra text read as missing (besides empty, ?, NA, N/A, NaN, null)")
    _progress_option(f)
    f.set_defaults(func=_fit)

    s = sub.add_parser(
        "sample", help="draw synthetic rows from a saved model into a CSV or Parquet file",
        formatter_class=formatter, epilog=EXIT_CODES,
        description=wrap("Draw synthetic rows from a saved model. Rows are drawn and written "
                          "in blocks of 100,000, so memory stays bounded; an -n whose output "
                          "would not fit on the disk is refused before drawing. Columns keep "
                          "their training types (dates, integers, booleans, levels)."))
    s.add_argument("model", help="a model saved by forestgen fit (or model.save)")
    s.add_argument("-n", type=int, required=True, metavar="N", help="number of rows to draw")
    s.add_argument("-o", "--out", default="synthetic.csv", metavar="PATH",
                   help="output table: .csv, .csv.gz, .tsv or .parquet (default: %(default)s)")
    s.add_argument("--seed", type=int, default=None,
                   help="random seed (default: random; the same seed gives the same rows)")
    _progress_option(s)
    s.set_defaults(func=_sample)

    c = sub.add_parser(
        "score", help="log-likelihood of a table's rows under a saved model",
        formatter_class=formatter, epilog=EXIT_CODES,
        description=wrap("Print the mean log-likelihood (nats per row) of a table's rows "
                          "under a saved model; missing entries are marginalised. The table "
                          "must have the model's columns (or pass --marginalise)."))
    c.add_argument("model", help="a model saved by forestgen fit")
    c.add_argument("data", help="table to score: .csv, .csv.gz, .tsv or .parquet")
    c.add_argument("-o", "--out", default=None, metavar="PATH",
                   help="also write the per-row log densities (one column, log_prob)")
    c.add_argument("--marginalise", action="store_true",
                   help="score a table lacking some of the model's columns by the marginal "
                        "density of the columns it has")
    c.add_argument("--na-values", default=None, metavar="A,B",
                   help="extra text read as missing (besides empty, ?, NA, N/A, NaN, null)")
    c.set_defaults(func=_score)

    from forestgen.metrics.cli import add_evaluate_parser

    add_evaluate_parser(sub)
    return p


def _progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction,
                   default=_progress_default(),
                   help="progress bar on stderr (default: on when stderr is a terminal)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get("FORESTGEN_DEBUG") == "1"
    import warnings

    def one_line(message, category, filename, lineno, file=None, line=None):
        print(f"forestgen {args.command}: warning: {' '.join(str(message).split())}",
              file=sys.stderr)

    shown = warnings.showwarning
    warnings.showwarning = one_line  # warnings as one line each, without source lines
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"forestgen {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - the command line never shows a traceback
        if debug:
            import traceback

            traceback.print_exc()
        bad_input = _is_bad_input(e)
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        text = " ".join(str(msg).split()) or type(e).__name__
        if not bad_input:
            text = (f"internal error ({type(e).__name__}: {text}); please report it "
                    f"(--debug shows the traceback)")
        print(f"forestgen {args.command}: error: {text}", file=sys.stderr)
        return EXIT_BAD_INPUT if bad_input else EXIT_INTERNAL
    finally:
        warnings.showwarning = shown


def _is_bad_input(e: Exception) -> bool:
    """Errors that describe the input (files, tables, configs, model files, parameters)."""
    from forestgen.modelfile import ModelFileError

    return isinstance(e, (CommandError, ModelFileError, ValueError, OSError, KeyError,
                          ImportError))


if __name__ == "__main__":
    sys.exit(main())
