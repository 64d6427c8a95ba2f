"""ARF on two threads searches the table's rules beside its adversarial rounds
(``TableEncoder.fit_transform(..., background_rules=True)`` and ``wait_rules``): the same
rules, an error of the search raised by the fit, and no search thread left running when a
fit fails elsewhere."""

import threading
import time

import numpy as np
import pandas as pd
import pytest

import forestgen.data.encoder as encoder_module
import forestgen.families.mixture.arf as arf_module
from forestgen import ARF
from forestgen.data.encoder import TableEncoder


def _table(n=3000, seed=0):
    r = np.random.default_rng(seed)
    a = r.choice(["x", "y", "z"], n)
    c = r.normal(size=n).round(3)
    return pd.DataFrame({"a": a, "b": pd.Series(a).map({"x": "p", "y": "q", "z": "p"}),
                         "c": c, "d": (c + r.exponential(size=n)).round(3)})


def _search_threads():
    return [t for t in threading.enumerate() if t.name == "forestgen-rules" and t.is_alive()]


def test_same_rules_in_the_background():
    df = _table()
    now = TableEncoder()
    Z = now.fit_transform(df)
    later = TableEncoder()
    Z2 = later.fit_transform(df, background_rules=True)
    later.wait_rules()
    assert now.schema.rules and now.schema.rules["mappings"]  # a mapping b <- a
    assert now.schema.rules["constraints"]  # c <= d
    assert later.schema.rules == now.schema.rules
    np.testing.assert_array_equal(Z, Z2)
    one = ARF(n_trees=5, n_jobs=1, marginal_weight=0.0, random_state=0).fit(df)
    two = ARF(n_trees=5, n_jobs=2, marginal_weight=0.0, random_state=0).fit(df)
    assert two.encoder_.schema.rules == one.encoder_.schema.rules == now.schema.rules
    assert not _search_threads()


def test_an_error_of_the_search_is_raised_by_the_fit(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("mapping search failed")

    monkeypatch.setattr(encoder_module, "find_mappings", broken)
    enc = TableEncoder()
    enc.fit_transform(_table(), background_rules=True)  # (not raised yet)
    with pytest.raises(RuntimeError, match="mapping search failed"):
        enc.wait_rules()
    enc.wait_rules()  # joined once: nothing pending
    with pytest.raises(RuntimeError, match="mapping search failed"):
        ARF(n_trees=5, n_jobs=2, marginal_weight=0.0, random_state=0).fit(_table())
    assert not _search_threads()
    with pytest.raises(RuntimeError, match="mapping search failed"):  # one thread: inline
        ARF(n_trees=5, n_jobs=1, marginal_weight=0.0, random_state=0).fit(_table())


def test_a_fit_failing_elsewhere_still_joins_the_search(monkeypatch):
    done = []
    slow_search = encoder_module.find_mappings

    def slow(*args, **kwargs):
        time.sleep(0.3)
        out = slow_search(*args, **kwargs)
        done.append(True)
        return out

    def broken_grow(*args, **kwargs):
        raise ValueError("grower failed")

    monkeypatch.setattr(encoder_module, "find_mappings", slow)
    monkeypatch.setattr(arf_module, "grow_forest_routed", broken_grow)
    with pytest.raises(ValueError, match="grower failed"):
        ARF(n_trees=5, n_jobs=2, marginal_weight=0.0, random_state=0).fit(_table())
    assert done == [True] and not _search_threads()  # the search ended before fit returned
