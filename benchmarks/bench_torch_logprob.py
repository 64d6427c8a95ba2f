"""Throughput of ``ForestDistribution.log_prob`` (torch) vs ``model.log_prob_encoded`` (numpy).

ARF with 100 trees on adult; scores the adult test split (rows with missing entries included:
both paths marginalise them). Reports rows/s (median of repeats) for numpy, torch CPU float64 /
float32, torch CPU float32 forward+backward, and the same on CUDA when available.

    python benchmarks/bench_torch_logprob.py [--n-fit 10000] [--n-trees 100] [--repeats 3]

Writes ``benchmarks/results/torch_logprob.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from forestgen import ARF, load_adult


def timed(fn, repeats: int) -> float:
    fn()  # warm-up (compilation, tensor cache)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-fit", type=int, default=10000, help="adult training rows (0 = all)")
    ap.add_argument("--n-score", type=int, default=0, help="test rows scored (0 = all)")
    ap.add_argument("--n-trees", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "torch_logprob.md"))
    args = ap.parse_args()

    train = load_adult(n=args.n_fit or None)
    test = load_adult("test", n=args.n_score or None)
    t0 = time.perf_counter()
    model = ARF(n_trees=args.n_trees, random_state=0).fit(train).warmup()
    fit_s = time.perf_counter() - t0
    Z = model.encoder_.transform(test)
    n = len(Z)
    dist = model.to_torch()
    rows = []

    def add(name, seconds, check=None):
        rows.append((name, n / seconds, seconds, check))

    ref = model.log_prob_encoded(Z)
    add("numpy `log_prob_encoded` (float64)", timed(lambda: model.log_prob_encoded(Z),
                                                      args.repeats))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        for dt in (torch.float64, torch.float32):
            x = torch.tensor(Z, dtype=dt, device=dev)
            sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

            def fwd(x=x, sync=sync):
                with torch.no_grad():
                    out = dist.log_prob(x)
                sync()
                return out

            def fwd_bwd(x=x, sync=sync):
                xg = x.clone().requires_grad_(True)
                dist.log_prob(xg).sum().backward()
                sync()

            ref_x = model.log_prob_encoded(x.double().cpu().numpy())
            err = float(np.max(np.abs(fwd().double().cpu().numpy() - ref_x)
                               / np.maximum(1.0, np.abs(ref_x))))
            name = f"torch {dev} {str(dt).replace('torch.', '')}"
            add(name + " forward", timed(fwd, args.repeats), err)
            add(name + " forward+backward", timed(fwd_bwd, args.repeats))
    base = rows[0][1]
    lines = [
        "# torch `log_prob` vs numpy path (adult, ARF)",
        "",
        f"ARF(n_trees={args.n_trees}) fitted on {len(train)} adult training rows in {fit_s:.1f} s"
        f" ({model.forest_.n_leaves} leaves); {n} adult test rows scored "
        f"({int(np.isnan(Z).any(1).sum())} with missing entries, marginalised). "
        f"Median of {args.repeats} repeats after a warm-up.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {torch.get_num_threads()} torch threads"
        + (f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else
           ", no CUDA device") + ".",
        "",
        "| path | rows/s | seconds | vs numpy | max rel. error vs numpy |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, rps, sec, err in rows:
        e = "" if err is None else f"{err:.1e}"
        lines.append(f"| {name} | {rps:,.0f} | {sec:.3f} | {rps / base:.2f}x | {e} |")
    lines += ["", f"Command: `python benchmarks/bench_torch_logprob.py --n-fit {args.n_fit} "
              f"--n-trees {args.n_trees} --repeats {args.repeats}`", ""]
    assert np.isfinite(ref).all()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
