"""YAML presets: a learner named by registry name plus its parameters.

```yaml
learner: arf            # registry name (forestgen.registry.available("learner")), or auto
preset: best samples    # optional: one of the learner's PRESETS (ARF.preset), before params
params:                 # keyword arguments of the learner
  n_trees: 10
fit:                    # keyword arguments of fit(), e.g. column kind overrides
  kinds: {}
```
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from forestgen import registry

ALLOWED_KEYS = {"learner", "preset", "params", "fit", "description"}

#: the learner ``forestgen fit`` uses without ``--config`` / ``--learner`` (registry name, with
#: its defaults): the recommended default. Changing it is a one-line change here.
DEFAULT_LEARNER = "arf"
#: the name that builds :class:`forestgen.AutoForest` (not a registry learner: it chooses one)
AUTO = "auto"


def load_config(path: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    with open(path) as fh:
        try:
            cfg = yaml.safe_load(fh) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: malformed YAML ({' '.join(str(e).split())})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: a config must be a mapping, got {type(cfg).__name__}")
    unknown = set(cfg) - ALLOWED_KEYS
    if unknown:
        raise ValueError(
            f"{path}: unknown config keys {sorted(unknown)}; allowed {sorted(ALLOWED_KEYS)}"
        )
    if "learner" not in cfg:
        raise ValueError(f"{path}: missing 'learner' (one of "
                         f"{[AUTO, *registry.available('learner')]})")
    cfg.setdefault("params", {})
    cfg.setdefault("fit", {})
    return cfg


def build_learner(cfg: dict[str, Any]):
    """Instantiate the learner a config names, with its preset (if any), then its parameters;
    ``learner: auto`` builds :class:`forestgen.AutoForest` (no preset) with the parameters."""
    if cfg["learner"] == AUTO:
        from forestgen.auto import AutoForest

        if cfg.get("preset") is not None:
            raise ValueError("learner 'auto' (AutoForest) has no presets; remove 'preset'")
        try:
            return AutoForest(**(cfg.get("params") or {}))
        except TypeError as e:
            raise ValueError(f"bad parameters for learner 'auto': {e}") from None
    cls = registry.get("learner", cfg["learner"])
    params = cfg.get("params") or {}
    if cfg.get("preset") is not None:
        if not getattr(cls, "PRESETS", None):
            raise ValueError(f"learner {cfg['learner']!r} has no presets; remove 'preset'")
        return cls.preset(cfg["preset"], **params)  # an unknown name raises naming the choices
    try:
        return cls(**params)
    except TypeError as e:
        raise ValueError(f"bad parameters for learner {cfg['learner']!r}: {e}") from None
