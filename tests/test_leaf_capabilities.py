"""Leaf capabilities are declared (``LeafModel.packed_form`` / ``packed_factors``), read by
the fused walks, and checked by ``check_leaf_model``: a custom leaf written outside the
package, declaring the uniform form, goes through the walks and answers as its methods do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF
from forestgen.inference import marginal_walk
from forestgen.inference.interval_factors import kernel_columns
from forestgen.inference.leaf_factors import leaf_kind
from forestgen.leaves import CategoricalLeaf, TruncNormalLeaf
from forestgen.leaves.base import LeafModel
from forestgen.testing import check_leaf_model


class BoxLeaf(LeafModel):
    """Uniform on the cell; an unbounded side stops 5% of the data range past the data, and a
    cell narrower than 1e-9 of the range is widened to that (written from the LeafModel
    docstring alone)."""

    discrete = False
    packed_form = "uniform"
    packed_factors = frozenset({"point", "interval"})
    fitted_arrays = ("lo_", "hi_")

    def get_params(self) -> dict:
        return {}

    def fit(self, x, leaf, cell, weight=None):
        span = max(cell.data_max - cell.data_min, 1e-9 * abs(cell.data_max), 1e-300)
        lo = np.where(np.isfinite(cell.lower), cell.lower, cell.data_min - 0.05 * span)
        hi = np.where(np.isfinite(cell.upper), cell.upper, cell.data_max + 0.05 * span)
        self.lo_ = lo
        self.hi_ = np.maximum(hi, lo + 1e-9 * span)
        return self

    def box(self, leaf):
        """The (lo, hi] the density is uniform on."""
        return self.lo_[leaf], self.hi_[leaf]

    def log_prob(self, leaf, x):
        lo, hi = self.box(leaf)
        out = np.where((x > lo) & (x <= hi), -np.log(hi - lo), -np.inf)
        return np.where(np.isnan(x), 0.0, out)

    def log_prob_interval(self, leaf, lo, hi):
        c, d = self.box(leaf)
        a, b = np.maximum(lo, c), np.minimum(hi, d)
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(b - a, 0.0)) - np.log(d - c)

    def mean_interval(self, leaf, lo, hi):
        c, d = self.box(leaf)
        a, b = np.maximum(lo, c), np.minimum(hi, d)
        return 0.5 * (a + np.maximum(a, b))

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        a, b = self.box(leaf)
        a = a if lo is None else np.maximum(a, lo)
        b = b if hi is None else np.minimum(b, hi)
        return a + (np.maximum(a, b) - a) * rng.random(len(leaf))

    def mean(self, leaf):
        lo, hi = self.box(leaf)
        return 0.5 * (lo + hi)


class TallBoxLeaf(BoxLeaf):
    """Overrides log_prob without declaring: the walks must not read its arrays."""

    def log_prob(self, leaf, x):
        return super().log_prob(leaf, x)


class LyingBoxLeaf(BoxLeaf):
    """A proper leaf (uniform on the lower half of its box) that inherits the declaration of
    the uniform form on the whole box: its declaration no longer says what it computes."""

    def box(self, leaf):
        lo, hi = super().box(leaf)
        return lo, 0.5 * (lo + hi)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    x = rng.normal(size=400)
    return pd.DataFrame({"x": x, "y": 0.5 * x + rng.normal(size=400),
                         "c": np.where(x + rng.normal(size=400) > 0, "a", "b")})


def test_custom_leaf_passes_the_leaf_check_through_its_declaration():
    check_leaf_model(BoxLeaf())
    assert leaf_kind(BoxLeaf()) == leaf_kind(registry_uniform())


def registry_uniform():
    from forestgen import registry

    return registry.get("leaf", "uniform")()


def test_declarations_follow_overrides():
    assert (TallBoxLeaf.packed_form, TallBoxLeaf.packed_factors) == (None, frozenset())
    assert leaf_kind(TallBoxLeaf()) == 0

    class Interval(TruncNormalLeaf):
        def log_prob_interval(self, leaf, lo, hi):
            return super().log_prob_interval(leaf, lo, hi)

    class Plain(CategoricalLeaf):
        pass

    assert Interval.packed_factors == {"point"} and Interval.packed_form == "truncnorm"
    assert Plain.packed_factors == {"point", "levels"}


def test_a_declaration_that_disagrees_with_the_methods_fails_the_leaf_check():
    with pytest.raises(AssertionError, match="packed form 'uniform'"):
        check_leaf_model(LyingBoxLeaf())


def test_custom_leaf_goes_through_the_walk_and_matches_the_enumerating_path(table,
                                                                            monkeypatch):
    m = ARF(n_trees=4, random_state=0, numeric_leaf=BoxLeaf).fit(table)
    point, iv, _ = kernel_columns(m)
    assert point.all() and iv[[0, 1]].all()
    q = table.iloc[:60].copy()
    q.loc[q.index[::3], "x"] = np.nan
    q.loc[q.index[1::4], "c"] = None
    Z = m.encode_rows(q)
    assert marginal_walk.fused_rows(m, Z).all()
    calls = []
    real = marginal_walk.marginal_log_prob
    monkeypatch.setattr(marginal_walk, "marginal_log_prob",
                        lambda *a: calls.append(1) or real(*a))
    walked = m.log_prob(q)
    cond = m.log_prob(q[["y", "c"]], conditions={"x": (-0.5, 1.0)})
    assert calls and np.isfinite(walked).all()
    monkeypatch.setattr(marginal_walk, "fused_rows", lambda model, Z: np.zeros(len(Z), bool))
    np.testing.assert_allclose(walked, m.log_prob(q), rtol=0, atol=1e-12)
    # the same conditional through the enumerating path: the leaf's own methods
    monkeypatch.setattr(BoxLeaf, "packed_factors", frozenset())
    np.testing.assert_allclose(cond, m.log_prob(q[["y", "c"]], conditions={"x": (-0.5, 1.0)}),
                               rtol=0, atol=1e-12)


def test_the_built_in_declarations_docs_components_lists():
    """docs/components.md, "Declared leaf capabilities"."""
    from forestgen import registry

    forms = {n: (registry.get("leaf", n).packed_form, registry.get("leaf", n).packed_factors)
             for n in registry.available("leaf")}
    numeric, discrete = frozenset({"point", "interval"}), frozenset({"point", "levels"})
    assert forms == {"truncnorm": ("truncnorm", numeric), "gef_gaussian": ("truncnorm", numeric),
                     "uniform": ("uniform", numeric), "cell_uniform": ("uniform", numeric),
                     "categorical": ("categorical", discrete),
                     "ordinal_kernel": ("categorical", discrete),
                     "uniform_levels": ("categorical", discrete),
                     "point_mass": (None, frozenset()), "kernel": (None, frozenset()),
                     "rounded_normal_tail": (None, frozenset()),
                     "marginal_cell": (None, frozenset()), "stacked": (None, frozenset()),
                     "marginal_mix": (None, frozenset()), "grid_spike": (None, frozenset()),
                     "indexed": (None, frozenset())}


def test_a_fit_column_that_fits_another_model_fails_the_leaf_check():
    """``check_leaf_model`` fits a leaf model's own ``fit_column`` beside ``fit`` of the
    tiled pairs: the built-in ones pass, one that fits something else is named."""
    check_leaf_model(TruncNormalLeaf())
    check_leaf_model(CategoricalLeaf(alpha=0.5))

    class Shifted(TruncNormalLeaf):
        def fit_column(self, x, leaves, cell, weight=None):
            super().fit_column(x, leaves, cell, weight)
            self.mu_ = self.mu_ + 1e-6
            return self

    with pytest.raises(AssertionError, match="fit_column"):
        check_leaf_model(Shifted())
