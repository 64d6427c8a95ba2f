"""Ancestral sampling from a leaf mixture with torch ops on any device (FORGE, Watson et al. 2023,
Alg. 3): a leaf of the whole forest by an inverse-CDF draw over the leaf weights, then every
column independently from its leaf model —

* discrete columns (any leaf model with ``probs``): inverse CDF over the leaf's level table;
* truncated-normal leaves: inverse CDF in log space, ``z = Phi^-1(Phi(a) + u (Phi(b) - Phi(a)))``
  computed on the lower tail (the interval is mirrored when ``a > 0``), as
  :func:`forestgen.leaves.normal_math.sample_std_truncnorm` does in numpy;
* uniform leaves: ``lo + u (hi - lo)``.

Uniforms come from a ``torch.Generator`` on the sampling device and are float64; outputs are
cast to the requested dtype. Other numeric leaf models have no device sampler
(:func:`device_sampler_supported` is False) and callers fall back to the numpy sampler.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.leaves.uniform import UniformLeaf

LOG_2PI = math.log(2.0 * math.pi)
ROW_BUDGET = 2_000_000  # rows x levels per chunk of a discrete draw


def device_sampler_supported(model) -> bool:
    """Whether every column of ``model``'s leaf mixture can be drawn on a device."""
    if not (hasattr(model, "leaf_models_") and hasattr(model, "leaf_log_weight_")):
        return False
    return all(lm.discrete or type(lm) in (TruncNormalLeaf, UniformLeaf)
               for lm in model.leaf_models_)


def _ndtri_log(logp: torch.Tensor) -> torch.Tensor:
    """``Phi^-1(exp(logp))`` for ``logp <= 0``; below ``exp(-700)`` (where ``exp`` underflows)
    by two fixed-point steps of ``z^2 = -2 logp - log(z^2) - log(2 pi)`` (Mills ratio)."""
    p = torch.exp(logp)
    z = torch.special.ndtri(p)
    t = -2.0 * logp.clamp(max=-700.0)
    for _ in range(2):
        t = -2.0 * logp.clamp(max=-700.0) - torch.log(t) - LOG_2PI
    return torch.where(logp < -700.0, -torch.sqrt(t.clamp(min=0.0)), z)


def std_truncnorm(a: torch.Tensor, b: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw from N(0, 1) truncated to ``(a, b]`` given uniforms ``u`` (float64)."""
    flip = a > 0
    lo = torch.where(flip, -b, a)
    hi = torch.where(flip, -a, b)
    llo = torch.special.log_ndtr(lo)
    lhi = torch.special.log_ndtr(hi)
    logp = torch.logaddexp(llo + torch.log1p(-u), lhi + torch.log(u))
    z = _ndtri_log(logp.clamp(max=0.0))
    z = torch.minimum(torch.maximum(z, lo), hi)
    return torch.where(flip, -z, z)


class DeviceSampler:
    """A leaf mixture's sampling tables on one device.

    Parameters
    ----------
    model : fitted leaf mixture with :func:`device_sampler_supported`.
    device : where tables live and draws happen.
    leaf_log_weight : leaf weights to draw from (default the model's; a conditional passes its
        leaf posterior, ``-inf`` for excluded leaves).
    columns : the model columns to draw, in output order (default all).
    """

    def __init__(self, model, device, leaf_log_weight: np.ndarray | None = None,
                 columns: list[int] | None = None):
        if not device_sampler_supported(model):
            raise NotImplementedError(f"{type(model).__name__}: no on-device sampler for its "
                                      "leaf models")
        self.model = model
        self.device = torch.device(device)
        lw = np.asarray(model.leaf_log_weight_ if leaf_log_weight is None else leaf_log_weight,
                        np.float64)
        self.columns = list(range(model.schema_.d)) if columns is None else list(columns)
        self.leaf_cdf = self._cdf(lw)
        self._params = [self._column_params(model.leaf_models_[j]) for j in self.columns]

    def T(self, a, dtype=torch.float64) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=self.device)

    def _cdf(self, log_w: np.ndarray) -> torch.Tensor:
        w = np.exp(log_w - np.max(log_w))
        c = np.cumsum(w)
        return self.T(c / c[-1])

    def _column_params(self, lm) -> tuple[str, dict]:
        leaves = np.arange(self.model.forest_.n_leaves)
        if lm.discrete:
            cdf = np.cumsum(np.asarray(lm.probs(leaves), np.float64), axis=1)
            return "discrete", {"cdf": self.T(cdf)}
        if isinstance(lm, TruncNormalLeaf):
            return "truncnorm", {k: self.T(getattr(lm, k + "_"))
                                 for k in ("mu", "sigma", "a", "b")}
        return "uniform", {"lo": self.T(lm.lo_), "hi": self.T(lm.hi_)}

    # ------------------------------------------------------------------ draws
    def leaves(self, n: int, generator: torch.Generator | None) -> torch.Tensor:
        u = self.uniform(n, generator)
        idx = torch.searchsorted(self.leaf_cdf, u, right=True)
        return idx.clamp(max=self.leaf_cdf.numel() - 1)

    def uniform(self, n: int, generator: torch.Generator | None) -> torch.Tensor:
        return torch.rand(n, generator=generator, device=self.device, dtype=torch.float64)

    def columns_at(self, leaf: torch.Tensor, generator: torch.Generator | None,
                   dtype: torch.dtype) -> torch.Tensor:
        """One draw of every column per leaf in ``leaf [m]``: ``[m, len(columns)]``."""
        out = torch.empty(leaf.numel(), len(self.columns), dtype=dtype, device=self.device)
        for c, (kind, p) in enumerate(self._params):
            u = self.uniform(leaf.numel(), generator)
            if kind == "discrete":
                cdf = p["cdf"]
                k = cdf.shape[1]
                step = max(1, ROW_BUDGET // k)
                for s in range(0, leaf.numel(), step):
                    rows = cdf[leaf[s : s + step]]
                    target = u[s : s + step, None] * rows[:, -1:]
                    # trailing zero-mass levels reach exactly the total: never drawn
                    out[s : s + step, c] = (rows < target).sum(1).clamp(max=k - 1).to(dtype)
            elif kind == "truncnorm":
                mu, sd = p["mu"][leaf], p["sigma"][leaf]
                z = std_truncnorm(p["a"][leaf], p["b"][leaf], u)
                out[:, c] = (mu + sd * z).to(dtype)
            else:
                lo, hi = p["lo"][leaf], p["hi"][leaf]
                out[:, c] = (lo + (hi - lo) * u).to(dtype)
        return out

    def sample(self, n: int, generator: torch.Generator | None,
               dtype: torch.dtype) -> torch.Tensor:
        """``n`` rows ``[n, len(columns)]``: leaves first, then each column."""
        return self.columns_at(self.leaves(n, generator), generator, dtype)


def generator_for(seed_seq: np.random.SeedSequence, device) -> torch.Generator:
    """A torch generator on ``device`` seeded from a numpy ``SeedSequence`` (so device streams
    follow the same spawn-key scheme as the numpy ones)."""
    g = torch.Generator(device=torch.device(device))
    g.manual_seed(int(seed_seq.generate_state(1, np.uint64)[0] >> np.uint64(1)))
    return g
