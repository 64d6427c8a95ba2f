"""``TableEncoder.inverse_transform`` decodes a column-major copy of its input: the training
rows come back (values, dtypes, levels, missing entries) from a row-major or column-major
matrix, and the caller's matrix is left as it was."""

import numpy as np
import pandas as pd

from forestgen.data.encoder import TableEncoder


def test_decode_of_either_layout_gives_the_rows_back():
    rng = np.random.default_rng(5)
    n = 3000
    x = rng.normal(size=n).round(2)
    x[::37] = np.nan
    lab = rng.choice(["a", "b", "c"], n).astype(object)
    lab[::41] = None
    df = pd.DataFrame({
        "x": x,
        "i": rng.integers(0, 9, n),
        "big": rng.integers(0, 10**6, n),
        "lab": lab,
        "cat": pd.Categorical(rng.choice(["u", "v"], n), categories=["v", "u"], ordered=True),
        "s": pd.array(rng.choice(["p", "q"], n), dtype="string"),
        "b": rng.random(n) < 0.3,
        "t": pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 99, n), "D"),
    })
    enc = TableEncoder()
    Z = enc.fit_transform(df)
    assert Z.flags.c_contiguous
    before = Z.copy()
    pd.testing.assert_frame_equal(enc.inverse_transform(Z), df, check_exact=True)
    pd.testing.assert_frame_equal(enc.inverse_transform(np.asfortranarray(Z)), df,
                                  check_exact=True)
    np.testing.assert_array_equal(Z, before)
