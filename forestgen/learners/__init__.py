"""Learners: thin compositions of the components with each paper's defaults."""

from forestgen.learners.arf import ARF

__all__ = ["ARF"]
