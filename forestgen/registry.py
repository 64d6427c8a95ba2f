"""Name -> class registry for components and learners, so configs can name them by string."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_REGISTRY: dict[str, dict[str, type]] = {}

KINDS = ("splitter", "criterion", "leaf", "energy_leaf", "ensembler", "sampler", "normaliser",
         "learner")
#: the base class (by name: the registry imports no component) a registered class of each
#: kind subclasses; a criterion is a compiled function
_BASES = {"splitter": "Splitter", "leaf": "LeafModel", "energy_leaf": "EnergyLeaf",
          "ensembler": "Ensembler", "sampler": "Sampler", "normaliser": "Normaliser",
          "learner": "BaseEstimator"}


def register(kind: str, name: str):
    """Decorator: ``@register("leaf", "truncnorm")`` on a class, or
    ``@register("criterion", "hellinger")`` on an ``@numba.njit`` gain function."""
    if kind not in KINDS:
        raise ValueError(f"unknown component kind {kind!r}; expected one of {KINDS}")

    def deco(cls: type) -> type:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not cls:
            raise ValueError(f"{kind} {name!r} is already registered to {table[name].__name__}")
        base = _BASES.get(kind)
        if base is not None and not (isinstance(cls, type) and base in
                                     {c.__name__ for c in cls.__mro__}):
            raise TypeError(f"register({kind!r}, {name!r}): {getattr(cls, '__name__', cls)!r} "
                            f"is no {base} subclass")
        table[name] = cls
        if isinstance(cls, type) and "registry_name" not in cls.__dict__:
            cls.registry_name = name  # (an alias keeps the first name, which name_of gives)
        return cls

    return deco


def unregister(kind: str, name: str) -> None:
    """Remove ``name`` from the ``kind`` table (a ``KeyError`` if it is not there); the
    ``registry_name`` that :func:`register` set on a class goes with it."""
    cls = _REGISTRY.get(kind, {}).pop(name)
    if isinstance(cls, type) and cls.__dict__.get("registry_name") == name:
        del cls.registry_name


@contextmanager
def registered(*entries: tuple[str, str, Any]) -> Iterator[None]:
    """``with registered((kind, name, cls), ...):`` registers the entries for the block only
    (test doubles: a test leaves the registry as it found it, so test order does not
    matter)."""
    done = []
    try:
        for kind, name, cls in entries:
            register(kind, name)(cls)
            done.append((kind, name))
        yield
    finally:
        for kind, name in reversed(done):
            unregister(kind, name)


def get(kind: str, name: str) -> type:
    _ensure_builtins()
    table = _REGISTRY.get(kind, {})
    if name not in table:
        other = [k for k in KINDS if k != kind and name in _REGISTRY.get(k, {})]
        hint = f" ({name!r} is a registered {other[0]}, which goes elsewhere)" if other else ""
        raise KeyError(f"no {kind} named {name!r}{hint}; available: {sorted(table)}")
    return table[name]


def name_of(kind: str, component: Any) -> str:
    """Registry name of a component (class, instance or criterion function).

    Raises ``ValueError`` if it is not registered — what save() checks before writing, since an
    unregistered component could not be rebuilt at load time."""
    _ensure_builtins()
    obj = component if isinstance(component, type) or kind == "criterion" else type(component)
    for name, entry in _REGISTRY.get(kind, {}).items():
        if entry is obj:
            return name
    what = getattr(obj, "__name__", repr(obj))
    raise ValueError(f"{kind} {what} is not registered, so a saved model could not rebuild it; "
                     f"decorate it with @forestgen.registry.register({kind!r}, 'some_name')")


def available(kind: str | None = None) -> dict[str, list[str]] | list[str]:
    _ensure_builtins()
    if kind is not None:
        return sorted(_REGISTRY.get(kind, {}))
    return {k: sorted(v) for k, v in _REGISTRY.items()}


def resolve(kind: str, spec: Any, base: type | None = None, **kwargs: Any) -> Any:
    """A component from a registry name, a class, or an instance (returned as is)."""
    if isinstance(spec, str):
        return get(kind, spec)(**kwargs)
    if isinstance(spec, type):
        return spec(**kwargs)
    if base is not None and not isinstance(spec, base):
        raise TypeError(
            f"{kind} must be a name, a {base.__name__} subclass or instance; got {spec!r}"
        )
    if kwargs:
        raise TypeError(f"{kind}_kwargs given together with a {kind} instance")
    return spec


def component_class(kind: str, spec: Any, base: type | None = None, who: str = "") -> type:
    """The class of a component given as a registry name, a class or an instance; a
    ``TypeError`` naming ``who`` (the learner) and ``kind`` unless it subclasses ``base``."""
    cls = get(kind, spec) if isinstance(spec, str) else spec if isinstance(spec, type) \
        else type(spec)
    if base is not None and not (isinstance(cls, type) and issubclass(cls, base)):
        pre = f"{who}: " if who else ""
        raise TypeError(f"{pre}{kind} must be a registry name, a {base.__name__} subclass or "
                        f"instance; got {spec!r}")
    return cls


def build(kind: str, spec: Any, base: type | None = None, **defaults: Any) -> Any:
    """A fresh component for one model: from a registry name or a class, constructed with those
    of ``defaults`` its constructor accepts; from an instance, a copy with the same parameters
    (``type(c)(**c.get_params())``: a component's parameters are its constructor's keyword
    arguments), so one instance given to a learner is never shared between fitted models."""
    cls = component_class(kind, spec, base)
    if not isinstance(spec, (str, type)):
        return cls(**spec.get_params())
    accepted = inspect.signature(cls.__init__).parameters
    if any(p.kind == p.VAR_KEYWORD for p in accepted.values()):
        return cls(**defaults)
    return cls(**{k: v for k, v in defaults.items() if k in accepted})


#: modules whose ``@register`` decorators define the built-in components, imported by name on
#: the first lookup (as entry points are): the registry sits below every component and imports
#: none of them itself
BUILTIN_MODULES = ("forestgen.leaves", "forestgen.splitters", "forestgen.ensemble",
                   "forestgen.sampling", "forestgen.learners",
                   "forestgen.families.energy.ensembler", "forestgen.families.energy.gibbs",
                   "forestgen.families.energy.leaf", "forestgen.families.energy.normaliser",
                   "forestgen.families.energy.splitter",
                   "forestgen.families.intersection.ensembler",
                   "forestgen.families.intersection.splitter")


def _ensure_builtins() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
