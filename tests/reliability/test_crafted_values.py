"""Crafted model files of other learners whose values pass a loose check and then crash or
mislead a query: refused at load with a :class:`ModelFileError` naming the array."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.base import GenerativeForest
from forestgen.modelfile import ModelFileError
from tests.reliability.conftest import read_raw, write_raw


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 300
    c = rng.choice(["a", "b", "c"], n)
    x = rng.normal(size=n) + (c == "b")
    return pd.DataFrame({"x": x, "y": x + rng.normal(size=n), "c": c,
                         "k": rng.integers(0, 5, n)})


def _crafted(tmp_path, model, edit):
    good = model.save(tmp_path / "good.forestgen")
    arrays, meta = read_raw(good)
    edit(arrays, meta)
    return write_raw(tmp_path / "bad.forestgen", arrays, meta)


def test_nrgboost_routing_offset_overflowing_int64(tmp_path, table):
    model = fg.NRGBoost(n_trees=3, random_state=0).fit(table)

    def edit(a, m):
        co = a["trees.cat_off"].copy()
        co[np.nonzero((a["trees.feature"] >= 0) & (co >= 0))[0][0]] = np.iinfo(np.int64).max
        a["trees.cat_off"] = co
    with pytest.raises(ModelFileError, match="routing table"):
        GenerativeForest.load(_crafted(tmp_path, model, edit))


def test_eogt_split_weight_of_zero(tmp_path, table):
    model = fg.EOGT(n_trees=3, random_state=0).fit(table)

    def edit(a, m):
        a["extra.trees.node_value"][np.flatnonzero(a["extra.trees.feature"] >= 0)[0]] = 0.0
    with pytest.raises(ModelFileError, match="node_value"):
        GenerativeForest.load(_crafted(tmp_path, model, edit))


def test_chain_kernel_centre_outside_its_cell(tmp_path, table):
    model = fg.Chain(random_state=0).fit(table)
    j = list(table.columns).index("y")

    def edit(a, m):
        a[f"leaf{j}.center_"][0] = 1e306
    with pytest.raises(ModelFileError, match="'y'.*centre"):
        GenerativeForest.load(_crafted(tmp_path, model, edit))


def test_integer_level_beyond_its_dtype(tmp_path, table):
    model = fg.ARF(n_trees=3, random_state=0).fit(table)

    def edit(a, m):
        col = next(c for c in m["schema"]["columns"] if c["kind"] == "integer")
        col["categories"][0][1] = 1e308  # (a tagged value: [type, value])
    with pytest.raises(ModelFileError, match="'k'.*levels"):
        GenerativeForest.load(_crafted(tmp_path, model, edit))
