"""Leaf models: the distribution of each column inside a leaf. See :mod:`.base`."""

from forestgen.leaves.base import ColumnCell, LeafModel, leaf_stats
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.grid_spike import GridSpikeLeaf
from forestgen.leaves.indexed import IndexedLeaf
from forestgen.leaves.kernel import KernelLeaf
from forestgen.leaves.marginal_mix import MarginalMixLeaf
from forestgen.leaves.ordinal_kernel import OrdinalKernelLeaf
from forestgen.leaves.point_mass import PointMassLeaf
from forestgen.leaves.rounded_normal import RoundedNormalTailLeaf
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.leaves.uniform import UniformLeaf

__all__ = ["ColumnCell", "LeafModel", "leaf_stats", "CategoricalLeaf",
           "GridSpikeLeaf",
           "IndexedLeaf",
           "KernelLeaf",
           "MarginalMixLeaf",
           "OrdinalKernelLeaf",
           "PointMassLeaf",
           "RoundedNormalTailLeaf",
           "TruncNormalLeaf",
           "UniformLeaf"]
