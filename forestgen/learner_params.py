"""Learner parameters: the checks several learners share and the scikit-learn aliases.

Each learner declares its parameters once, as the keyword-only signature of its ``__init__``
(:class:`~forestgen.base.GenerativeForest` stores them as attributes);
:data:`COMMON_CHECKS` validates the conventional ones a learner declares and
:data:`PARAM_ALIASES` maps scikit-learn names to the learner's own.
"""

from __future__ import annotations

import inspect

from forestgen.validation import check_bool, check_int, check_n_jobs, check_random_state, check_real

#: checks of the parameters several learners share, applied by the base ``validate_params``
#: to those a learner declares
COMMON_CHECKS = {
    "n_trees": lambda name, v: check_int(name, v, 1),
    "density_floor": lambda name, v: check_real(name, v, 0.0, low_open=True, allow_none=True),
    "random_state": lambda name, v: check_random_state(v, name),
    "n_jobs": lambda name, v: check_n_jobs(v, name),
    "progress": check_bool,
}

#: scikit-learn parameter names accepted (in ``__init__`` and ``set_params``) and readable
#: as attributes, for learners whose own (paper) name is the value
PARAM_ALIASES = {"n_estimators": "n_trees", "min_samples_leaf": "min_node_size"}


def init_params(cls: type) -> set[str]:
    """The parameter names of ``cls.__init__``."""
    return set(inspect.signature(cls.__init__).parameters) - {"self"}


def resolve_aliases(cls: type, params: dict) -> dict:
    """Map scikit-learn names (``n_estimators``) to the learner's own (``n_trees``)."""
    own = init_params(cls)
    out = dict(params)
    for alias, name in PARAM_ALIASES.items():
        if alias in out and alias not in own and name in own:
            if name in out:
                raise ValueError(f"{cls.__name__}: pass {name!r} or its scikit-learn alias "
                                 f"{alias!r}, not both")
            out[name] = out.pop(alias)
    return out
