"""Decoding text columns takes the few levels, converted once, by code: the same column (values,
missing entries, dtype) as converting every decoded label."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forestgen.data.dtypes import cast_labels
from forestgen.data.encoder import TableEncoder


@pytest.mark.parametrize("dtype", ["str", "string", "string[python]", object])
def test_text_columns_decode_as_the_labels_do(dtype):
    rng = np.random.default_rng(0)
    n = 500
    labels = np.array(["lo", "mid", "hi", "ünï"], dtype=object)[rng.integers(0, 4, n)]
    labels[rng.random(n) < 0.2] = None
    df = pd.DataFrame({"t": pd.array(labels, dtype=dtype), "x": rng.normal(size=n)})
    enc = TableEncoder().fit(df)
    Z = enc.transform(df)
    out = enc.inverse_transform(Z)
    assert out["t"].dtype == df["t"].dtype
    pd.testing.assert_series_equal(out["t"], df["t"])
    spec = enc.schema.columns[0]
    missing = np.isnan(Z[:, 0])
    cats = np.empty(spec.n_levels, dtype=object)
    cats[:] = spec.categories
    codes = np.where(missing, 0, Z[:, 0]).astype(np.int64)
    want = pd.Series(cast_labels(cats[codes], missing, spec.dtype))
    pd.testing.assert_series_equal(out["t"], want, check_names=False)
