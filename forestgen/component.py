"""What every component (splitter, ensembler, sampler, energy leaf, normaliser) shares: its
parameters are the keyword arguments of its ``__init__``, stored under their own names, so a
learner copies it per fit (``type(c)(**c.get_params())``) and saves it by registry name and
parameters; and capabilities it declares as class attributes, some of which a subclass does
not inherit."""

from __future__ import annotations

from typing import ClassVar


class Component:
    """Base of the component kinds. ``not_inherited`` names boolean capability attributes that
    a subclass gets as ``False`` unless its own body sets them: a subclass that changes what
    the capability vouches for (the draws, the combination) must say so itself."""

    not_inherited: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in cls.not_inherited:
            if name not in cls.__dict__:
                setattr(cls, name, False)

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters: attributes neither starting with ``_`` (private
        state) nor ending with it (fitted state). ``deep`` is scikit-learn's (its ``clone`` of
        a learner holding a component instance clones the component with ``deep=False``); a
        component holds no nested estimators."""
        return {k: v for k, v in vars(self).items()
                if not (k.startswith("_") or k.endswith("_"))}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
