"""Single-machine scale paths (issue 15): streamed sampling equals the in-memory sample, and
the batched NaN-marginal queries equal the row-at-a-time ones."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.base as fg_base
from forestgen.families.mixture.arf import ARF


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 6, n),
                       "c": pd.Categorical(rng.choice(list("abc"), n))})
    df.loc[rng.random(n) < 0.1, "x"] = np.nan
    return ARF(n_trees=4, random_state=0, n_jobs=1).fit(df)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".csv.gz"])
def test_sample_to_writes_the_rows_of_sample(model, tmp_path, monkeypatch, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    monkeypatch.setattr(fg_base, "SAMPLE_BLOCK", 7)  # many blocks
    mem = model.sample(50, random_state=3)
    assert len(mem) == 50 and mem.index.equals(pd.RangeIndex(50))
    path = model.sample_to(tmp_path / f"s{suffix}", 50, random_state=3, progress=True)
    got = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
    assert list(got.columns) == list(mem.columns) and len(got) == 50
    np.testing.assert_allclose(got["x"].to_numpy(float), mem["x"].to_numpy(float))
    np.testing.assert_array_equal(got["k"].to_numpy(float), mem["k"].to_numpy(float))
    assert got["c"].astype(str).tolist() == mem["c"].astype(str).tolist()
    assert not list(tmp_path.glob(".*partial"))


def test_one_block_sample_is_the_direct_draw(model, monkeypatch):
    direct = model.encoder_.inverse_transform(
        model.sample_encoded(20, random_state=5, missing=True, within_support=True))
    pd.testing.assert_frame_equal(model.sample(20, random_state=5), direct)
    monkeypatch.setattr(fg_base, "SAMPLE_BLOCK", 8)
    blocks = model.sample(20, random_state=5)  # 8 + 8 + 4 rows from one Generator
    assert len(blocks) == 20 and blocks.index.equals(pd.RangeIndex(20))


def test_sample_to_rejects_unknown_suffix(model, tmp_path):
    with pytest.raises(ValueError, match="parquet"):
        model.sample_to(tmp_path / "s.xlsx", 5)


def test_chunked_nan_log_prob_equals_row_at_a_time(model, monkeypatch):
    rng = np.random.default_rng(1)
    q = model.sample(200, random_state=1)
    q.loc[rng.random(200) < 0.4, "x"] = np.nan
    q.loc[rng.random(200) < 0.3, "c"] = np.nan
    fast = model.log_prob(q)
    Z = model.encoder_.transform(q, "nan")
    one = np.array([model.log_prob_encoded(Z[i : i + 1])[0] for i in range(len(Z))])
    np.testing.assert_allclose(fast, one, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(fg_base, "PAIR_BUDGET", 50)  # chunks of a few rows
    np.testing.assert_allclose(model.log_prob(q), fast, rtol=1e-12, atol=1e-12)


def test_reach_chunks_cover_every_row_once(model):
    Z = model.encoder_.transform(model.sample(100, random_state=2), "nan")
    Z[::3, 0] = np.nan
    ptr, leaf = model.forest_.reach(Z)
    seen = []
    for idx, p, lf in model.forest_.reach_chunks(Z, budget=40):
        for r, i in enumerate(idx):
            np.testing.assert_array_equal(lf[p[r]:p[r + 1]], leaf[ptr[i]:ptr[i + 1]])
        seen.extend(idx.tolist())
    assert seen == list(range(len(Z)))


def test_uncompressed_model_file_loads_to_the_same_model(model, tmp_path):
    from forestgen.base import GenerativeForest

    q = model.sample(50, random_state=4)
    small = model.save(tmp_path / "z.fgm")
    raw = model.save(tmp_path / "raw.fgm", compress=False)
    assert raw.stat().st_size > small.stat().st_size
    for p in (small, raw):
        np.testing.assert_array_equal(GenerativeForest.load(p).log_prob(q), model.log_prob(q))


def test_leaf_ordered_scoring_equals_given_order(model, monkeypatch):
    """Pairs scored sorted by leaf (in_leaf_order) give the same arrays as in walk order."""
    import forestgen.tree.arrays as fg_arrays

    rng = np.random.default_rng(4)
    q = model.sample(150, random_state=4)
    q.loc[rng.random(150) < 0.5, "x"] = np.nan
    q.loc[rng.random(150) < 0.5, "c"] = np.nan
    cond = q[["k"]].iloc[:40]
    monkeypatch.setattr(fg_arrays, "LEAF_ORDER_MIN", 10**9)  # walk order
    lp, pp = model.log_prob(q), model.predict_proba(q, target="c")
    draws = model.sample(conditions=cond, random_state=0)
    monkeypatch.setattr(fg_arrays, "LEAF_ORDER_MIN", 0)  # every call sorted
    np.testing.assert_array_equal(model.log_prob(q), lp)
    np.testing.assert_array_equal(model.predict_proba(q, target="c").to_numpy(), pp.to_numpy())
    pd.testing.assert_frame_equal(model.sample(conditions=cond, random_state=0), draws)


def test_column_boxes_equal_the_whole_table():
    """Leaf cells built one column at a time equal the [L, d] boxes (numeric bounds, integer
    codes and nominal level masks), so a fit reading them per column is unchanged."""
    rng = np.random.default_rng(5)
    n = 400
    df = pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 6, n),
                       "c": pd.Categorical(rng.choice(list("abcde"), n)),
                       "y": rng.gamma(2.0, 1.0, n)})
    m = ARF(n_trees=3, random_state=0, n_jobs=1).fit(df)
    schema = m.encoder_.schema
    nom = np.where(schema.nominal_mask, schema.n_levels, 0)
    whole = m.forest_.boxes(schema.d, nom)
    cols = m.forest_.column_boxes(schema.d, nom)
    assert type(cols).__name__ == "ColumnBoxes"
    assert whole.mask.shape[1] == 5 and not whole.mask.all()  # nominal splits happened
    for j in range(schema.d):
        for a, b in zip(cols.column(j), whole.column(j)):
            np.testing.assert_array_equal(a, b)
        if schema.columns[j].is_discrete:
            k = schema.columns[j].n_levels
            np.testing.assert_array_equal(cols.levels(j, k), whole.levels(j, k))
