"""Samplers shared by several families: how rows are drawn from a fitted model. A family's own
sampler lives in its package (:mod:`forestgen.families`)."""

from forestgen.sampling.ancestral import AncestralSampler, draw_leaves
from forestgen.sampling.base import Sampler

__all__ = ["AncestralSampler", "Sampler", "draw_leaves"]
