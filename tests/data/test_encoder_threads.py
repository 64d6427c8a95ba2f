"""The encoder fits, encodes and decodes its columns on ``n_jobs`` threads from
``_THREAD_ROWS`` rows: the same schema, matrix, notes, frame and errors at any thread count."""

import numpy as np
import pandas as pd
import pytest

from forestgen.data import encoder as enc_mod
from forestgen.data.encoder import TableEncoder

N = enc_mod._THREAD_ROWS + 500


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    x[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "x": x,
        "i": rng.integers(0, 12, n),
        "s": pd.Series(np.array(["a", "b", "c", "d"])[rng.integers(0, 4, n)], dtype="string"),
        "o": np.array(["lo", "mid", "hi"], dtype=object)[rng.integers(0, 3, n)],
        "b": rng.random(n) < 0.3,
        "k": pd.Categorical(np.array(["p", "q", "r"])[rng.integers(0, 3, n)]),
        "t": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**6, n), "s"),
    })


def _spy(monkeypatch) -> list:
    jobs = []
    real = enc_mod.thread_map

    def spy(fn, n, n_jobs):
        jobs.append(n_jobs)
        return real(fn, n, n_jobs)

    monkeypatch.setattr(enc_mod, "thread_map", spy)
    return jobs


def test_same_encoder_matrix_notes_and_frame_at_two_threads(monkeypatch):
    jobs = _spy(monkeypatch)
    train = _frame(N, 0)
    one, two = TableEncoder(), TableEncoder()
    Z1, Z2 = one.fit_transform(train, n_jobs=1), two.fit_transform(train, n_jobs=2)
    assert jobs == [1, 1, 2, 2]  # (spec fits, then the encoding, at each count)
    assert one.schema.to_dict() == two.schema.to_dict()
    np.testing.assert_array_equal(Z1, Z2)
    query = _frame(N, 1).drop(columns="b")
    query.loc[[3, 8], "s"] = "new"
    query.loc[[4], "o"] = "other"
    query.loc[[5, 6, 9], "k"] = np.nan
    notes1, notes2 = [], []
    Q1 = one.transform(query, "nan", notes1, n_jobs=1)
    Q2 = two.transform(query, "nan", notes2, n_jobs=2)
    np.testing.assert_array_equal(Q1, Q2)
    assert [x[:2] for x in notes1] == [("absent", "b"), ("unseen", "s"), ("unseen", "o")]
    assert notes1 == notes2
    D1, D2 = one.inverse_transform(Q1, n_jobs=1), two.inverse_transform(Q2, n_jobs=2)
    pd.testing.assert_frame_equal(D1, D2)
    assert D2.dtypes.to_dict() == D1.dtypes.to_dict() and D2.shape == query.shape[:1] + (7,)


def test_small_tables_stay_on_one_thread(monkeypatch):
    jobs = _spy(monkeypatch)
    small = _frame(enc_mod._THREAD_ROWS - 1, 0)
    enc = TableEncoder()
    enc.inverse_transform(enc.fit_transform(small, n_jobs=2), n_jobs=2)
    assert jobs == [1, 1, 1]


def test_first_bad_column_is_named_at_two_threads():
    train = _frame(N, 0)
    for c in ("i", "x"):
        train[c] = train[c].astype(object)
        train.loc[7, c] = "oops"
    for jobs in (1, 2):
        with pytest.raises(ValueError, match="'x'"):
            TableEncoder().fit_transform(train, n_jobs=jobs)
