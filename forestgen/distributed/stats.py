"""Leaf parameters as a map-reduce of mergeable sufficient statistics over a Dask DataFrame.

Each partition is encoded, routed through the forest and summarised as a
:class:`~forestgen.leaves.stats.ForestStats` (coverage counts, per-leaf moments or level counts,
missing counts); the summaries merge pairwise in a fixed order and the model's leaves are fitted
from the merged statistics (:meth:`~forestgen.base.GenerativeForest.fit_leaves_from_stats`). No
step gathers the rows.
"""

from __future__ import annotations

import dask
import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from forestgen.distributed.encoding import refuse_infinite
from forestgen.distributed.graph import share, tree_reduce
from forestgen.leaves.stats import ForestStats


def encoded_stats(Z: np.ndarray, forest, schema) -> ForestStats:
    """:class:`ForestStats` of the encoded rows ``Z`` in ``forest`` (columns of ``schema``);
    rows with an infinite value are refused naming the column (they are training rows)."""
    refuse_infinite(Z, schema)
    missing_cols = np.array([j for j, c in enumerate(schema.columns) if c.has_missing],
                            np.int64)
    return ForestStats.from_leaves(Z, forest.apply(Z), forest.n_leaves,
                                   ForestStats.plan(schema), missing_cols)


def _frame_stats(df: pd.DataFrame, model) -> ForestStats:
    return encoded_stats(model.encoder_.transform(df), model.forest_, model.schema_)


def _merge(a: ForestStats, b: ForestStats) -> ForestStats:
    return a.merge(b)


def reduce_stats(parts: list) -> ForestStats:
    """Merge delayed :class:`ForestStats` pairwise in their order, and compute."""
    return tree_reduce(parts, _merge).compute()


def leaf_statistics(model, ddf) -> ForestStats:
    """Merged :class:`ForestStats` of the rows of the Dask DataFrame ``ddf`` (or a pandas
    DataFrame: one partition) in the forest of the fitted ``model``."""
    check_is_fitted(model)
    if isinstance(ddf, pd.DataFrame):
        return _frame_stats(ddf, model)
    m = share(model)
    return reduce_stats([dask.delayed(_frame_stats)(p, m) for p in ddf.to_delayed()])


def refit_leaves(model, ddf):
    """Re-estimate ``model``'s leaf weights, leaf distributions and missing rates on the rows
    of ``ddf`` (same trees): honest estimation when ``ddf`` holds rows the trees were not grown
    on. Returns ``model``."""
    return model.fit_leaves_from_stats(leaf_statistics(model, ddf))
