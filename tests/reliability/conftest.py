"""Fixtures for the reliability suite: small fitted models and a model-file rewriter that
bypasses every check (to craft hostile files)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="session")
def mixed_small() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 300
    c = rng.choice(["a", "b", "c", "d"], size=n)
    x = rng.normal(size=n) + (c == "b") * 2.0
    y = 0.5 * x + rng.normal(size=n)
    x[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({"x": x, "y": y, "c": c})


@pytest.fixture(scope="session")
def arf_small(mixed_small):
    from forestgen import ARF

    return ARF(n_trees=3, random_state=0, n_jobs=1).fit(mixed_small)


def read_raw(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """Arrays and metadata of a trusted file, without any validation."""
    with zipfile.ZipFile(path) as zf:
        meta = json.loads(zf.read("meta.json"))
        with np.load(io.BytesIO(zf.read("arrays.npz"))) as npz:
            arrays = {k: npz[k] for k in npz.files}
    return arrays, meta


def write_raw(path: Path, arrays: dict, meta: dict) -> Path:
    """Write a model file exactly as given (no checks): the attacker's tool."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("arrays.npz", buf.getvalue())
        zf.writestr("meta.json", json.dumps(meta))
    return path


@pytest.fixture
def crafted(tmp_path, arf_small):
    """``crafted(edit)`` saves the small ARF, lets ``edit(arrays, meta)`` mutate it in place and
    writes the result unchecked; returns the crafted file's path."""
    good = arf_small.save(tmp_path / "good.forestgen")

    def make(edit) -> Path:
        arrays, meta = read_raw(good)
        edit(arrays, meta)
        return write_raw(tmp_path / "crafted.forestgen", arrays, meta)

    return make


#: every learner, as small and fast as it fits (the stored-format tests and the fuzzer)
FAST_LEARNERS = {
    "ARF": ("ARF", dict(n_trees=2, n_jobs=1)),
    "GeF": ("GeF", dict(n_trees=2, n_jobs=1)),
    "RFDE": ("RFDE", dict(n_trees=2, depth=2, n_jobs=1)),
    "DEF": ("DEF", dict(n_trees=2, max_leaves=4, n_jobs=1)),
    "NRGBoost": ("NRGBoost", dict(n_trees=2, max_leaves=4, pool_size=300, gibbs_chains=2,
                                  gibbs_burn_in=2, n_normaliser_samples=500)),
    "GFBoost": ("GFBoost", dict(n_trees=2, n_iter=4)),
    "EOGT": ("EOGT", dict(n_trees=2, n_iter=4)),
    "Chain": ("Chain", dict(min_leaf=20, n_jobs=1)),
}


def fit_fast(name: str, table: pd.DataFrame):
    """Learner ``name`` of :data:`FAST_LEARNERS` fitted on ``table`` (GeF: class column
    ``c``)."""
    import warnings

    import forestgen

    cls_name, params = FAST_LEARNERS[name]
    model = getattr(forestgen, cls_name)(random_state=0, **params)
    with warnings.catch_warnings():  # RFDE / DEF leave rows with a missing value out
        warnings.simplefilter("ignore", UserWarning)
        return model.fit(table, target="c") if name == "GeF" else model.fit(table)


@pytest.fixture(scope="session")
def all_models(mixed_small) -> dict:
    """Every learner fitted on ``mixed_small`` (small and fast)."""
    return {name: fit_fast(name, mixed_small) for name in FAST_LEARNERS}


def query_rows(model, table: pd.DataFrame) -> pd.DataFrame:
    """The rows a model's ``log_prob`` scores: GeF scores its features only."""
    return table.drop(columns="c") if type(model).__name__ == "GeF" else table
