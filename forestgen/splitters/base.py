"""Splitter contract: grows one tree on binned, class-labelled rows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class BinnedData:
    """What a splitter sees: codes ``Xb [d, n]`` (uint16), bins per column, nominal flags."""

    Xb: np.ndarray
    n_bins: np.ndarray
    nominal: np.ndarray
    thresholds: list[np.ndarray]

    @property
    def d(self) -> int:
        return self.Xb.shape[0]


class Splitter:
    """Base class. A splitter turns (binned rows, labels, row weights) into one tree.

    Contract of :meth:`grow`: return a dict of tree-local node arrays ``feature`` (int32, -1 at
    leaves), ``thr_bin`` (left iff code <= thr_bin), ``nan_left`` (uint8), ``left``/``right``
    (int32, -1 at leaves), ``cat_off`` (int64, -1 unless nominal) with ``cat_left`` (uint8 level
    sets), and optionally ``node_value`` ``[n_nodes, C]``. Rows with weight 0 are out of bag and
    must not influence the tree. All randomness must come from ``rng`` (one Generator per tree),
    so forests are identical for any thread count. Subclasses may be plain Python (slow but
    fine for research); built-ins call a ``cache=True`` Numba kernel.
    """

    def grow(
        self,
        data: BinnedData,
        y: np.ndarray,
        w: np.ndarray,
        rng: np.random.Generator,
        *,
        n_classes: int,
        min_class_leaf: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def get_params(self) -> dict:
        return dict(vars(self))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def resolve_max_features(max_features, d: int) -> int:
    """``"sqrt"`` (floor, at least 1), ``"log2"``, ``None``/``"all"``, an int or a fraction."""
    if max_features is None or max_features == "all":
        return d
    if max_features == "sqrt":
        return max(1, int(np.floor(np.sqrt(d))))
    if max_features == "log2":
        return max(1, int(np.floor(np.log2(max(d, 1)))))
    if isinstance(max_features, (int, np.integer)) and not isinstance(max_features, bool):
        if not 1 <= max_features:
            raise ValueError(f"max_features must be >= 1, got {max_features}")
        return min(int(max_features), d)
    if isinstance(max_features, float) and 0.0 < max_features <= 1.0:
        return max(1, int(round(max_features * d)))
    raise ValueError(f"invalid max_features {max_features!r}")
