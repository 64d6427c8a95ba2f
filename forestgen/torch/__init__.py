"""PyTorch layer of forestgen (DESIGN.md §7): forests as ``torch.distributions``, synthetic data
as datasets, model-ready tensor encoding and a Lightning ``DataModule``.

Importing :mod:`forestgen` does not import this package; it is loaded on first use
(``model.to_torch()``, ``model.as_dataset()`` or an explicit import), and each submodule only
when one of its names is asked for (``ForestDataModule`` pulls in Lightning).
"""

from __future__ import annotations

import importlib

_WHERE = {
    "ForestDistribution": "distribution",
    "EnergyDistribution": "forestgen.families.energy.distribution",
    "EncodedRows": "distribution",
    "SyntheticDataset": "datasets",
    "AugmentedDataset": "datasets",
    "EpochDataLoader": "datasets",
    "TensorEncoder": "encoding",
    "ForestDataModule": "datamodule",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        where = _WHERE[name]
        module = where if "." in where else f"forestgen.torch.{where}"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'forestgen.torch' has no attribute {name!r}")
