"""Constant-energy leaves: one energy value per leaf of an additive energy model.

NRGBoost (Bravo, ICLR 2025, Eq. 10; spec ``nrgboost_def.md`` §2.5, §3.2): a leaf whose data mass
is ``P`` and model mass ``Q`` gets energy ``w = P/Q - 1`` (the Newton step ``G/H`` with
``G = P - Q``, ``H = Q``), so ``w`` lies in ``[-1, R - 1]`` under the max-ratio constraint and
``sum_j Q_j w_j = 0``. ``form="log"`` gives ``log(P/Q)``, the density factor of greedy
multiplicative boosting (App. C).
"""

from __future__ import annotations

import numpy as np

from forestgen.component import Component
from forestgen.registry import register


class EnergyLeaf(Component):
    """Base class of energy leaves (registry kind ``"energy_leaf"``): :meth:`values` gives
    the energy of each leaf of a new tree from its data mass ``P`` and model mass ``Q``.
    Unlike a :class:`~forestgen.leaves.base.LeafModel` it is no density: one value per leaf
    over all columns, added to an energy."""

    def values(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        raise NotImplementedError



@register("energy_leaf", "constant_energy")
class ConstantEnergyLeaf(EnergyLeaf):
    """Leaf energies from node masses: ``"newton"`` (``P/Q - 1``, default) or ``"log"``."""

    def __init__(self, *, form: str = "newton"):
        self.form = form

    def values(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """Energy of each leaf with data mass ``P`` and model mass ``Q > 0``."""
        P = np.asarray(P, np.float64)
        Q = np.asarray(Q, np.float64)
        if np.any(Q <= 0):
            raise ValueError("a leaf has zero model mass; its energy is undefined")
        if self.form == "newton":
            return P / Q - 1.0
        if self.form == "log":
            with np.errstate(divide="ignore"):
                return np.log(P / Q)
        raise ValueError(f"form must be 'newton' or 'log', got {self.form!r}")
