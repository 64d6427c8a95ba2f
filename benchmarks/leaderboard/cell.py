"""Fit one generator on one table and sample from it: ``python cell.py JOB.json``.

Runs inside the generator's own environment (forestgen's, or a peer's venv), so it imports only
numpy, pandas and the generator's package. Reads the job (generator, params, train/test CSV,
column kinds, seed), writes ``synth.csv`` and ``result.json`` (fit/sample seconds, peak memory,
held-out log-likelihood where the model has one, the output dtypes and every adapter step the
generator needed). Adapters are tried only after the untouched table failed, and each one is
recorded with the error that made it necessary.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd


def typed(path: str, meta: dict) -> pd.DataFrame:
    """The CSV with the dtypes its meta declares (datetimes arrive as float days)."""
    df = pd.read_csv(path, keep_default_na=False, na_values=[""])
    for c, spec in meta["columns"].items():
        k = spec["kind"]
        if k == "categorical":
            df[c] = df[c].astype("string").astype(object).where(df[c].notna(), np.nan)
            df[c] = df[c].astype("category")
        elif k == "ordered":
            df[c] = pd.Categorical(df[c].astype("string").astype(object)
                                   .where(df[c].notna(), np.nan), categories=spec["levels"],
                                   ordered=True)
        elif k == "nullable_integer":
            df[c] = df[c].astype("Int64")
        elif k == "integer":
            df[c] = df[c].astype("int64")
        elif k == "bool":
            df[c] = df[c].astype("boolean") if df[c].isna().any() else df[c].astype(bool)
        else:
            df[c] = df[c].astype(float)
    return df


# ----------------------------------------------------------------------------- adapters
def no_nan_rows(df):
    out = df.dropna().reset_index(drop=True)
    return out, f"dropped {len(df) - len(out)} of {len(df)} training rows with NaN"


def float_nullable_ints(df):
    out = df.copy()
    cols = [c for c in out.columns if str(out[c].dtype) == "Int64"]
    for c in cols:
        out[c] = out[c].astype(float)
    return out, f"nullable integer column(s) {cols} cast to float"


def object_categoricals(df):
    out = df.copy()
    for c in out.columns:
        if isinstance(out[c].dtype, pd.CategoricalDtype) or str(out[c].dtype) == "boolean":
            out[c] = out[c].astype(object).where(out[c].notna(), np.nan)
    return out, "categorical/boolean columns cast to object"


def float_integers(df):
    out = df.copy()
    cols = [c for c in out.columns if str(out[c].dtype) in ("int64", "Int64")]
    for c in cols:
        out[c] = out[c].astype(float)
    return out, f"integer column(s) {cols} passed as doubles"


#: Adapters tried in turn (cumulatively) when a peer fails on the untouched table.
ADAPTERS = {"arfpy": [float_nullable_ints, object_categoricals, no_nan_rows],
            "nrgboost": [float_nullable_ints, no_nan_rows],
            "sdv": [float_nullable_ints, object_categoricals, no_nan_rows],
            # arf 0.2.4's lik() stops with "argument is of length zero" on R integer columns
            # of some tables (adult); as doubles it runs (forge then returns doubles there)
            "rarf": [float_integers]}


# ----------------------------------------------------------------------------- generators
def class_target(train: pd.DataFrame, target: str, meta: dict) -> str:
    """The class column a supervised learner (GeF) is fitted on: the table's TSTR target when
    it is a class (categorical, ordered or bool) without missing values, else the first such
    column; no such column: a ValueError saying so (the cell is recorded as that error)."""
    def ok(c):
        return (meta["columns"][c]["kind"] in ("categorical", "ordered", "bool")
                and not train[c].isna().any())

    if ok(target):
        return target
    for c in train.columns:
        if ok(c):
            return c
    raise ValueError(f"no class column for a supervised learner: the target {target!r} is "
                     f"{meta['columns'][target]['kind']} (or has missing values) and no "
                     f"categorical or bool column is complete")


def run_forestgen(name, params, train, test, n, seed, target, meta):
    import inspect

    from forestgen import registry

    if name == "auto":  # forestgen.AutoForest (not a registry learner)
        from forestgen.auto import AutoForest

        model = AutoForest(**params, random_state=seed)
    else:
        model = registry.get("learner", name)(**params, random_state=seed)
    kw, extra = {}, {}
    if name == "auto":  # the table's TSTR target, as SMOTE is given it (forestgen.auto)
        kw["target"] = target
    elif "target" in inspect.signature(model.fit).parameters:
        kw["target"] = class_target(train, target, meta)
        extra["class_target"] = kw["target"]
    t0 = time.perf_counter()
    model.fit(train, **kw)  # a supervised learner (GeF) is given a class column
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = model.sample(n, random_state=seed)
    sample_s = time.perf_counter() - t0
    if name == "auto":
        extra["auto_choice"] = model.best_name_
        extra["auto_board"] = model.leaderboard_.drop(columns="note").round(4).to_dict("records")
    try:
        ll = np.asarray(model.log_prob(test), dtype=float)
        extra["test_ll"] = float(np.mean(ll))
        extra["test_ll_n_neg_inf"] = int(np.sum(~np.isfinite(ll)))
    except NotImplementedError as exc:
        extra["test_ll_note"] = str(exc)
    return synth, fit_s, sample_s, extra


def run_arfpy(params, train, test, n, seed):
    from arfpy import arf

    np.random.seed(seed)
    t0 = time.perf_counter()
    model = arf.arf(x=train, **params)
    model.forde()
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = model.forge(n=n)
    return synth, fit_s, time.perf_counter() - t0, {}


def run_nrgboost(params, train, test, n, seed):
    from nrgboost import Dataset, NRGBooster

    p = dict(params)
    steps = p.pop("num_steps", 10)
    t0 = time.perf_counter()
    model = NRGBooster.fit(Dataset(train), p, seed=seed)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = model.sample(n, num_steps=steps, seed=seed)
    return synth, fit_s, time.perf_counter() - t0, {}


def run_sdv(kind, params, train, test, n, seed):
    import torch
    from sdv.metadata import Metadata
    from sdv.single_table import (
        CTGANSynthesizer,
        GaussianCopulaSynthesizer,
        TVAESynthesizer,
    )

    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    cls = {"gaussiancopula": GaussianCopulaSynthesizer, "ctgan": CTGANSynthesizer,
           "tvae": TVAESynthesizer}[kind]
    meta = Metadata.detect_from_dataframes(data={"table": train})
    t0 = time.perf_counter()
    model = cls(meta, **params)
    model.fit({"table": train})  # SDV 2 takes single tables as {name: frame}
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = model.sample(num_rows=n)
    synth = synth["table"] if isinstance(synth, dict) else synth
    return synth, fit_s, time.perf_counter() - t0, {}


def run_forestflow(params, train, test, n, seed, meta):
    from ForestDiffusion import ForestDiffusionModel

    cols = list(train.columns)
    cats = {c: list(train[c].astype("category").cat.categories)
            for c in cols if meta["columns"][c]["kind"] in ("categorical", "ordered", "bool")}
    X = np.empty((len(train), len(cols)))
    for j, c in enumerate(cols):
        if c in cats:
            codes = pd.Categorical(train[c], categories=cats[c]).codes.astype(float)
            X[:, j] = np.where(codes < 0, np.nan, codes)
        else:
            X[:, j] = pd.to_numeric(train[c]).astype(float)
    cat_idx = [j for j, c in enumerate(cols) if c in cats and len(cats[c]) > 2]
    bin_idx = [j for j, c in enumerate(cols) if c in cats and len(cats[c]) <= 2]
    int_idx = [j for j, c in enumerate(cols)
               if meta["columns"][c]["kind"] in ("integer", "nullable_integer")]
    t0 = time.perf_counter()
    model = ForestDiffusionModel(X, cat_indexes=cat_idx, bin_indexes=bin_idx,
                                 int_indexes=int_idx, diffusion_type="flow", n_jobs=1,
                                 seed=seed, **params)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    Y = model.generate(batch_size=n)
    sample_s = time.perf_counter() - t0
    synth = pd.DataFrame(Y, columns=cols)
    for c, lv in cats.items():
        code = synth[c].round()
        synth[c] = [lv[int(v)] if np.isfinite(v) and 0 <= v < len(lv) else np.nan for v in code]
    return synth, fit_s, sample_s, {"adapter_fixed": "categoricals passed as integer codes "
                                                     "with cat/bin/int indexes, decoded back"}


def run_synthyverse(name, params, train, test, n, seed, meta):
    """A synthyverse 0.2.7 generator through its high-level wrapper (its default missing-value
    handling, ``"drop"``: rows with a missing numeric value are dropped), on one thread; class
    columns are its discrete features, SMOTE's target is the table's target."""
    import torch
    from synthyverse.generators import SynthyverseGenerator

    torch.set_num_threads(1)
    discrete = [c for c in train.columns
                if meta["columns"][c]["kind"] in ("categorical", "ordered", "bool")]
    kw = dict(params)
    if name == "smote":
        kw["target_column"] = meta["target"]
    if name in ("smote", "synthpop"):
        kw.setdefault("n_jobs", 1)
    data = train.copy()
    for c in discrete:  # labels as strings: its ordinal encoder sorts mixed types otherwise
        data[c] = data[c].astype(object).where(data[c].notna(), np.nan)
    for c in data.columns:
        if str(data[c].dtype) == "Int64":
            data[c] = data[c].astype(float)
    # its validation C2ST (xgboost) refuses feature names with spaces (iris): plain names in,
    # the table's names back
    names = {c: f"c{j}" for j, c in enumerate(data.columns)}
    data = data.rename(columns=names)
    if "target_column" in kw:
        kw["target_column"] = names[kw["target_column"]]
    t0 = time.perf_counter()
    model = SynthyverseGenerator(name, generator_params=kw, random_state=seed)
    model.fit(data, [names[c] for c in discrete])
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth = model.generate(n, random_state=seed).rename(columns={v: k for k, v in names.items()})
    extra = {"rows_used": int(len(data.dropna(subset=[names[c] for c in train.columns
                                                      if c not in discrete])))}
    extra["adapter_fixed"] = "columns renamed c0..cN for the generator, back after"
    return synth, fit_s, time.perf_counter() - t0, extra


def run_rarf(params, job, train, test, n, seed):
    out = Path(job["out"]) / "rarf"
    out.mkdir(parents=True, exist_ok=True)
    test = test.copy()
    for c in train.columns:  # an adapter's casts apply to the test rows too
        if str(train[c].dtype) == "float64" and str(test[c].dtype) != "float64":
            test[c] = test[c].astype(float)
    train.to_csv(out / "train_in.csv", index=False)
    test.to_csv(out / "test_in.csv", index=False)
    script = Path(__file__).resolve().parent / "rarf_run.R"
    cmd = ["Rscript", str(script), str(out / "train_in.csv"), str(out / "test_in.csv"), str(out),
           str(params.get("num_trees", "default")), str(params.get("min_node_size", "default")),
           str(seed), str(n), str(params.get("alpha", 0))]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "R_LIBS": job["rlib"]})
    if r.returncode != 0:
        lines = [x for x in (r.stderr or "").splitlines() if x.strip()]
        raise RuntimeError("R: " + " | ".join(lines[-3:])[-300:])
    res = json.loads((out / "result.json").read_text())
    synth = pd.read_csv(out / "synth.csv", keep_default_na=False, na_values=["", "NA"])
    synth.columns = list(pd.read_csv(job["train"], nrows=0).columns)  # R mangles names
    extra = {"test_ll": res["test_ll_normalised"], "test_ll_official": res["test_ll_official"],
             "test_ll_n_neg_inf": res["n_neg_inf_normalised"], "peer": res["peer"]}
    return synth, res["t_fit"] + res["t_forde"], res["t_forge"], extra


def rarf_one_measure(job, out: Path) -> dict:
    """R arf's held-out LL from its parameters: as a density (every leaf, missing values
    marginalised) and on forestgen's base measure (masses where forestgen scores masses)."""
    from basemeasure import mass_cells
    from rarf_cells import rarf_loglik

    train, test = typed(job["train"], job["meta"]), typed(job["test"], job["meta"])
    lo, hi = mass_cells(train, test)
    dens, cells = rarf_loglik(out), rarf_loglik(out, lo, hi)
    # on the base measure of ARF with integers coded as numbers (max_ordinal_levels=0)
    cells0 = rarf_loglik(out, *mass_cells(train, test, max_ordinal_levels=0))
    r = pd.read_csv(out / "test_ll.csv")["ll_normalised"].to_numpy(float)
    both = np.isfinite(r) & np.isfinite(dens)
    return {"test_ll_mixture": float(np.mean(dens)), "test_ll_grid": float(np.mean(cells)),
            "test_ll_grid_numbers": float(np.mean(cells0)),
            "test_ll_grid_cells": int(lo.notna().to_numpy().sum()),
            "test_ll_mixture_vs_lik": {  # how far lik()'s one-leaf-per-tree figure is
                "rows": int(both.sum()), "max_abs": float(np.max(np.abs(dens - r)[both]))
                if both.any() else None, "mean": float(np.mean((dens - r)[both]))
                if both.any() else None}}


