"""Samplers: how rows are drawn from a fitted model."""

from forestgen.sampling.ancestral import AncestralSampler, draw_leaves
from forestgen.sampling.base import Sampler

__all__ = ["Sampler", "AncestralSampler", "draw_leaves"]
