"""What a leaf-mixture model's file holds: its arrays and metadata, and their cross-checks.

:meth:`GenerativeForest.save <forestgen.base.GenerativeForest.save>` writes
:func:`model_arrays` through :func:`forestgen.modelfile.write_model_file`;
:meth:`~forestgen.base.GenerativeForest.load` reads the file
(:func:`forestgen.modelfile.read_model_file`) and :func:`restore_fitted` rebuilds the fitted
attributes. :func:`check_model` cross-checks the arrays against the schema on both sides, so a
leaf model never computes from a malformed array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from forestgen import registry
from forestgen.data.encoder import TableEncoder
from forestgen.data.schema import Schema
from forestgen.modelfile import (
    FORMAT_VERSION,
    check_forest,
    check_tree_weights,
    from_json,
    to_json,
)
from forestgen.tree.arrays import ForestArrays


def model_arrays(model: Any, extra_arrays: dict[str, np.ndarray], extra_meta: dict[str, Any],
                 ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The checked arrays and the metadata of the fitted ``model``'s file; ``extra_arrays``
    and ``extra_meta`` are the learner's own (saved as ``extra.*`` and ``meta["extra"]``)."""
    arrays = model.forest_.to_arrays()
    arrays["leaf_log_weight"] = model.leaf_log_weight_
    if getattr(model, "missing_cols_", None) is not None:
        arrays["missing_cols"] = model.missing_cols_
        arrays["missing_rate"] = model.missing_rate_
        if getattr(model, "missing_parent_", None) is not None:
            arrays["missing_parent"] = model.missing_parent_
    leaves_meta = []
    for j, lm in enumerate(model.leaf_models_):
        for k, v in lm.param_arrays().items():
            arrays[f"leaf{j}.{k}"] = v
        leaves_meta.append({"name": registry.name_of("leaf", lm), "class": type(lm).__name__,
                            "params": to_json(lm.get_params(), f"leaf model {j}")})
    for k, v in extra_arrays.items():
        arrays[f"extra.{k}"] = v
    meta = {
        "format_version": FORMAT_VERSION,
        "learner": registry.name_of("learner", model),
        "params": {k: to_json(v, k) for k, v in model.get_params().items()},
        "schema": model.schema_.to_dict(),
        "leaves": leaves_meta,
        "extra": to_json(extra_meta, "extra"),
    }
    check_model(model, arrays)
    return arrays, meta


def restore_fitted(model: Any, arrays: dict[str, np.ndarray], meta: dict,
                   ) -> tuple[dict[str, np.ndarray], Any]:
    """Set the fitted attributes of the unfitted learner ``model`` from a file's ``arrays``
    and ``meta``, checked before any leaf model sees its arrays; returns the learner's own
    ``extra`` arrays and metadata (for its ``_restore_extra``)."""
    schema = Schema.from_dict(meta["schema"])
    schema.check()
    model.encoder_ = TableEncoder.from_schema(schema)
    model.forest_ = ForestArrays.from_arrays(arrays)
    model.leaf_log_weight_ = arrays["leaf_log_weight"]
    if "missing_cols" in arrays:
        model.missing_cols_ = arrays["missing_cols"]
        model.missing_rate_ = arrays["missing_rate"]
        model.missing_parent_ = arrays.get("missing_parent")  # absent: written before nesting
    leaves_meta = meta["leaves"]
    if not isinstance(leaves_meta, list) or len(leaves_meta) != schema.d:
        raise ValueError(f"the metadata lists {len(leaves_meta)} leaf models for "
                         f"{schema.d} columns")
    model.leaf_models_ = [registry.get("leaf", lmeta["name"])(**from_json(lmeta["params"]))
                          for lmeta in leaves_meta]
    check_model(model, arrays)
    for j, lm in enumerate(model.leaf_models_):
        pre = f"leaf{j}."
        lm.set_param_arrays({k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)})
    extra = {k[6:]: v for k, v in arrays.items() if k.startswith("extra.")}
    return extra, from_json(meta["extra"])


def check_model(model: Any, arrays: dict[str, np.ndarray]) -> None:
    """Cross-check the arrays against the schema (used on save and, before any query, on load).

    Leaf parameters are checked *before* they are attached (via ``arrays``), so a leaf model
    never computes from a malformed array.
    """
    schema = model.schema_
    d = schema.d
    check_forest(model.forest_, d)
    L = model.forest_.n_leaves
    llw = arrays["leaf_log_weight"]
    if llw.dtype != np.float64 or llw.shape != (L,) or np.isnan(llw).any() or (
            llw == np.inf).any():
        raise ValueError(f"leaf_log_weight must be {L} float64 log-weights (no NaN or +inf), "
                         f"got {llw.dtype} {llw.shape}")
    check_tree_weights("leaf_log_weight", llw, model.forest_.leaf_offsets)
    if "missing_cols" in arrays:
        cols, rate = arrays["missing_cols"], arrays.get("missing_rate")
        if (cols.dtype.kind != "i" or cols.ndim != 1 or np.any(cols < 0) or np.any(cols >= d)
                or rate is None or rate.shape != (L, len(cols))
                or not ((rate >= 0) & (rate <= 1)).all()):
            raise ValueError("missing_cols / missing_rate do not match the columns and leaves")
        parent = arrays.get("missing_parent")
        if parent is not None and not _is_forest_of_parents(parent, len(cols)):
            raise ValueError("missing_parent must give each missing column another one (or -1), "
                             "without cycles")
    if len(model.leaf_models_) != d:
        raise ValueError(f"{len(model.leaf_models_)} leaf models for {d} columns")
    known = {"leaf_log_weight", "missing_cols", "missing_rate", "missing_parent"}
    known |= {f"forest.{f}" for f in model.forest_.to_arrays(prefix="")}
    for j, (spec, lm) in enumerate(zip(schema.columns, model.leaf_models_)):
        if lm.discrete != spec.is_discrete:
            raise ValueError(f"column {spec.name!r}: leaf model {type(lm).__name__} is "
                             f"{'discrete' if lm.discrete else 'numeric'}, the column is not")
        pre = f"leaf{j}."
        own = {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}
        try:
            lm.check_param_arrays(own, L, spec.n_levels if spec.is_discrete else 0)
        except ValueError as e:
            raise ValueError(f"column {spec.name!r}: {e}") from None
        known |= {pre + k for k in own}
    stray = [k for k in arrays if k not in known and not k.startswith("extra.")]
    if stray:
        raise ValueError(f"unexpected arrays {sorted(stray)[:5]}")


def _is_forest_of_parents(parent: np.ndarray, k: int) -> bool:
    """``parent`` is ``k`` integers, each ``-1`` or another index, with no cycle."""
    if parent.dtype.kind != "i" or parent.shape != (k,) or np.any(parent < -1) \
            or np.any(parent >= k) or np.any(parent == np.arange(k)):
        return False
    for start in range(k):
        seen, j = 0, start
        while j >= 0:
            j, seen = int(parent[j]), seen + 1
            if seen > k:
                return False
    return True
