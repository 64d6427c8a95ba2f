"""Registering in tests is scoped: :func:`forestgen.registry.registered` removes what it added,
so a learner registered by one test is gone for the next (test order does not matter)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF, registry


class _ScopedARF(ARF):
    pass


def test_registered_learner_saves_and_loads_inside_the_block(tmp_path):
    X = pd.DataFrame({"a": np.random.default_rng(0).normal(size=60)})
    with registry.registered(("learner", "test_scoped_arf", _ScopedARF)):
        m = _ScopedARF(n_trees=2, random_state=0).fit(X)
        m.save(tmp_path / "m.fgm")
        back = ARF.load(tmp_path / "m.fgm")
        assert type(back) is _ScopedARF and _ScopedARF.registry_name == "test_scoped_arf"
        assert np.array_equal(back.log_prob(X), m.log_prob(X))
    assert "test_scoped_arf" not in registry.available("learner")
    assert "registry_name" not in _ScopedARF.__dict__
    with pytest.raises(ValueError, match="not registered"):
        m.save(tmp_path / "again.fgm")


def test_an_error_inside_the_block_still_unregisters():
    entry = ("learner", "test_scoped_arf", _ScopedARF)
    with pytest.raises(RuntimeError), registry.registered(entry):
        raise RuntimeError("boom")
    assert "test_scoped_arf" not in registry.available("learner")


def test_no_test_learner_is_left_from_other_modules():
    """Runs after whatever modules pytest collected before this one: none of their test
    learners (e.g. tests/torch/test_datamodule.py's counting ARF) is still registered."""
    from forestgen.base import GenerativeForest

    for name in registry.available("learner"):
        cls = registry.get("learner", name)
        assert issubclass(cls, GenerativeForest) and cls.__module__.startswith("forestgen"), name
