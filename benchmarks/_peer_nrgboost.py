"""Runs the reference package (PyPI ``nrgboost`` 0.0.3) for ``bench_nrgboost.py``.

Executed with the peer's own interpreter (``~/.cache/forestgen-peers/nrgboost/bin/python``);
reads a job JSON, writes samples (CSV) and a result JSON. Log-likelihood uses the same estimator as
forestgen's ``NRGBoost.log_z_``: importance sampling from the model's own ``q0``,
``log Z = log mean exp(f(x) - log q0(x))``, with its delta-method standard error; grid
log-probabilities are turned into densities in original units by subtracting the log bin widths
of the reference's own binning.

The reference's ``initial_model.predict(log=True)`` is not a normalised log pmf: its marginals
are counts, and over the whole grid it sums to the number of training rows (measured: +9.21 nats
= log 10,000 on the 10k-row synthetic table), while its ``sample_points`` draws the normalised
q0. ``log Z = log mean exp(f - log q0)`` therefore misses that constant;
:func:`log_q0_normaliser` computes it exactly (a product over columns, each summed over all of
its codes) and it is added to ``log Z`` — without it the reference's held-out log-likelihood is
too high by ``log N``.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd


def log_widths(transform, df_cols, enc):
    """Sum over numeric columns of log(bin width in original units) for encoded rows."""
    types = transform.discretization_types
    out = np.zeros(len(enc))
    for j, col in enumerate(df_cols):
        if col not in transform.transforms["num"]:
            continue
        edges = np.asarray(transform.transforms["num"][col], float)
        w = np.diff(edges)
        if col in types.get("discrete_numerical", []) or col in types.get("discrete_quantized", []):
            w = np.maximum(w, 1.0)
        w = w / 10.0 ** transform.fixed_point_digits.get(col, 0)
        out += np.log(w[np.minimum(enc[:, j].astype(int), len(w) - 1)])
    return out


def log_q0_normaliser(initial_model, row: np.ndarray) -> float:
    """``log sum_x exp(initial_model.predict(x, log=True))`` over the grid: the model is a
    product over columns, so it is ``predict(row) + sum_j logsumexp_k [predict(row with
    x_j = k) - predict(row)]``, each column over all of its codes."""
    row = np.asarray(row)[None, :]
    base = float(initial_model.predict(row, log=True)[0])
    total = base
    for j, marg in enumerate(initial_model.encoded_marginals()):
        n = len(np.asarray(marg))
        grid = np.repeat(row, n, axis=0)
        grid[:, j] = np.arange(n)
        v = initial_model.predict(grid, log=True) - base
        mx = v.max()
        total += float(mx + np.log(np.exp(v - mx).sum()))
    return total


def main(job_path: str) -> None:
    from nrgboost import Dataset, NRGBooster

    job = json.loads(open(job_path).read())
    train = pd.read_pickle(job["train"])
    test = pd.read_pickle(job["test"])
    ds = Dataset(train)
    params = dict(job["params"])
    t0, c0 = time.perf_counter(), time.process_time()
    model = NRGBooster.fit(ds, params, seed=job["seed"])
    fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    samples = model.sample(job["n_samples"], num_steps=job["num_steps"], seed=job["seed"])
    sample_s, sample_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    samples.to_pickle(job["samples_out"])
    b = model.booster
    rng = np.random.default_rng(job["seed"])
    q0 = b.initial_model.sample_points(job["n_is"], seed=rng)
    r = b.predict(q0) - b.initial_model.predict(q0, log=True)
    mx = r.max()
    w = np.exp(r - mx)
    enc = model.transform(test)
    q0_norm = log_q0_normaliser(b.initial_model, enc[0])
    log_z = float(mx + np.log(w.mean())) + q0_norm
    se = float(w.std(ddof=1) / np.sqrt(len(w)) / w.mean())
    f = b.predict(enc)
    ll = f - log_z - log_widths(model.transform, list(test.columns), enc)
    json.dump({"fit_s": fit_s, "sample_s": sample_s, "fit_cpu_s": fit_cpu_s,
               "sample_cpu_s": sample_cpu_s, "log_z": log_z, "log_z_se": se,
               "log_q0_norm": q0_norm,
               "test_ll": ll.tolist()}, open(job["result_out"], "w"))


if __name__ == "__main__":
    main(sys.argv[1])
