"""The component slots every learner takes, and their constructor-time checks (CONTRIBUTING.md,
"Slots").

A learner's constructor (wrapped by :class:`~forestgen.base.GenerativeForest`) stores its
parameters and then calls :func:`check_slots`, as ``set_params`` and ``validate_params`` do:
a slot the learner's paper rules out raises ``ValueError`` with the learner's reason; a
component of the wrong kind (not the slot's base class, a splitter growing something else, a
leaf that does not handle the learner's edge cells, a component serving another family) raises
naming the learner, the slot and what it needs.
"""

from __future__ import annotations

from typing import Any

from forestgen import registry
from forestgen.ensemble.base import Ensembler
from forestgen.learner_params import init_params
from forestgen.leaves.base import LeafModel
from forestgen.sampling.base import Sampler
from forestgen.splitters.base import Splitter

#: the component slots every learner takes, as constructor parameters of these names
#: (CONTRIBUTING.md, "Slots"); ``None`` means the learner's (paper's) default
SLOTS = ("splitter", "numeric_leaf", "discrete_leaf", "ensembler", "sampler")
#: the base class a component in each slot subclasses
SLOT_BASES = {"splitter": Splitter, "numeric_leaf": LeafModel, "discrete_leaf": LeafModel,
              "ensembler": Ensembler, "sampler": Sampler}


def check_slots(model: Any) -> None:
    """Check the slot parameters of the learner ``model`` (called by its constructor,
    ``set_params`` and ``validate_params``); raise ``TypeError``/``ValueError`` naming the
    learner, the slot and the reason."""
    cls = type(model)
    who = cls.__name__
    declared = init_params(cls)
    for slot, reason in cls.ruled_out.items():
        if slot in SLOTS and slot in declared and getattr(model, slot) is not None:
            raise ValueError(f"{who}: the {slot!r} slot is ruled out: {reason}")
    for slot in SLOTS:
        spec = getattr(model, slot, None) if slot in declared else None
        if spec is None or slot in cls.ruled_out:
            continue
        if slot == "splitter":
            if "criterion" in cls.ruled_out and not isinstance(spec, (str, type, Splitter)):
                raise ValueError(f"{who}: a split criterion is ruled out: "
                                 f"{cls.ruled_out['criterion']}")
            check_splitter_spec(cls, spec)
            continue
        comp = registry.component_class(slot if slot in ("ensembler", "sampler") else
                                        "leaf", spec, SLOT_BASES[slot], who)
        if slot in ("numeric_leaf", "discrete_leaf"):
            _check_leaf_kind(who, slot, spec, comp)
        if slot == "numeric_leaf":
            lacking = sorted(cls.edge_cells - comp.handles_cells)
            if lacking:
                raise ValueError(f"{who} grows {', '.join(lacking)} cells, which "
                                 f"{comp.__name__} does not handle (its handles_cells: "
                                 f"{sorted(comp.handles_cells)})")
        need = model.model_family.contracts.get(slot)
        if need is not None and need not in comp.serves:
            raise ValueError(
                f"{who}: {slot} {comp.__name__} serves {sorted(comp.serves) or 'no'} "
                f"models; {who} needs {_article(slot)} {slot} serving {need!r} models (declare "
                f"`serves = frozenset({{{need!r}}})` on a component written for them)")


def check_splitter_spec(learner: type, spec: Any) -> None:
    """A splitter parameter must be a registry name, a :class:`Splitter` class or instance
    growing what the learner grows (labelled or not, from the data and limits it gives), or
    (for tree growers) a ``@numba.njit`` criterion."""
    who, grows = learner.__name__, learner.splitter_grows
    if isinstance(spec, (str, type, Splitter)):
        cls = registry.component_class("splitter", spec, Splitter, who)
        if cls.grows != grows:
            raise ValueError(f"{who}: splitter {cls.__name__} grows {cls.grows!r}; {who} "
                             f"needs one that grows {grows!r}")
        if grows != "tree":
            return
        if cls.labelled != learner.splitter_labelled:
            kind = "class-labelled" if learner.splitter_labelled else "unlabelled"
            raise ValueError(f"{who}: splitter {cls.__name__} is "
                             f"{'labelled' if cls.labelled else 'unlabelled'}; {who} grows "
                             f"{kind} trees")
        lacking = sorted(cls.needs - learner.tree_data)
        if lacking:
            raise ValueError(f"{who}: splitter {cls.__name__} needs {', '.join(lacking)}, "
                             f"which {who} does not give its splitter (it gives "
                             f"{', '.join(sorted(learner.tree_data)) or 'nothing declared'})")
    elif grows != "tree":
        raise ValueError(f"{who}: a split criterion (gain function) fits the impurity and "
                         f"density splitters that grow one tree at a time; {who} splits the "
                         f"joint cell table of all its trees and needs a Splitter that grows "
                         f"{grows!r} (e.g. a BayesRiskSplitter subclass)")


def _check_leaf_kind(who: str, slot: str, spec: Any, comp: type) -> None:
    """A numeric leaf model in ``discrete_leaf`` or a discrete one in ``numeric_leaf`` raises
    (its ``discrete``: the instance's, else a default-constructed one's; a class that cannot
    be built without arguments is checked when the learner builds it)."""
    leaf = spec
    if isinstance(spec, (str, type)):
        try:
            leaf = comp()
        except (TypeError, ValueError):
            return
    want = slot == "discrete_leaf"
    if bool(getattr(leaf, "discrete", False)) != want:
        kind = "discrete" if leaf.discrete else "numeric"
        raise ValueError(f"{who}: {slot} {comp.__name__} is a {kind} leaf model; the slot needs "
                         f"a {'discrete' if want else 'numeric'} one (LeafModel.discrete = "
                         f"{want})")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"
