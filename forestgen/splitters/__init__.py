"""Splitters: how a node is split. See :class:`forestgen.splitters.base.Splitter`."""

from forestgen.splitters.base import (
    BinnedData,
    GrowLimits,
    Splitter,
    TreeData,
    make_splitter,
    resolve_max_features,
)
from forestgen.splitters.density import DensitySplitter, MidpointSplitter
from forestgen.splitters.impurity import EntropySplitter, GiniSplitter, ImpuritySplitter

__all__ = ["BinnedData", "DensitySplitter", "EntropySplitter", "GiniSplitter",
           "GrowLimits", "ImpuritySplitter", "MidpointSplitter", "Splitter", "TreeData",
           "make_splitter", "resolve_max_features"]
