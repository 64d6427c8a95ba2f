"""An additive-energy model (NRGBoost) as a :class:`torch.distributions.Distribution`.

Same encoded space, ``sample``, ``encode``/``decode`` as
:class:`~forestgen.torch.distribution.ForestDistribution`. ``log_prob`` is the model's
normalised estimate (``f(x) - log Ẑ``, see
:meth:`forestgen.families.energy.nrgboost.NRGBoost.log_prob`); the energy is piecewise constant on
the grid, so its gradient with respect to the input is exactly zero — returned as zeros attached to
the graph, not as an error. A NaN entry is read as NRGBoost's numpy ``log_prob`` reads it: in a
column that had missing values at fit it is that column's missing state (a value of the law,
scored, not marginalised); elsewhere it is marginalised.
"""

from __future__ import annotations

import torch

from forestgen.leaves.base import numpy_dtype
from forestgen.torch.distribution import ForestDistribution


class EnergyDistribution(ForestDistribution):
    """A fitted NRGBoost as a torch distribution over encoded rows ``[..., d]``."""

    @property
    def torch_path(self) -> bool:
        return False

    @property
    def mean(self) -> torch.Tensor:
        raise NotImplementedError("NRGBoost: the mean of an energy model has no closed form; "
                                  "average sample() instead")

    def _log_prob_numpy(self, x: torch.Tensor) -> torch.Tensor:
        Z = x.detach().to("cpu", torch.float64).numpy()
        key = ("grid", x.dtype)
        if key not in self._cache:  # float32 rows are binned on edges rounded as they are
            self._cache[key] = self.model.grid_.rounded_to(numpy_dtype(x.dtype))
        lp = self.model.score_codes(*self._cache[key].codes(Z), Z=Z)
        res = torch.as_tensor(lp, device=x.device, dtype=x.dtype)
        # piecewise constant: attach an exactly-zero gradient (NaN read as the numpy path)
        return res + (torch.nan_to_num(x) * 0.0).sum(-1)
