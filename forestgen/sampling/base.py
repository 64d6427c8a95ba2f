"""Sampler contract: draws encoded rows from a fitted model."""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from forestgen.component import Component


class Sampler(Component):
    """Base class of the ``sampler`` slot: ``sample(model, n, rng) -> float64 [n, d]``
    encoded rows.

    ``serves`` names the model families whose learners can take it (checked at construction).
    What each family calls:

    * ``"leaf mixture"`` (ARF, GeF, RFDE, DEF and GF.Boost's compiled cells) —
      ``sample(model, n, rng, missing=False, within_support=False, log_weight=None)`` and
      ``draw_leaves(log_weight, n, rng) -> leaf ids [n]``, which every leaf draw of the model
      goes through: unconditional, conditional (``log_weight`` the leaf posterior of the
      evidence), class-conditional (:class:`~forestgen.sampling.ancestral.AncestralSampler`
      is the built-in; subclass it and override :meth:`draw_leaves` to change how leaves are
      drawn). Per-row evidence draws one leaf per row from the row's own posterior (one
      draw: any leaf-draw rule gives the same law);
    * ``"energy"`` (NRGBoost) — ``run(energy, X0, ...)``, Gibbs chains on the model's energy
      (:class:`~forestgen.families.energy.gibbs.GibbsSampler`), driven by the learner's
      sampling protocol.

    A sampler may also accept ``missing=`` (blank entries at the leaf's missing rates) and
    ``within_support=`` (keep draws inside each column's observed range); a sampler that does
    not accept ``within_support`` is called without it and its exact draws are used.
    ``device_twin`` (not inherited: a subclass draws otherwise unless it says so) declares that
    the torch device sampler (:mod:`forestgen.torch.sampling`) reproduces its draws, so
    ``to_torch().sample`` and ``as_dataset`` may draw on the device instead. ``in_support``
    (not inherited either) declares that ``sample``'s rows are in the model's support already
    (every numeric value through :func:`~forestgen.data.support.to_support`), so
    ``sample_encoded`` need not map them again.
    """

    serves: ClassVar[frozenset] = frozenset()
    device_twin: ClassVar[bool] = False
    in_support: ClassVar[bool] = False
    not_inherited = ("device_twin", "in_support")

    def sample(self, model, n: int, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


def leaf_draws(sampler: Sampler, log_weight: np.ndarray, n: int, rng: np.random.Generator
               ) -> np.ndarray:
    """``sampler.draw_leaves(log_weight, n, rng)``, checked: ``n`` integer ids of the
    ``len(log_weight)`` leaves (the kernels that read leaf tables do no bounds checks, so a
    subclass's id past them would read other memory); raises ``ValueError`` naming the
    sampler."""
    leaf = np.asarray(sampler.draw_leaves(log_weight, n, rng))
    k = len(log_weight)
    name = f"{type(sampler).__name__}.draw_leaves"
    if leaf.shape != (n,) or leaf.dtype.kind not in "iu":
        raise ValueError(f"{name} must return {n} integer leaf ids, got an array of shape "
                         f"{leaf.shape} and dtype {leaf.dtype}")
    outside = leaf[(leaf < 0) | (leaf >= k)]
    if len(outside):
        raise ValueError(f"{name} returned leaf id {int(outside[0])} outside 0..{k - 1}")
    return leaf.astype(np.int64, copy=False)

