"""Lazy package attributes (PEP 562): a package's public names import their module on first
use, so ``forestgen --help`` or ``import forestgen.cli`` does not pay for scikit-learn, Numba
or the metrics until a command needs them."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: names a package's ``__init__`` imports to set itself up, not part of its interface
_PLUMBING = frozenset({"lazy_attributes", "TYPE_CHECKING", "annotations"})


def lazy_attributes(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any],
                                                                     Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``exports`` maps a public name to the
    module defining it; any other submodule name imports that submodule."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
        else:
            try:
                value = importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        globals_ = importlib.import_module(package).__dict__
        globals_[name] = value
        return value

    def __dir__() -> list[str]:
        names = set(importlib.import_module(package).__dict__) | set(exports)
        return sorted(names - _PLUMBING)

    return __getattr__, __dir__
