"""Scoring a Dask DataFrame and sampling into a partitioned Parquet dataset.

:func:`sample_to_parquet` splits ``n`` rows into parts of ``rows_per_part`` rows; part ``i``
is drawn by its own generator, seeded with ``seed_child(seed_sequence(random_state), i)`` (the
package's one seeding scheme, counter-based), and written to ``part-{i:05d}.parquet``. A part's
rows depend only on the model, ``random_state``, ``i`` and its size, so the dataset is
bit-identical whether one worker writes every part or many write them in any order.
"""

from __future__ import annotations

from pathlib import Path

import dask
import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from forestgen.distributed.graph import share
from forestgen.validation import check_int, seed_child, seed_sequence


def _score(df: pd.DataFrame, model) -> pd.Series:
    return pd.Series(model.log_prob(df), index=df.index, name="log_prob")


def log_prob(model, ddf):
    """Log density of every row of the Dask DataFrame ``ddf`` under ``model``, as a lazy Dask
    Series (``.compute()``, ``.mean()``, ``.to_parquet()``...) aligned with ``ddf``'s
    partitions. Missing entries are marginalised, as :meth:`GenerativeForest.log_prob`."""
    check_is_fitted(model)
    return ddf.map_partitions(_score, share(model),
                              meta=pd.Series(dtype=np.float64, name="log_prob"))


def _write_part(model, n: int, seed, path: str, missing: bool) -> str:
    df = model.sample(n, random_state=np.random.Generator(np.random.PCG64(seed)),
                      missing=missing)
    df.to_parquet(path, index=False)
    return path


def sample_to_parquet(model, n: int, path: str | Path, *, rows_per_part: int = 1_000_000,
                      random_state=0, missing: bool = True) -> list[Path]:
    """Write ``n`` synthetic rows of ``model`` (:meth:`GenerativeForest.sample`) as the
    Parquet dataset ``path/part-00000.parquet, ...`` of ``rows_per_part`` rows each (the last
    may be smaller), one Dask task per part; returns the file paths. Read it back with
    ``dask.dataframe.read_parquet(path)``. The files are identical for any number of
    workers (see the module docstring); ``random_state`` must not be ``None`` for that."""
    check_is_fitted(model)
    check_int("n", n, 0)
    check_int("rows_per_part", rows_per_part, 1)
    root = seed_sequence(random_state)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    m = share(model)
    sizes = [min(rows_per_part, n - s) for s in range(0, n, rows_per_part)]
    tasks = [dask.delayed(_write_part)(m, k, seed_child(root, i),
                                       str(out / f"part-{i:05d}.parquet"), missing)
             for i, k in enumerate(sizes)]
    return [Path(p) for p in dask.compute(*tasks)]
