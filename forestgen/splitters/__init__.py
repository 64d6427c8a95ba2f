"""Splitters: how a node is split. See :class:`forestgen.splitters.base.Splitter`."""

from forestgen.splitters.base import BinnedData, Splitter, resolve_max_features
from forestgen.splitters.energy import EnergySplitter
from forestgen.splitters.gini import GiniSplitter

__all__ = ["EnergySplitter", "BinnedData", "Splitter", "GiniSplitter", "resolve_max_features"]
