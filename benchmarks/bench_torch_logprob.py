"""The torch layer vs the numpy path on one model, in one run: ``log_prob``, sampling and
conditional queries.

ARF with 100 trees on adult; scores the adult test split (rows with missing entries included:
both paths marginalise them). Reports rows/s (median of repeats after a warm-up) for

* ``log_prob``: numpy ``log_prob_encoded`` vs ``ForestDistribution.log_prob`` (float64,
  float32, forward and forward+backward);
* sampling: numpy ``sample_encoded`` vs ``ForestDistribution.sample`` (on-device sampler);
* conditionals given ``{"sex": "Female", "age": 40}``: numpy ``log_prob(..., conditions=)`` /
  ``sample(..., conditions=)`` vs ``dist.condition(...).log_prob`` / ``.sample``;

on the CPU and, when one is present, a CUDA device (float32).

    python benchmarks/bench_torch_logprob.py [--n-fit 3000] [--n-trees 100] [--repeats 3]
        [--threads N]   # N threads for both paths (default: the machine's cores)

Writes ``benchmarks/results/torch_logprob.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np
import torch

from forestgen import ARF, load_adult

EVIDENCE = {"sex": "Female", "age": 40}


def timed(fn, repeats: int) -> float:
    fn()  # warm-up (compilation, tensor cache)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def rel_err(a, ref) -> float:
    a = np.asarray(a, np.float64)
    ok = np.isfinite(ref)
    assert (np.isfinite(a) == ok).all()
    return float(np.max(np.abs(a[ok] - ref[ok]) / np.maximum(1.0, np.abs(ref[ok]))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-fit", type=int, default=3000, help="adult training rows (0 = all)")
    ap.add_argument("--n-score", type=int, default=0, help="test rows scored (0 = all)")
    ap.add_argument("--n-sample", type=int, default=16000, help="rows drawn per sampling call")
    ap.add_argument("--n-trees", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both numpy (Numba) and torch (0 = the machine's cores)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "torch_logprob.md"))
    args = ap.parse_args()

    threads = args.threads or os.cpu_count()
    torch.set_num_threads(threads)  # equal thread counts on both paths
    numba.set_num_threads(threads)
    load0 = os.getloadavg()
    train = load_adult(n=args.n_fit or None)
    test = load_adult("test", n=args.n_score or None)
    t0 = time.perf_counter()
    model = ARF(n_trees=args.n_trees, random_state=0).fit(train).warmup()
    fit_s = time.perf_counter() - t0
    Z = model.encoder_.transform(test)
    n, ns = len(Z), args.n_sample
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows: dict[str, list] = {"log_prob": [], "sample": [], "conditional": []}

    def add(table, name, count, seconds, check=None):
        rows[table].append((name, count / seconds, seconds, check))

    def sync(dev):
        return torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    # -------------------------------------------------------------- log_prob
    ref = model.log_prob_encoded(Z)
    add("log_prob", "numpy `log_prob_encoded` (float64)", n,
        timed(lambda: model.log_prob_encoded(Z), args.repeats))
    dist = model.to_torch()
    for dev in devices:
        for dt in ((torch.float64, torch.float32) if dev == "cpu" else (torch.float32,)):
            x = torch.tensor(Z, dtype=dt, device=dev)
            s = sync(dev)

            def fwd(x=x, s=s):
                with torch.no_grad():
                    out = dist.log_prob(x)
                s()
                return out

            def fwd_bwd(x=x, s=s):
                xg = x.clone().requires_grad_(True)
                lp = dist.log_prob(xg)
                lp[torch.isfinite(lp)].sum().backward()
                s()

            err = rel_err(fwd().double().cpu().numpy(),
                          model.log_prob_encoded(x.double().cpu().numpy()))
            name = f"torch {dev} {str(dt).replace('torch.', '')}"
            add("log_prob", name + " forward", n, timed(fwd, args.repeats), err)
            add("log_prob", name + " forward+backward", n, timed(fwd_bwd, args.repeats))

    # -------------------------------------------------------------- sampling
    add("sample", "numpy `sample_encoded`", ns,
        timed(lambda: model.sample_encoded(ns, random_state=0), args.repeats))
    for dev in devices:
        for dt in ((torch.float64, torch.float32) if dev == "cpu" else (torch.float32,)):
            d = model.to_torch(dtype=dt, device=dev)
            g = torch.Generator(device=dev).manual_seed(0)
            s = sync(dev)

            def draw(d=d, g=g, s=s):
                out = d.sample((ns,), generator=g)
                s()
                return out

            add("sample", f"torch {dev} {str(dt).replace('torch.', '')} `sample`", ns,
                timed(draw, args.repeats))

    # -------------------------------------------------------------- conditionals
    free = [j for j, c in enumerate(model.schema_.names) if c not in EVIDENCE]
    cref = model.log_prob(test, conditions=EVIDENCE)
    add("conditional", "numpy `log_prob(conditions=)`", n,
        timed(lambda: model.log_prob(test, conditions=EVIDENCE), args.repeats))
    for dev in devices:
        for dt in ((torch.float64, torch.float32) if dev == "cpu" else (torch.float32,)):
            cond = model.to_torch(dtype=dt, device=dev).condition(EVIDENCE)
            x = torch.tensor(Z[:, free], dtype=dt, device=dev)
            s = sync(dev)

            def clp(cond=cond, x=x, s=s):
                with torch.no_grad():
                    out = cond.log_prob(x)
                s()
                return out

            err = rel_err(clp().double().cpu().numpy(), cref) if dt == torch.float64 else None
            add("conditional", f"torch {dev} {str(dt).replace('torch.', '')} "
                "`condition(e).log_prob`", n, timed(clp, args.repeats), err)
    add("conditional", "numpy `sample(conditions=)`", ns,
        timed(lambda: model.sample(ns, conditions=EVIDENCE, random_state=0), args.repeats))
    for dev in devices:
        cond = model.to_torch(dtype=torch.float32, device=dev).condition(EVIDENCE)
        g = torch.Generator(device=dev).manual_seed(0)
        s = sync(dev)

        def cdraw(cond=cond, g=g, s=s):
            cond.sample((ns,), generator=g)
            s()

        add("conditional", f"torch {dev} float32 `condition(e).sample`", ns,
            timed(cdraw, args.repeats))

    load1 = os.getloadavg()
    gpu = (f"GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available()
           else "no CUDA device (no GPU was measured)")
    lines = [
        "# torch layer vs numpy path (adult, ARF): log_prob, sampling, conditionals",
        "",
        f"ARF(n_trees={args.n_trees}) fitted on {len(train)} adult training rows in {fit_s:.1f} s"
        f" ({model.forest_.n_leaves} leaves); {n} adult test rows scored "
        f"({int(np.isnan(Z).any(1).sum())} with missing entries, marginalised); {ns} rows per "
        f"sampling call; evidence `{EVIDENCE}`. Median of {args.repeats} repeats after a "
        "warm-up; the ratio column is against the numpy row of each table.",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__}, {torch.get_num_threads()} torch threads and "
        f"{numba.get_num_threads()} Numba threads (equal thread counts), {gpu}. Load average "
        f"{load0[0]:.1f} at the start and {load1[0]:.1f} at the end (other jobs were running: "
        "absolute rows/s are noisy, the ratios within one run are the comparison).",
    ]
    titles = {"log_prob": "`log_prob` of complete and partial rows",
              "sample": "unconditional sampling",
              "conditional": "conditional `log_prob` and sampling"}
    for table, body in rows.items():
        lines += ["", f"## {titles[table]}", "",
                  "| path | rows/s | seconds | vs numpy | max rel. error vs numpy |",
                  "|---|---:|---:|---:|---:|"]
        base = {}
        for name, rps, sec, err in body:
            kind = "sample" if "sample" in name else "log_prob"
            if name.startswith("numpy"):
                base[kind] = rps
            e = "" if err is None else f"{err:.1e}"
            lines.append(f"| {name} | {rps:,.0f} | {sec:.3f} | {rps / base[kind]:.2f}x | {e} |")
    thr = f" --threads {args.threads}" if args.threads else ""
    lines += ["", f"Command: `python benchmarks/bench_torch_logprob.py --n-fit {args.n_fit} "
              f"--n-trees {args.n_trees} --repeats {args.repeats}{thr}`", ""]
    assert np.isfinite(ref).all()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
