"""A synthyverse (0.2.7) generator for forestgen learners, and its registration in
synthyverse's generator names, so that its benchmark harness runs forestgen.

``ForestgenGenerator`` is a ``synthyverse.generators.BaseGenerator``: ``fit(X,
discrete_features)`` fits a forestgen learner (``learner="arf"`` by default; any registry name,
its parameters as ``learner_params``) with the discrete features declared categorical, and
``generate(n, random_state)`` samples it. :func:`register` adds it under the generator name
``"forestgen"``, after which ``SynthyverseGenerator("forestgen")`` and
``TabularSynthesisBenchmark(X, generator="forestgen", ...)`` use it::

    from forestgen.adapters.synthyverse import register
    register()
    from synthyverse.benchmark.synthesis import TabularSynthesisBenchmark
    bench = TabularSynthesisBenchmark(X, "forestgen", {"learner_params": {"n_trees": 30}},
                                      ["sex", "income"], "income")
    results = bench.run(metrics=["marginals"])

The class is built on first use (``forestgen.adapters.synthyverse.ForestgenGenerator``), so this
module imports without synthyverse; using it without synthyverse raises an ``ImportError``
naming the package. synthyverse saves generators with pickle (its own layout), which forestgen
models support.
"""

from __future__ import annotations

from typing import Any

from forestgen.adapters._peer import require

__all__ = ["GENERATOR_NAME", "register"]  # and ForestgenGenerator, built on first use

#: the generator name :func:`register` adds to synthyverse
GENERATOR_NAME = "forestgen"
_CLASS: dict[str, type] = {}


def _generator_class() -> type:
    if "cls" in _CLASS:
        return _CLASS["cls"]
    base = require("synthyverse.generators.base", "synthyverse",
                   "forestgen.adapters.synthyverse.ForestgenGenerator").BaseGenerator

    class ForestgenGenerator(base):
        """A forestgen learner as a synthyverse generator (see the module docstring).

        Args:
            learner: registry name of the forestgen learner (default: the recommended
                default, ``forestgen.config.DEFAULT_LEARNER``).
            learner_params: the learner's parameters (e.g. ``{"n_trees": 30}``).
            random_state: training seed (synthyverse's convention); sampling seeds come
                from ``generate(n, random_state)``.

        The signature names every argument (no ``**kwargs``): synthyverse's harness passes
        ``cap_train_time`` to generators whose signature would take it.
        """

        name = GENERATOR_NAME

        def __init__(self, learner: str | None = None, learner_params: dict | None = None,
                     random_state: int = 0, full_determinism: bool = False):
            super().__init__(random_state=random_state, full_determinism=full_determinism)
            self.learner = learner
            self.params = dict(learner_params or {})

        def _fit(self, X, discrete_features: list):
            from forestgen import registry
            from forestgen.config import DEFAULT_LEARNER

            cls = registry.get("learner", self.learner or DEFAULT_LEARNER)
            self.model = cls(**{"random_state": self.random_state, **self.params})
            kinds = {c: "categorical" for c in discrete_features}
            self.model.fit(X, kinds=kinds)
            return self

        def _generate(self, n: int):
            return self.model.sample(int(n), random_state=self.random_state)

    ForestgenGenerator.__module__ = __name__
    ForestgenGenerator.__qualname__ = "ForestgenGenerator"
    _CLASS["cls"] = ForestgenGenerator
    return ForestgenGenerator


def register() -> type:
    """Add ``ForestgenGenerator`` to synthyverse's generators under :data:`GENERATOR_NAME`
    (``get_generator("forestgen")``, ``SynthyverseGenerator("forestgen")`` and the
    benchmark harness then find it); returns the class. Idempotent."""
    cls = _generator_class()
    gens = require("synthyverse.generators", "synthyverse", "forestgen.adapters.synthyverse")
    entry = (__name__, GENERATOR_NAME)
    for table in ("_BASE_GENERATORS", "_GENERATORS"):
        getattr(gens, table)["ForestgenGenerator"] = entry
    gens._GENERATOR_BY_NAME[GENERATOR_NAME] = "ForestgenGenerator"
    return cls


def __getattr__(name: str) -> Any:
    if name == "ForestgenGenerator":
        return _generator_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
