"""Deferred imports of peer packages, failing with the package to install."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str, package: str, feature: str) -> ModuleType:
    """``import module``, or an ``ImportError`` naming ``package`` and the ``feature`` that
    needs it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{feature} needs the {package!r} package, which is not installed "
                          f"({e}); pip install {package}") from None
