"""Splitter contract: grows one tree from the rows a learner hands it.

A splitter decides *how a node is split* (its criterion and search); the learner decides the
tree's *shape limits* (its paper's defaults) and passes them as :class:`GrowLimits`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from forestgen.component import Component
from forestgen.tree.record import TreeRecord


@dataclass
class TreeData:
    """What a splitter sees. Always: binned codes ``Xb [d, n]`` (uint8 or uint16; code
    ``n_bins[j]`` is missing), ``n_bins [d]``, ``nominal [d]`` and the bin ``thresholds``
    (encoded units). Filled by learners whose splitters need them: the encoded rows
    ``Z [n, d]``, discrete level counts ``n_levels [d]`` (0 = numeric), a finite root box
    ``box_lo, box_hi [d]`` with the allowed levels of its nominal columns ``root_mask``
    (uint8, the nominal-offset layout of :func:`~forestgen.splitters.density.column_layout`;
    ``None``: every level), the per-bin reference mass ``vref [d, max_bins]`` (each column
    normalised to 1). Grid data (NRGBoost,
    :func:`~forestgen.families.energy.splitter.grid_data`) also has ``has_missing [d]`` (code
    ``n_bins[j]`` is a missing state) and the model's samples ``model_codes [d, M]`` with
    weights ``model_weight [M]`` (or, without them, the product measure ``q0`` in ``vref``).
    ``route_rows``: the learner asks for the node every row reaches (in bag or not) as
    :attr:`TreeRecord.row_node <forestgen.tree.record.TreeRecord>`; a splitter that cannot
    give it leaves it ``None`` (the learner then routes the rows itself)."""

    Xb: np.ndarray
    n_bins: np.ndarray
    nominal: np.ndarray
    thresholds: list[np.ndarray]
    Z: np.ndarray | None = None
    n_levels: np.ndarray | None = None
    box_lo: np.ndarray | None = None
    box_hi: np.ndarray | None = None
    vref: np.ndarray | None = None
    has_missing: np.ndarray | None = None
    model_codes: np.ndarray | None = None
    model_weight: np.ndarray | None = None
    root_mask: np.ndarray | None = None
    route_rows: bool = False

    @property
    def d(self) -> int:
        return self.Xb.shape[0] if self.Xb is not None else self.Z.shape[1]

    @functools.cached_property
    def threshold_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Every column's bin ``thresholds`` end to end (float64) and each column's offset
        into them, ``[d + 1]`` (column ``j``'s are ``flat[off[j]:off[j + 1]]``); built once
        per tree data (its trees read it tree after tree)."""
        off = np.zeros(len(self.thresholds) + 1, np.int64)
        np.cumsum([len(t) for t in self.thresholds], out=off[1:])
        flat = (np.concatenate(self.thresholds).astype(np.float64, copy=False)
                if len(self.thresholds) else np.zeros(0))
        return flat, off

    def require(self, splitter: Splitter, *names: str) -> None:
        missing = [k for k in names if getattr(self, k) is None]
        if missing:
            raise ValueError(f"{type(splitter).__name__} needs TreeData.{', '.join(missing)}, "
                             "which this learner does not provide")


BinnedData = TreeData  # former name


@dataclass(frozen=True)
class GrowLimits:
    """Tree-shape limits a learner imposes on any splitter. ``max_features``: candidate columns
    per node (see :func:`resolve_max_features`); ``max_depth`` / ``max_leaves``: ``None`` =
    unlimited; ``min_samples_leaf``: minimum weighted rows per child; ``min_class_leaf [C]``:
    minimum weight of each class per child; ``n_classes``: labels are ``0..n_classes-1``."""

    max_features: Any = "sqrt"
    max_depth: int | None = None
    max_leaves: int | None = None
    min_samples_leaf: float = 1.0
    min_class_leaf: np.ndarray | None = None
    n_classes: int = 1


class Splitter(Component):
    """Base class. :meth:`grow` turns (tree data, labels ``y [n]``, row weights ``w [n]``, the
    tree's Generator, limits) into a :class:`~forestgen.tree.record.TreeRecord`.

    Rows with weight 0 are out of bag and must not influence the tree. All randomness must come
    from ``rng`` (one Generator per tree), so forests are identical for any thread count.
    ``labelled`` declares whether the splitter uses class labels (ARF, GeF) or grows on the rows
    alone (DEF, RFDE); learners reject splitters of the wrong kind. Plain Python works (slow);
    built-ins call Numba kernels in :mod:`forestgen.tree`. Parameters are keyword arguments
    stored under their own names (so :meth:`get_params` round-trips through save/load).
    """

    labelled: ClassVar[bool] = True
    #: what it grows: ``"tree"`` (one tree at a time through :meth:`grow`, the tree learners)
    #: or ``"cell table"`` (splits of the joint partition of all trees, GF.Boost / EOGT:
    #: :class:`~forestgen.families.intersection.splitter.BayesRiskSplitter`)
    grows: ClassVar[str] = "tree"
    #: what it reads beyond the labels and row weights: :class:`TreeData` fields (``"Xb"``,
    #: ``"Z"``, ``"vref"``, ...) and ``"max_depth"`` if it needs a depth limit; a learner
    #: whose data or limits lack one refuses the splitter at construction
    #: (``GenerativeForest.tree_data``). Empty: not declared (checked only when it grows)
    needs: ClassVar[frozenset] = frozenset()
    registry_name: ClassVar[str] = ""

    def grow(self, data: TreeData, y: np.ndarray, w: np.ndarray, rng: np.random.Generator,
             limits: GrowLimits) -> TreeRecord:
        raise NotImplementedError

    def tree_grower(self, data: TreeData, y: np.ndarray | None, limits: GrowLimits):
        """A function ``(w, rng) -> TreeRecord`` that grows one tree of a forest on ``data``,
        ``y`` and ``limits``: the same tree as :meth:`grow` with those arguments. A forest
        calls this once and the function once per tree, so a splitter can do the per-forest
        setup (argument checks and conversions) once; by default it calls :meth:`grow`."""
        return lambda w, rng: self.grow(data, y, w, rng, limits)


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


def make_splitter(spec: Any, learner: str, labelled: bool, default_cls: type,
                  **defaults: Any) -> Splitter:
    """The splitter a learner grows with: a registry name, a :class:`Splitter` class or
    instance, or a bare ``@numba.njit`` gain function (wrapped in ``default_cls``, the
    learner's own splitter family). ``defaults`` are passed when a name or class is given."""
    from forestgen import registry
    from forestgen.tree.criteria import criterion_code

    if not isinstance(spec, (str, type, Splitter)):
        criterion_code(spec)  # raises a clear TypeError for anything else
        out = default_cls(criterion=spec)
    else:
        cls = registry.get("splitter", spec) if isinstance(spec, str) else spec
        if isinstance(cls, type):
            if not issubclass(cls, Splitter):
                raise TypeError(f"{learner}: splitter must be a Splitter subclass, got {cls!r}")
            import inspect

            accepted = inspect.signature(cls.__init__).parameters
            out = cls(**{k: v for k, v in defaults.items() if k in accepted})
        else:
            out = cls
    if out.labelled != labelled:
        need = "class-labelled" if labelled else "unlabelled (density / partition)"
        raise ValueError(f"{learner} grows {need} trees; splitter {out!r} is "
                         f"{'labelled' if out.labelled else 'unlabelled'}")
    return out
