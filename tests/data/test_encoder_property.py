"""Property test: random small mixed-type frames survive an encode/decode round trip."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forestgen.data import Schema, TableEncoder

COLUMN_TYPES = ["float", "int", "Int64", "bool", "boolean", "str", "objnum", "category"]
NAMES = ["a", "index", "__code__", "level_0", 0, 1, 7, "x y"]


@st.composite
def column(draw: st.DrawFn, n: int) -> pd.Series:
    kind = draw(st.sampled_from(COLUMN_TYPES))
    present = [True] + draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))
    allow_missing = kind in {"float", "Int64", "boolean", "str", "objnum", "category"}
    if not allow_missing:
        present = [True] * n
    if kind == "float":
        dec = draw(st.integers(0, 3))
        ints = draw(st.lists(st.integers(-10_000, 10_000), min_size=n, max_size=n))
        vals = [i / 10**dec if p else np.nan for i, p in zip(ints, present)]
        return pd.Series(vals, dtype=np.float64)
    if kind in ("int", "Int64"):
        ints = draw(st.lists(st.integers(-50, 50), min_size=n, max_size=n))
        if kind == "int":
            return pd.Series(ints, dtype=np.int64)
        return pd.Series([i if p else None for i, p in zip(ints, present)], dtype="Int64")
    if kind in ("bool", "boolean"):
        bs = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        if kind == "bool":
            return pd.Series(bs, dtype=bool)
        return pd.Series([b if p else None for b, p in zip(bs, present)], dtype="boolean")
    labels = draw(st.lists(st.sampled_from(["p", "q", "r s", "", "1"]), min_size=n, max_size=n))
    if kind == "str":
        return pd.Series([v if p else None for v, p in zip(labels, present)], dtype="str")
    if kind == "objnum":
        nums = draw(st.lists(st.sampled_from([3, -1, 20]), min_size=n, max_size=n))
        return pd.Series([v if p else np.nan for v, p in zip(nums, present)], dtype=object)
    cats = ["p", "q", "r s", "", "1", "unused"]
    vals = [v if p else None for v, p in zip(labels, present)]
    return pd.Series(pd.Categorical(vals, categories=cats))


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(1, 12))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    return pd.DataFrame({name: draw(column(n)) for name in names})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=frames(), max_levels=st.integers(1, 6))
def test_round_trip_random_frames(df: pd.DataFrame, max_levels: int) -> None:
    enc = TableEncoder(max_ordinal_levels=max_levels).fit(df)
    Z = enc.transform(df)
    assert Z.shape == df.shape and Z.dtype == np.float64
    np.testing.assert_array_equal(np.isnan(Z), df.isna().to_numpy())
    for j, spec in enumerate(enc.schema.columns):
        codes = Z[~np.isnan(Z[:, j]), j]
        if spec.is_discrete:
            assert np.all(codes == np.round(codes))
            assert np.all((codes >= 0) & (codes < spec.n_levels))
        else:
            assert np.all((codes >= spec.lower) & (codes <= spec.upper))
    pd.testing.assert_frame_equal(enc.inverse_transform(Z), df)

    schema2 = Schema.from_dict(json.loads(json.dumps(enc.schema.to_dict())))
    assert schema2 == enc.schema
    pd.testing.assert_frame_equal(TableEncoder.from_schema(schema2).inverse_transform(Z), df)
