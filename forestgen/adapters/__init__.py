"""forestgen inside the tools people already use (docs: "Adapters").

- :mod:`forestgen.adapters.sdv`: :class:`~forestgen.adapters.sdv.ForestSynthesizer`, the SDV
  single-table synthesizer interface (``fit``, ``sample(num_rows)``, ``get_metadata``,
  ``save`` / ``load``) for any forestgen learner, taking SDV ``Metadata``;
- :mod:`forestgen.adapters.synthyverse`: ``ForestgenGenerator``, a synthyverse 0.2.7 generator,
  and :func:`~forestgen.adapters.synthyverse.register`, which makes ``"forestgen"`` a generator
  name in synthyverse's benchmark harness.

Neither module imports its peer package until a feature needs it; without the package, that
feature raises an ``ImportError`` naming it. SDV ``Metadata`` objects (and their dict form) are
also accepted wherever ``kinds=`` is, without this package.
"""

from forestgen.lazy import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__, {})
