"""A table encoder for a Dask DataFrame, fitted without gathering the table.

The column kinds and levels are inferred (:class:`~forestgen.data.TableEncoder`) on a sample
taken from every partition; then one pass over all partitions reduces each column's minimum,
maximum, missing flag and the levels of each label column that occur, which replace the
sample's, and checks that no partition holds a level the sample did not see.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import dask
import numpy as np
import pandas as pd

from forestgen.data.encoder import TableEncoder
from forestgen.data.schema import Schema
from forestgen.distributed.graph import tree_reduce
from forestgen.validation import check_int

_LABEL_KINDS = ("categorical", "bool", "binary")


def _head(df: pd.DataFrame, k: int) -> pd.DataFrame:
    return df.head(k)


def sample_rows(ddf, n_rows: int) -> pd.DataFrame:
    """The first ``ceil(n_rows / npartitions)`` rows of every partition (deterministic);
    partitions that disagree on a column's dtype are refused
    (:func:`check_partition_dtypes`)."""
    k = max(1, -(-int(n_rows) // ddf.npartitions))
    parts = dask.compute(*[dask.delayed(_head)(p, k) for p in ddf.to_delayed()])
    check_partition_dtypes(parts)
    return pd.concat(parts, ignore_index=True)


def check_partition_dtypes(parts: list[pd.DataFrame]) -> None:
    """Refuse, naming the column, partitions that disagree on a column's dtype (one holds
    integers, another floats or text): concatenated, the column would silently change kind
    (integers become floats, numbers become levels)."""
    for name in parts[0].columns if parts else []:
        seen: dict[str, int] = {}
        for i, p in enumerate(parts):
            if name in p.columns:
                seen.setdefault(str(p[name].dtype), i)
        if len(seen) > 1:
            shown = ", ".join(f"{dt} (partition {i})" for dt, i in seen.items())
            raise ValueError(f"column {name!r} has different dtypes in different partitions: "
                             f"{shown}; give it one dtype in every partition (e.g. "
                             f"ddf.astype({{{name!r}: ...}}), or dtype= when reading)")


def refuse_infinite(Z: np.ndarray, schema: Schema) -> None:
    """Encoded training rows ``Z`` with an infinite value: a ValueError naming the column."""
    inf = np.isinf(Z).any(axis=0)
    if inf.any():
        raise ValueError(f"column {schema.names[int(np.argmax(inf))]!r} contains infinite "
                         f"values")


def summarise(Z: np.ndarray, schema: Schema) -> dict[str, np.ndarray]:
    """Per column of the encoded rows ``Z``: min, max, whether any is missing, how many
    carry a level the schema does not know (code ``k``), and (``levels``, concatenated over
    the label columns) how many rows take each level. Training rows with an infinite value
    are refused naming the column (the encoder keeps a query's ``inf`` as a value past the
    range; a partition beyond the encoder's sample is training data)."""
    refuse_infinite(Z, schema)
    with warnings.catch_warnings():  # an all-missing column in one partition
        warnings.simplefilter("ignore", RuntimeWarning)
        lo = np.nanmin(Z, axis=0) if len(Z) else np.full(Z.shape[1], np.nan)
        hi = np.nanmax(Z, axis=0) if len(Z) else np.full(Z.shape[1], np.nan)
    unseen = np.array([int(np.sum(Z[:, j] == c.n_levels)) if c.is_discrete else 0
                       for j, c in enumerate(schema.columns)])
    levels = [np.bincount(Z[:, j][Z[:, j] < c.n_levels].astype(np.int64), minlength=c.n_levels)
              for j, c in enumerate(schema.columns) if c.kind in _LABEL_KINDS]
    return {"min": lo, "max": hi, "missing": np.isnan(Z).any(axis=0), "unseen": unseen,
            "levels": np.concatenate(levels) if levels else np.zeros(0, np.int64),
            "rows": np.array(len(Z))}


def merge_summaries(a: dict, b: dict) -> dict:
    return {"min": np.fmin(a["min"], b["min"]), "max": np.fmax(a["max"], b["max"]),
            "missing": a["missing"] | b["missing"], "unseen": a["unseen"] + b["unseen"],
            "levels": a["levels"] + b["levels"], "rows": a["rows"] + b["rows"]}


def widen(encoder: TableEncoder, summary: dict) -> TableEncoder:
    """``encoder`` with each numeric column's range, every column's missing flag and each
    label column's unobserved levels taken from ``summary`` (of all rows); raises naming a
    column with levels the encoder lacks."""
    schema = encoder.schema
    cols = []
    at = 0
    for j, c in enumerate(schema.columns):
        if summary["unseen"][j]:
            raise ValueError(f"column {c.name!r}: {int(summary['unseen'][j])} rows hold levels "
                             f"that the encoder's sample of the table did not contain; pass a "
                             f"larger encoder_rows, or declare the column's levels (a "
                             f"pandas CategoricalDtype)")
        upd: dict[str, Any] = {"has_missing": bool(summary["missing"][j])}
        if not c.is_discrete and np.isfinite(summary["min"][j]):
            upd["lower"] = float(summary["min"][j])
            upd["upper"] = float(summary["max"][j])
        if c.kind in _LABEL_KINDS:
            seen = summary["levels"][at:at + c.n_levels] > 0
            at += c.n_levels
            upd["unobserved"] = [int(v) for v in np.flatnonzero(~seen)] or None
        cols.append(dataclasses.replace(c, **upd))
    return TableEncoder.from_schema(dataclasses.replace(schema, columns=cols))


def fit_encoder(ddf, *, kinds: dict | None = None, max_ordinal_levels: int = 128,
                encoder_rows: int = 100_000) -> TableEncoder:
    """A :class:`TableEncoder` for all rows of the Dask DataFrame ``ddf``: kinds and levels
    from ``encoder_rows`` rows sampled across the partitions, numeric ranges and missing flags
    from every row (one map-reduce pass)."""
    check_int("encoder_rows", encoder_rows, 2)
    enc = TableEncoder(kinds=kinds, max_ordinal_levels=max_ordinal_levels)
    enc.fit(sample_rows(ddf, encoder_rows))
    parts = [dask.delayed(_summarise_frame)(p, enc) for p in ddf.to_delayed()]
    return widen(enc, tree_reduce(parts, merge_summaries).compute())


def _summarise_frame(df: pd.DataFrame, encoder: TableEncoder) -> dict:
    return summarise(encoder.transform(df), encoder.schema)
