"""Sampler contract: draws encoded rows from a fitted model."""

from __future__ import annotations

import numpy as np


class Sampler:
    """Base class: ``sample(model, n, rng) -> float64 [n, d]`` encoded rows."""

    def sample(self, model, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def get_params(self) -> dict:
        return dict(vars(self))