def fit_sample(job, train, test):
    gen, params, n, seed = job["generator"], job["params"], job["n_synth"], job["seed"]
    if gen.startswith("forestgen:"):
        name = re.split(r"[@~]", gen.split(":", 1)[1])[0]
        return run_forestgen(name, params, train, test, n, seed, job["meta"]["target"],
                             job["meta"])
    if gen == "arfpy":
        return run_arfpy(params, train, test, n, seed)
    if gen == "nrgboost":
        return run_nrgboost(params, train, test, n, seed)
    if gen.startswith("sdv:"):
        return run_sdv(gen.split(":", 1)[1], params, train, test, n, seed)
    if gen == "forestflow":
        return run_forestflow(params, train, test, n, seed, job["meta"])
    if gen.startswith("synthyverse:"):
        return run_synthyverse(gen.split(":", 1)[1], params, train, test, n, seed, job["meta"])
    if gen == "rarf":
        return run_rarf(params, job, train, test, n, seed)
    raise ValueError(f"unknown generator {gen!r}")


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (R runs as a child)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    train, test = typed(job["train"], job["meta"]), typed(job["test"], job["meta"])
    in_dtypes = {c: str(t) for c, t in train.dtypes.items()}
    steps, data = [], train
    adapters = list(ADAPTERS.get(job["generator"].split(":")[0], []))
    cpu0 = _cpu_seconds()
    while True:
        try:
            synth, fit_s, sample_s, extra = fit_sample(job, data, test)
            break
        except Exception as exc:  # a failing generator gets the next adapter, then gives up
            err = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            if not adapters:
                tried = f"; adapters tried before: {steps}" if steps else ""
                raise RuntimeError(f"{err}{tried}") from exc
            data, step = adapters.pop(0)(data)
            steps.append(f"{step} (after {err})")
    if "adapter_fixed" in extra:
        steps.insert(0, extra.pop("adapter_fixed"))
    cpu_s = _cpu_seconds() - cpu0
    if job["generator"] == "rarf":  # scored after the timing: not R arf's cost
        extra.update(rarf_one_measure(job, out / "rarf"))
    synth = pd.DataFrame(synth)
    synth.columns = [str(c) for c in synth.columns]
    out_dtypes = {c: str(synth[c].dtype) for c in synth.columns}
    match = [c for c in in_dtypes if out_dtypes.get(c) == in_dtypes[c]]
    synth.to_csv(out / "synth.csv", index=False)
    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = {"fit_s": float(fit_s), "sample_s": float(sample_s), "cpu_s": cpu_s,
              "peak_rss_mb": max(usage, child) / 1024.0, "adapter_steps": steps,
              "dtypes_in": in_dtypes, "dtypes_out": out_dtypes,
              "dtype_match": len(match) / max(1, len(in_dtypes)), "n_train_used": len(data),
              "python": sys.version.split()[0], **extra}
    (out / "result.json").write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception:
        traceback.print_exc()
        sys.exit(1)
