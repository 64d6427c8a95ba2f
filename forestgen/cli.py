"""The ``forestgen`` command: demo, fit, sample, score, evaluate."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def read_csv(path: str | Path) -> pd.DataFrame:
    """CSV with ``?`` and empty fields as missing (same reader as ``forestgen evaluate``)."""
    from forestgen.metrics.cli import read_table

    return read_table(path)


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


def _fit(args: argparse.Namespace) -> int:
    from forestgen.config import build_learner, load_config

    cfg = load_config(args.config)
    if args.seed is not None:
        cfg["params"]["random_state"] = args.seed
    model = build_learner(cfg)
    fit_kw = dict(cfg["fit"])
    if args.target is not None:
        import inspect

        if "target" not in inspect.signature(model.fit).parameters:
            raise ValueError(f"--target: {type(model).__name__} is unsupervised and takes no "
                             f"target column")
        fit_kw["target"] = args.target
    data = read_csv(args.data)
    t0 = time.perf_counter()
    model.fit(data, **fit_kw)
    path = model.save(args.out)
    print(f"fitted {type(model).__name__} on {len(data)} rows in {time.perf_counter() - t0:.1f} s "
          f"-> {path}")
    return 0


def _load(path):
    from forestgen.base import GenerativeForest

    return GenerativeForest.load(path)


def _sample(args: argparse.Namespace) -> int:
    model = _load(args.model)
    synth = model.sample(args.n, random_state=args.seed)
    synth.to_csv(args.out, index=False)
    print(f"wrote {len(synth)} rows to {args.out}")
    return 0


def _score(args: argparse.Namespace) -> int:
    import numpy as np
    import pandas as pd

    model = _load(args.model)
    data = read_csv(args.data)
    lp = model.log_prob(data)
    d = data.shape[1]
    zero = np.isneginf(lp)
    fin = lp[~zero]
    if zero.any():
        print(f"{int(zero.sum())} of {len(lp)} rows have zero density under the model (outside "
              f"its support: log-likelihood -inf); they are left out of the mean below")
    if len(fin):
        print(f"mean log-likelihood: {np.mean(fin):.4f} nats/row ({np.mean(fin) / d:.4f} per "
              f"column) over {len(fin)} rows")
    if args.out:
        pd.DataFrame({"log_prob": lp}).to_csv(args.out, index=False)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="forestgen", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="fit ARF on bundled adult data, write synthetic rows + report")
    d.add_argument("--out", default="forestgen_demo_out")
    d.add_argument("--n-rows", type=int, default=None, help="training rows (default: all 32561)")
    d.add_argument("--n-trees", type=int, default=10)
    d.add_argument("--seed", type=int, default=0)
    d.set_defaults(func=_demo)

    f = sub.add_parser("fit", help="fit a learner from a YAML preset on a CSV file")
    f.add_argument("data")
    f.add_argument("--config", required=True)
    f.add_argument("--out", default="model.forestgen")
    f.add_argument("--target", default=None,
                   help="class column for supervised learners (GeF: configs/gef.yaml)")
    f.add_argument("--seed", type=int, default=None)
    f.set_defaults(func=_fit)

    s = sub.add_parser("sample", help="draw synthetic rows from a saved model")
    s.add_argument("model")
    s.add_argument("-n", type=int, required=True)
    s.add_argument("--out", default="synthetic.csv")
    s.add_argument("--seed", type=int, default=None)
    s.set_defaults(func=_sample)

    c = sub.add_parser("score", help="log-likelihood of CSV rows under a saved model")
    c.add_argument("model")
    c.add_argument("data")
    c.add_argument("--out", default=None, help="optional CSV of per-row log densities")
    c.set_defaults(func=_score)

    from forestgen.metrics.cli import add_evaluate_parser

    add_evaluate_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError, KeyError) as e:
        # bad input (malformed YAML, corrupt model file, unknown column, missing file): one
        # line naming the problem, exit status 2 as for bad arguments
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"forestgen {args.command}: error: {' '.join(str(msg).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
