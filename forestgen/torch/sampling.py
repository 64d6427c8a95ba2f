"""Ancestral sampling from a leaf mixture with torch ops on any device (FORGE, Watson et al. 2023,
Alg. 3): a leaf of the whole forest by an inverse-CDF draw over the leaf weights, then every
column independently from its leaf model's torch sampling hook
(:meth:`~forestgen.leaves.base.LeafModel.torch_sample`: level lookup for discrete leaves, inverse
CDF for the built-in numeric ones — truncated normals in log space as
:func:`forestgen.leaves.normal_math.sample_std_truncnorm` does in numpy, uniforms linearly),
each numeric draw mapped to its value by the support policy's one rounding map
(:func:`forestgen.data.support.torch_to_support`, bit for bit the numpy map), so device draws
follow the same law as :meth:`~forestgen.base.GenerativeForest.sample`.

Uniforms come from a ``torch.Generator`` on the sampling device and are float64; outputs are
cast to the requested dtype. A model with a leaf lacking the hook has no device sampler
(:func:`device_sampler_supported` is False) and callers fall back to the numpy sampler.
"""

from __future__ import annotations

import numpy as np
import torch

from forestgen.data.metadata import declared_bounds
from forestgen.data.support import torch_to_support
from forestgen.leaves.normal_math import torch_std_truncnorm as std_truncnorm

__all__ = ["DeviceSampler", "device_sampler_gap", "device_sampler_supported", "generator_for",
           "std_truncnorm"]


def checked_device(device) -> torch.device:
    """``torch.device(device)``, refused at once with a ``ValueError`` when it is a CUDA or MPS
    device this machine or torch build lacks (instead of an error from inside torch at the
    first draw)."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(dev)!r} is not available: torch.cuda.is_available() is "
                         f"False (a CPU build of torch, or no GPU); use device='cpu'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {str(dev)!r} is not available on this machine; use "
                         f"device='cpu'")
    return dev


def device_sampler_supported(model) -> bool:
    """Whether ``model``'s exact draws are ancestral draws from its leaf mixture: the model
    declares its leaves its law (``leaf_mixture_law``; not EOGT, NRGBoost or the Chain), its
    sampler declares that the device sampler reproduces it (``Sampler.device_twin``: the
    built-in ancestral sampler) and every leaf model has the torch sampling hook."""
    return device_sampler_gap(model) is None


def device_sampler_gap(model) -> str | None:
    """Why ``model`` has no on-device sampler (``None`` when it has one)."""
    if not (type(model).leaf_mixture_law and hasattr(model, "leaf_models_")
            and hasattr(model, "leaf_log_weight_")):
        return "its law is not a leaf mixture"
    if "sampler" not in model.model_family.slots or not model.component("sampler").device_twin:
        return "its draws do not come from the leaf mixture's ancestral sampler"
    bad = sorted({_hookless(lm) for lm in model.leaf_models_ if not lm.has_torch_sampler})
    return f"leaf models {bad} lack the torch_sample hook" if bad else None


def _hookless(lm) -> str:
    """The name of a leaf model without the torch_sample hook; a stacked leaf (a back-off
    tree's column) names its parts that lack it."""
    parts = getattr(lm, "parts", None)
    if parts:
        inner = ", ".join(_hookless(p) for p in parts if not p.has_torch_sampler)
        return f"{type(lm).__name__}({inner})"
    return type(lm).__name__


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
        why = device_sampler_gap(model)
        if why is not None:
            raise NotImplementedError(f"{type(model).__name__}: no on-device sampler ({why})")
        self.model = model
        self.device = checked_device(device)
        lw = np.asarray(model.leaf_log_weight_ if leaf_log_weight is None else leaf_log_weight,
                        np.float64)
        self.columns = list(range(model.schema_.d)) if columns is None else list(columns)
        self.leaf_cdf = self.cdf(lw)
        L = model.forest_.n_leaves
        self._hooks = [(type(lm).torch_sample, lm.torch_sample_params(L, self.device))
                       for lm in (model.leaf_models_[j] for j in self.columns)]
        specs = model.schema_.columns
        # the support policy's value map (forestgen.data.support), as every numpy draw
        self._support = [c for c, j in enumerate(self.columns) if not specs[j].is_discrete]
        lo, hi = declared_bounds(model.schema_)
        # numeric columns with a declared range are clipped into it, as in sample_encoded
        self._bounds = {c: (float(lo[j]), float(hi[j])) for c, j in enumerate(self.columns)
                        if np.isfinite(lo[j]) or np.isfinite(hi[j])}

    def T(self, a, dtype=torch.float64) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=dtype, device=self.device)

    def cdf(self, log_w: np.ndarray) -> torch.Tensor:
        """Normalised cumulative weights over the last axis of ``log_w`` (on the device)."""
        log_w = np.asarray(log_w, np.float64)
        w = np.exp(log_w - np.max(log_w, axis=-1, keepdims=True))
        c = np.cumsum(w, axis=-1)
        return self.T(c / c[..., -1:])

    # ------------------------------------------------------------------ draws
    def leaves(self, n: int, generator: torch.Generator | None,
               cdf: torch.Tensor | None = None) -> torch.Tensor:
        """``n`` leaf ids by inverse CDF over ``cdf`` (default the sampler's leaf weights)."""
        cdf = self.leaf_cdf if cdf is None else cdf
        idx = torch.searchsorted(cdf, self.uniform(n, generator), right=True)
        return idx.clamp(max=cdf.numel() - 1)

    def uniform(self, n: int, generator: torch.Generator | None) -> torch.Tensor:
        return torch.rand(n, generator=generator, device=self.device, dtype=torch.float64)

    def columns_at(self, leaf: torch.Tensor, generator: torch.Generator | None,
                   dtype: torch.dtype) -> torch.Tensor:
        """One draw of every column per leaf in ``leaf [m]``: ``[m, len(columns)]``."""
        out = torch.empty(leaf.numel(), len(self.columns), dtype=dtype, device=self.device)
        specs = self.model.schema_.columns
        for c, (draw, params) in enumerate(self._hooks):
            x = draw(params, leaf, self.uniform(leaf.numel(), generator))
            if c in self._support:
                x = torch_to_support(x, specs[self.columns[c]])
            out[:, c] = x.to(dtype)
        for c, (lo, hi) in self._bounds.items():
            out[:, c] = out[:, c].clamp(lo, hi)
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
