"""Sampler contract: draws encoded rows from a fitted model."""

from __future__ import annotations

from typing import ClassVar

import numpy as np


class Sampler:
    """Base class: ``sample(model, n, rng) -> float64 [n, d]`` encoded rows.

    A sampler may also accept ``missing=`` (blank entries at the leaf's missing rates) and
    ``within_support=`` (keep draws inside each column's observed range); a sampler that does
    not accept ``within_support`` is called without it and its exact draws are used. A
    leaf-mixture sampler also accepts ``log_weight=`` (leaf weights to draw from instead of the
    model's: class-conditional draws pass a leaf posterior)."""

    #: the torch device sampler (:mod:`forestgen.torch.sampling`) reproduces this sampler's
    #: draws, so ``as_dataset`` / ``to_torch().sample`` may draw on the device instead
    device_twin: ClassVar[bool] = False

    def sample(self, model, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def get_params(self) -> dict:
        return dict(vars(self))
