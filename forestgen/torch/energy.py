"""An additive-energy model (NRGBoost) as a :class:`torch.distributions.Distribution`.

Same encoded space, ``sample``, ``encode``/``decode`` as
:class:`~forestgen.torch.distribution.ForestDistribution`. ``log_prob`` is the model's
normalised estimate (``f(x) - log Ẑ``, see :meth:`forestgen.learners.nrgboost.NRGBoost.log_prob`);
the energy is piecewise constant on the grid, so its gradient with respect to the input is
exactly zero — returned as zeros attached to the graph, not as an error.
"""

from __future__ import annotations

import torch

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

    def log_prob(self, value) -> torch.Tensor:
        value = torch.as_tensor(value)
        d = self.event_shape[0]
        if value.dim() == 0 or value.shape[-1] != d:
            raise ValueError(f"log_prob expects rows of {d} encoded columns "
                             f"({self.columns}); got a tensor of shape {tuple(value.shape)}")
        if not value.is_floating_point():
            value = value.to(torch.get_default_dtype())
        x = value.reshape(-1, d)
        Z = x.detach().to("cpu", torch.float64).numpy()
        res = torch.as_tensor(self.model.log_prob_encoded(Z), device=x.device, dtype=x.dtype)
        # piecewise constant: attach an exactly-zero gradient (NaN entries are marginalised)
        res = res + (torch.nan_to_num(x) * 0.0).sum(-1)
        return res.reshape(value.shape[:-1])
