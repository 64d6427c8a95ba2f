"""Samplers: how rows are drawn from a fitted model."""

from forestgen.sampling.ancestral import AncestralSampler, draw_leaves
from forestgen.sampling.base import Sampler
from forestgen.sampling.gibbs import GibbsSampler, SamplePool

__all__ = ["GibbsSampler", "SamplePool", "Sampler", "AncestralSampler", "draw_leaves"]
