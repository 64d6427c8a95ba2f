"""Splitters: how a node is split. See :class:`forestgen.splitters.base.Splitter`."""

from forestgen.splitters.base import BinnedData, Splitter, resolve_max_features
from forestgen.splitters.gini import GiniSplitter

__all__ = ["BinnedData", "Splitter", "GiniSplitter", "resolve_max_features"]
