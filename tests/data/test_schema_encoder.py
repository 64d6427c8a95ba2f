"""Tests for forestgen.data: schema, encoder and bundled data sets."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from forestgen.data import (
    ColumnSpec,
    Schema,
    TableEncoder,
    infer_kind,
    list_datasets,
    load_adult,
)

LEVELS = ["lo", "mid", "hi"]


def mixed_frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    many = np.array([f"lvl{i:03d}" for i in range(320)], dtype=object)
    many_vals = many[np.r_[np.arange(320), rng.integers(0, 320, n - 320)]]
    int_na = pd.array(rng.integers(-5, 100, n), dtype="Int64")
    int_na[rng.random(n) < 0.2] = pd.NA
    obj = rng.choice(np.array(["x", "y", "z"], dtype=object), n).astype(object)
    obj[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "f": np.round(rng.normal(size=n), 3),
            "i": rng.integers(0, 10_000, n),
            "i_na": int_na,
            "b": rng.random(n) < 0.5,
            "cat": pd.Categorical(rng.choice(["lo", "mid", "hi"], n), categories=LEVELS),
            "s": pd.Series(rng.choice(["red", "green", "blue"], n), dtype="str"),
            "obj": pd.Series(obj, dtype=object),
            "numcat": pd.Series(rng.choice([10, 20, 35], n).tolist(), dtype=object),
            "many": pd.Series(many_vals, dtype="str"),
            "index": rng.integers(0, 4, n).astype(np.int32),
            "__code__": rng.choice([0.0, 1.0], n),
            0: rng.uniform(0, 1, n).round(2),
        }
    )


# --------------------------------------------------------------------------- round trips


def test_round_trip_mixed_frame() -> None:
    df = mixed_frame()
    enc = TableEncoder()
    Z = enc.fit_transform(df)
    assert Z.dtype == np.float64 and Z.shape == df.shape
    back = enc.inverse_transform(Z)
    pd.testing.assert_frame_equal(back, df)
    assert list(back.columns) == list(df.columns)
    assert isinstance(back.columns[-1], int)
    assert back["numcat"].map(type).eq(int).all()  # numbers as categories stay numbers


def test_inferred_kinds_and_spec() -> None:
    df = mixed_frame()
    s = TableEncoder().fit(df).schema
    kinds = {c.name: c.kind for c in s.columns}
    assert kinds == {
        "f": "continuous", "i": "integer", "i_na": "integer", "b": "bool",
        "cat": "categorical", "s": "categorical", "obj": "categorical",
        "numcat": "categorical", "many": "categorical", "index": "integer",
        "__code__": "binary", 0: "continuous",
    }
    assert not s["i"].ordinal and s["i"].decimals == 0 and s["i"].categories is None
    assert s["index"].ordinal and s["index"].categories == [0, 1, 2, 3]
    assert s["i_na"].has_missing and not s["i"].has_missing
    assert s["f"].decimals == 3 and s[0].decimals == 2
    assert s["many"].n_levels == 320 and s["many"].is_nominal
    assert s["cat"].categories == ["lo", "mid", "hi"]
    assert s["numcat"].categories == [10, 20, 35]
    assert s["b"].categories == [False, True] and not s["b"].is_nominal
    np.testing.assert_array_equal(
        s.discrete_mask, [c in {"b", "cat", "s", "obj", "numcat", "many", "index", "__code__"}
                          for c in s.names]
    )
    assert s.nominal_mask.sum() == 5  # cat, s, obj, numcat, many
    assert s.n_levels[s.index("many")] == 320 and s.n_levels[0] == 0
    assert s["f"].lower == df["f"].min() and s["f"].upper == df["f"].max()
    assert s["many"].lower == 0 and s["many"].upper == 319
    assert s.d == 12 and s.index(0) == 11


def test_infer_kind_rules() -> None:
    assert infer_kind(pd.Series([True, None, False], dtype=object)) == "bool"
    assert infer_kind(pd.Series([1.0, 2.0, np.nan])) == "continuous"
    assert infer_kind(pd.Series([1, 0, 1])) == "binary"
    assert infer_kind(pd.Series([0, 0, 0])) == "binary"  # constant 0/1 column: still binary
    enc = TableEncoder().fit(pd.DataFrame({"z": np.zeros(5, np.int8)}))
    assert enc.schema["z"].categories == [0, 1]
    assert enc.transform(pd.DataFrame({"z": np.ones(2, np.int8)}))[:, 0].tolist() == [1.0, 1.0]
    assert infer_kind(pd.Series([1.0, 0.0, np.nan])) == "binary"
    assert infer_kind(pd.Series([2, 2])) == "integer"
    assert infer_kind(pd.Series([1, None, 3], dtype="Int64")) == "integer"
    assert infer_kind(pd.Series(["a", "b"])) == "categorical"
    assert infer_kind(pd.Series([1, 2], dtype=object)) == "categorical"
    # datetimes and timedeltas are modelled as numbers (seconds); see test_input_handling.py
    assert infer_kind(pd.Series(pd.to_datetime(["2020-01-01"]), name="when")) == "continuous"
    with pytest.raises(ValueError, match="when"):
        infer_kind(pd.Series([1 + 2j], name="when"))


def test_integer_with_missing_decodes_to_int64() -> None:
    df = pd.DataFrame({"a": [1, 2, 3, 4], "big": np.arange(4) * 1000})
    enc = TableEncoder(max_ordinal_levels=2).fit(df)
    Z = enc.transform(df)
    Z[1, :] = np.nan
    back = enc.inverse_transform(Z)
    assert back["a"].dtype == "Int64" and back["big"].dtype == "Int64"
    assert back["a"].isna().tolist() == [False, True, False, False]
    assert back["big"].tolist()[2] == 2000


def test_bool_with_missing_decodes_to_boolean() -> None:
    df = pd.DataFrame({"b": [True, False, True]})
    enc = TableEncoder().fit(df)
    back = enc.inverse_transform(np.array([[1.0], [np.nan], [0.2]]))
    assert back["b"].dtype == "boolean"
    assert back["b"].tolist()[0] is True and back["b"].isna().tolist() == [False, True, False]


def test_decode_rounding_and_clipping() -> None:
    df = pd.DataFrame({
        "x": [0.25, 1.5, 2.125, 3.0],  # 3 decimals
        "k": pd.Series(["a", "b", "c", "a"], dtype="str"),
        "n": np.array([0, 500, 100, 7], dtype=np.int16),
        "o": [5, 7, 9, 7],
    })
    s = TableEncoder(max_ordinal_levels=2).fit(df).schema
    assert s["x"].decimals == 3 and not s["n"].ordinal and not s["o"].ordinal
    enc = TableEncoder(max_ordinal_levels=3).fit(df)
    assert enc.schema["o"].ordinal and not enc.schema["n"].ordinal
    Z = np.array([[0.123456, 2.6, 123.7, 1.4], [1.0, -3.0, 1e9, 7.9]])
    back = enc.inverse_transform(Z)
    assert back["x"].tolist() == [0.123, 1.0]
    assert back["k"].tolist() == ["c", "a"]  # codes rounded and clipped
    assert back["n"].tolist() == [124, np.iinfo(np.int16).max] and back["n"].dtype == np.int16
    assert back["o"].tolist() == [7, 9]  # ordinal codes rounded and clipped


def test_decimals_none_for_long_fractions() -> None:
    df = pd.DataFrame({"x": [1 / 3, 0.5]})
    enc = TableEncoder().fit(df)
    assert enc.schema["x"].decimals is None
    pd.testing.assert_frame_equal(enc.inverse_transform(enc.transform(df)), df, check_exact=True)


# --------------------------------------------------------------------------- codes


def test_unseen_level_gets_code_k() -> None:
    df = pd.DataFrame({"c": ["a", "b", "c", "a"], "o": [3, 1, 2, 3]})
    enc = TableEncoder().fit(df)
    assert enc.schema["c"].categories == ["a", "b", "c"]
    new = pd.DataFrame({"o": [1, 99, 2, None], "c": ["c", "zzz", None, "a"]})
    Z = enc.transform(new)
    np.testing.assert_array_equal(Z[:, 0], [2, 3, np.nan, 0])
    np.testing.assert_array_equal(Z[:, 1], [0, 3, 1, np.nan])


def test_ordinal_integer_codes_are_ranks() -> None:
    df = pd.DataFrame({"o": [10, -4, 7, 10, 7]})
    enc = TableEncoder().fit(df)
    spec = enc.schema["o"]
    assert spec.is_discrete and spec.ordinal and spec.categories == [-4, 7, 10]
    assert (spec.lower, spec.upper) == (0.0, 2.0)
    np.testing.assert_array_equal(enc.transform(df)[:, 0], [2, 0, 1, 2, 1])


def test_category_with_unused_levels_and_numeric_categories() -> None:
    df = pd.DataFrame({
        "c": pd.Categorical(["b", "a"], categories=["z", "a", "b"], ordered=True),
        "n": pd.Categorical([2.5, 1.0], categories=[1.0, 2.5, 4.0]),
    })
    enc = TableEncoder().fit(df)
    np.testing.assert_array_equal(enc.transform(df), [[2, 1], [1, 0]])
    back = enc.inverse_transform(np.array([[0.0, 2.0], [np.nan, 1.0]]))
    assert back["c"].dtype == df["c"].dtype and back["n"].dtype == df["n"].dtype
    assert back["c"].tolist()[0] == "z" and pd.isna(back["c"].iloc[1])
    assert back["n"].tolist() == [4.0, 2.5]


def test_many_levels_codes() -> None:
    levels = [f"v{i}" for i in range(600)]
    df = pd.DataFrame({"c": levels[::-1]})
    enc = TableEncoder().fit(df)
    Z = enc.transform(df)
    assert Z.max() == 599 and enc.schema["c"].n_levels == 600
    pd.testing.assert_frame_equal(enc.inverse_transform(Z), df)


# --------------------------------------------------------------------------- overrides


def test_kind_overrides() -> None:
    df = pd.DataFrame({"a": [1, 2, 3, 2], "b": [0.5, 1.0, 1.5, 2.0], "c": [1, 0, 1, 1],
                       "d": [4, 5, 6, 7]})
    enc = TableEncoder(kinds={"a": "categorical", "c": "bool", "d": "continuous"}).fit(df)
    s = enc.schema
    assert s["a"].kind == "categorical" and s["a"].categories == [1, 2, 3]
    assert s["c"].kind == "bool" and s["d"].kind == "continuous" and s["d"].decimals == 0
    pd.testing.assert_frame_equal(enc.inverse_transform(enc.transform(df)), df)


def test_override_errors_name_column() -> None:
    df = pd.DataFrame({"s": ["a", "b"], "x": [0.5, 1.5], "k": ["u", "v"]})
    with pytest.raises(ValueError, match="nope"):
        TableEncoder(kinds={"nope": "categorical"}).fit(df)
    with pytest.raises(ValueError, match="'s'"):
        TableEncoder(kinds={"s": "continuous"}).fit(df)
    with pytest.raises(ValueError, match="'x'"):
        TableEncoder(kinds={"x": "integer"}).fit(df)
    with pytest.raises(ValueError, match="'k'"):
        TableEncoder(kinds={"k": "bool"}).fit(df)
    with pytest.raises(ValueError, match="'x'"):
        TableEncoder(kinds={"x": "weird"}).fit(df)


# --------------------------------------------------------------------------- errors


def test_error_messages() -> None:
    df = pd.DataFrame({"num": [1.5, 2.5], "cat": ["a", "b"]})
    enc = TableEncoder().fit(df)
    with pytest.raises(ValueError, match="'num'"):
        enc.transform(df[["cat"]])
    with pytest.raises(ValueError, match="'num'.*'oops'"):
        enc.transform(pd.DataFrame({"num": ["1.0", "oops"], "cat": ["a", "a"]}))
    # a query's infinite value is a value outside the range (the learner scores the row)
    z = enc.transform(pd.DataFrame({"num": [np.inf, 1.0], "cat": ["a", "a"]}))
    one = enc.transform(pd.DataFrame({"num": [1.0], "cat": ["a"]}))
    assert np.isposinf(z[0, 0]) and z[1, 0] == one[0, 0]
    with pytest.raises(ValueError, match="'bad'.*infinite"):
        TableEncoder().fit(pd.DataFrame({"bad": [1.0, -np.inf]}))
    with pytest.raises(ValueError, match="empty"):
        TableEncoder().fit(pd.DataFrame({"a": []}))
    with pytest.raises(ValueError, match="'gone'.*missing"):
        TableEncoder().fit(pd.DataFrame({"ok": [1, 2], "gone": [None, None]}))
    dup = pd.DataFrame([[1, 2]], columns=["dupe", "dupe"])
    with pytest.raises(ValueError, match="'dupe'"):
        TableEncoder().fit(dup)
    with pytest.raises(RuntimeError):
        TableEncoder().transform(df)


def test_missing_markers_all_accepted() -> None:
    df = pd.DataFrame({"o": pd.Series(["a", None, pd.NA, np.nan, pd.NaT, "b"], dtype=object),
                       "x": [1.0, np.nan, 2.0, 3.0, 4.0, 5.0]})
    Z = TableEncoder().fit_transform(df)
    np.testing.assert_array_equal(np.isnan(Z[:, 0]), [0, 1, 1, 1, 1, 0])
    assert np.isnan(Z[1, 1])


# --------------------------------------------------------------------------- array inputs


def test_ndarray_input() -> None:
    rng = np.random.default_rng(1)
    arr = np.column_stack([rng.normal(size=50).round(4), rng.integers(0, 2, 50),
                           rng.integers(0, 5, 50)]).astype(np.float64)
    arr[:2, 1] = [0, 1]
    enc = TableEncoder().fit(arr)
    s = enc.schema
    assert s.input_type == "ndarray" and s.names == [0, 1, 2]
    assert [c.kind for c in s.columns] == ["continuous", "binary", "continuous"]
    back = enc.inverse_transform(enc.transform(arr))
    np.testing.assert_array_equal(back.to_numpy(), arr)

    obj = np.array([["a", 1, 0.5], ["b", 2, None], ["a", 3, 1.5]], dtype=object)
    enc = TableEncoder().fit(obj)
    assert [c.kind for c in enc.schema.columns] == ["categorical", "integer", "continuous"]
    back = enc.inverse_transform(enc.transform(obj))
    assert back[0].tolist() == ["a", "b", "a"] and back[1].tolist() == [1, 2, 3]


def test_tensor_input() -> None:
    t = torch.tensor([[0.5, 1.0], [1.25, 0.0], [2.0, 1.0]], dtype=torch.float64)
    enc = TableEncoder().fit(t)
    assert enc.schema.input_type == "tensor" and enc.schema[1].kind == "binary"
    Z = enc.transform(t)
    np.testing.assert_array_equal(Z, t.numpy())
    np.testing.assert_array_equal(enc.inverse_transform(Z).to_numpy(), t.numpy())


# --------------------------------------------------------------------------- serialisation


def test_schema_json_round_trip() -> None:
    df = mixed_frame(n=330)
    df["flt_cat"] = pd.Series(np.tile([0.1, 2.0, 1e-9], 110).tolist(), dtype=object)
    df[7] = pd.Series(np.tile(["1", "2", "x"], 110), dtype="str")
    enc = TableEncoder().fit(df)
    payload = json.dumps(enc.schema.to_dict())
    schema2 = Schema.from_dict(json.loads(payload))
    assert schema2 == enc.schema
    assert schema2["numcat"].categories == [10, 20, 35]
    assert schema2["flt_cat"].categories == [1e-9, 0.1, 2.0]
    assert schema2[7].categories == ["1", "2", "x"]  # numeric-looking strings stay strings
    assert schema2["b"].categories == [False, True]
    assert isinstance(schema2.names[11], int) and isinstance(schema2.names[-1], int)
    enc2 = TableEncoder.from_schema(schema2)
    Z = enc.transform(df)
    np.testing.assert_array_equal(enc2.transform(df), Z)
    pd.testing.assert_frame_equal(enc2.inverse_transform(Z), df)


def test_column_spec_properties() -> None:
    spec = ColumnSpec("x", "categorical", "str", categories=["a", "b"])
    assert spec.n_levels == 2 and spec.is_discrete and not spec.is_nominal
    num = ColumnSpec("y", "integer", "int64")
    assert num.n_levels == 0 and not num.is_discrete
    back = ColumnSpec.from_dict(json.loads(json.dumps(num.to_dict())))
    assert np.isnan(back.lower) and back.to_dict() == num.to_dict()
    with pytest.raises(ValueError):
        ColumnSpec("z", "weird", "int64")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- datasets


def test_load_adult() -> None:
    assert "adult" in list_datasets()
    df = load_adult()
    assert df.shape == (32561, 15)
    assert df["age"].dtype == np.int64 and df["fnlwgt"].dtype == np.int64
    assert pd.api.types.is_string_dtype(df["workclass"])
    assert not (df == "?").any().any()
    assert df["workclass"].isna().sum() == 1836 and df["native-country"].isna().sum() == 583
    assert set(df["income"].unique()) == {"<=50K", ">50K"}
    test = load_adult("test")
    assert test.shape == (16281, 15) and test.isna().any().any()
    sub = load_adult(n=100, random_state=3)
    assert sub.shape == (100, 15)
    pd.testing.assert_frame_equal(sub, load_adult(n=100, random_state=3))
    assert not sub.equals(load_adult(n=100, random_state=4))
    with pytest.raises(ValueError, match="split"):
        load_adult("valid")


def test_adult_round_trip() -> None:
    df = load_adult(n=2000, random_state=0)
    enc = TableEncoder().fit(df)
    pd.testing.assert_frame_equal(enc.inverse_transform(enc.transform(df)), df)


def test_value_steps_coarser_than_the_decimals() -> None:
    """Numbers all on a coarser grid than their decimals (halves, fives, thousands) decode on
    it; a grid so few values share that chance could explain it does not count."""
    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame({
        "half": np.round(rng.gamma(4, 3, n) * 2) / 2,
        "tenth": np.round(rng.gamma(4, 3, n), 1),
        "thousands": (rng.lognormal(4, 1, n).astype(int) + 1) * 1000,
        "nickels": np.round(rng.uniform(0, 20, n) * 20) / 20,
    })
    enc = TableEncoder().fit(df)
    steps = {c.name: c.step for c in enc.schema.columns}
    assert steps["half"] == 0.5 and steps["thousands"] == 1000.0 and steps["nickels"] == 0.05
    assert steps["tenth"] is None
    few = TableEncoder().fit(pd.DataFrame({"x": np.linspace(0.2, 0.6, 3)}))
    assert few.schema["x"].step is None  # 0.2, 0.4, 0.6: 2 ** -3 > 1e-3
    # eighths, but only 2.125 uses the third decimal: 125 ** -1 > 1e-3, so thousandths
    eighths = TableEncoder().fit(pd.DataFrame({"x": [0.25, 1.5, 2.125, 3.0, 4.5, 0.75]}))
    assert eighths.schema["x"].step is None and eighths.schema["x"].decimals == 3
    spec = enc.schema["nickels"]
    z = spec.to_grid(np.array([0.33, 0.07, 19.99]))
    assert z.tolist() == [0.35, 0.05, 20.0]  # written with the decimals, no 0.35000000000000003


def test_spiky_columns_keep_levels_past_max_ordinal_levels() -> None:
    rng = np.random.default_rng(0)
    n = 600
    # 40 sparse values, half the rows at 40 (hours-per-week); 40 values of a dense scale with a
    # point mass; 40 sparse values without one (readings)
    sparse_spiky = np.where(rng.random(n) < 0.5, 40, rng.choice(np.arange(0, 200, 5), n))
    dense_spiky = np.where(rng.random(n) < 0.3, 20, rng.integers(0, 40, n))
    sparse_flat = rng.choice(np.arange(0, 400, 10), n)
    df = pd.DataFrame({"s": sparse_spiky, "d": dense_spiky, "f": sparse_flat})
    before = TableEncoder(max_ordinal_levels=16).fit(df).schema
    assert all(before[c].categories is None for c in "sdf")  # numbers: past 16 values
    s = TableEncoder(max_ordinal_levels=16, max_spiky_levels=128).fit(df).schema
    # spiky: ordered levels, the observed values (sparse) or the whole range (a dense scale)
    assert s["s"].ordinal and s["s"].categories == sorted(np.unique(sparse_spiky).tolist())
    assert s["d"].ordinal and s["d"].categories == list(range(40))
    assert s["f"].categories is None  # no point mass: still a number
    # a spiky column past max_spiky_levels values stays a number
    assert TableEncoder(max_ordinal_levels=16, max_spiky_levels=30).fit(df).schema[
        "s"].categories is None
    # the default (None) is max_ordinal_levels for both, as before
    same = TableEncoder(max_ordinal_levels=64).fit(df).schema
    assert same == TableEncoder(max_ordinal_levels=64, max_spiky_levels=64).fit(df).schema


def test_heaps_are_counts_the_neighbours_cannot_explain():
    from forestgen.data.column_kinds import HEAP_MIN_ROWS, MAX_ATOMS, heaps
    rng = np.random.default_rng(0)

    def found(v):
        uniq, counts = np.unique(v, return_counts=True)
        return heaps(uniq, counts).tolist()

    income = np.round(rng.lognormal(1.0, 0.4, 500), 2)
    income[:40] = 3.0  # a rounded report in 8% of the rows
    income[40:52] = 5.0
    assert found(income) == [3.0, 5.0]
    # a smooth integer scale (every value recurs, like its neighbours) has no heap
    assert found(rng.poisson(60, 500)) == []
    # nor do a 0.1 grid's chance repeats on a small table (wine-sized: 125 rows)
    assert found(np.round(rng.normal(13.0, 0.8, 125), 1)) == []
    # a heap needs HEAP_MIN_ROWS rows however sparse its neighbours
    few = np.round(rng.normal(0, 1, 300), 3)
    few[: HEAP_MIN_ROWS - 1] = 0.5
    assert 0.5 not in found(few)
    # the encoder keeps them as atoms only when asked (Anchored does), the largest first
    df = pd.DataFrame({"income": income})
    assert TableEncoder().fit(df).schema["income"].atoms is None
    assert TableEncoder(heaps=True).fit(df).schema["income"].atoms == [3.0, 5.0]
    many = np.round(rng.normal(0, 10, 4000), 3)
    for k in range(MAX_ATOMS + 8):
        many[k * 20:(k + 1) * 20 - 2 * (k % 2)] = 0.5 * k - 9.75  # 40 heaps of 18 or 20 rows
    atoms = TableEncoder(heaps=True).fit(pd.DataFrame({"v": many})).schema["v"].atoms
    assert len(atoms) == MAX_ATOMS  # the 20 heaps of 20 rows before those of 18
    assert {0.5 * k - 9.75 for k in range(0, 40, 2)} <= set(atoms)


def test_discrete_values_without_a_spike_are_atoms_with_heaps():
    from forestgen.data.column_kinds import MAX_ATOMS
    rng = np.random.default_rng(1)
    # a standardised score (Doctor's health): 40 irregular values to 0.001, none in 10% of rows
    values = np.round((np.arange(40) - 17.3) / 7.1, 3)
    score = values[np.clip(np.round(rng.normal(20, 9, 400)), 0, 39).astype(int)]
    df = pd.DataFrame({"score": score})
    assert TableEncoder().fit(df).schema["score"].atoms is None
    atoms = TableEncoder(heaps=True).fit(df).schema["score"].atoms
    uniq, counts = np.unique(score, return_counts=True)
    top = uniq[counts >= 2][np.argsort(-counts[counts >= 2], kind="stable")][:MAX_ATOMS]
    assert atoms == sorted(float(v) for v in top)
    # the same grid with most values seen once is a continuous column: no such atoms
    fine = np.round(rng.normal(0, 1, 400), 3)
    assert TableEncoder(heaps=True).fit(pd.DataFrame({"v": fine})).schema["v"].atoms is None
    # a regular grid (steps of 0.005, abalone's lengths) is not sparse in its own steps
    grid = np.round(rng.normal(0.5, 0.1, 400) / 0.005) * 0.005
    assert TableEncoder(heaps=True).fit(pd.DataFrame({"v": np.round(grid, 3)})).schema["v"].atoms \
        is None
