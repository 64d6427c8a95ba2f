"""Text columns are encoded from their distinct values: the same codes as the row-by-row
lookup of an object column holding the same values, and one encoding pass in fit_transform."""

import numpy as np
import pandas as pd
import pytest

from forestgen.data import encoder as enc_mod
from forestgen.data.encoder import TableEncoder


def _frame(n: int, seed: int, dtype: str) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    vals = np.array(["lo", "mid", "hi", "x y", ""], dtype=object)[rng.integers(0, 5, n)]
    vals[rng.random(n) < 0.1] = None
    return pd.DataFrame({"c": pd.Series(vals, dtype=dtype), "x": rng.standard_normal(n)})


@pytest.mark.parametrize("dtype", ["str", "string", "string[python]"])
def test_text_codes_match_object_lookup(dtype):
    train = _frame(400, 0, dtype)
    enc = TableEncoder().fit(train)
    query = _frame(300, 1, dtype)
    query.loc[[3, 7], "c"] = "unseen"
    fast = enc.transform(query)
    slow = enc.transform(query.astype({"c": object}))  # the row-by-row path
    np.testing.assert_array_equal(fast, slow)
    assert np.isnan(fast[:, 0]).sum() == query["c"].isna().sum() > 0
    assert (fast[[3, 7], 0] == enc.schema.columns[0].n_levels).all()  # unseen: code k


def test_unseen_text_is_still_noted():
    train = _frame(200, 0, "str")
    enc = TableEncoder().fit(train)
    query = _frame(50, 1, "str")
    query.loc[[2, 5, 9], "c"] = "new"
    notes: list = []
    Z = enc.transform(query, notes=notes)
    unseen = [x for x in notes if x[0] == "unseen"]
    assert unseen and unseen[0][1] == "c" and unseen[0][2] == 3 and unseen[0][3] == "new"
    assert (Z[[2, 5, 9], 0] == enc.schema.columns[0].n_levels).all()


def test_fit_transform_encodes_once(monkeypatch):
    df = _frame(300, 2, "str")
    calls = []
    real = enc_mod.TableEncoder.transform

    def counting(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(enc_mod.TableEncoder, "transform", counting)
    enc = TableEncoder()
    Z = enc.fit_transform(df)
    assert len(calls) == 1
    monkeypatch.setattr(enc_mod.TableEncoder, "transform", real)
    np.testing.assert_array_equal(Z, TableEncoder().fit(df).transform(df))
    assert enc.schema.to_dict() == TableEncoder().fit(df).schema.to_dict()


@pytest.mark.parametrize("cats", [["lo", "mid", "hi", "x y", ""], [3, 1, 2, 7, 5],
                                  [0.5, 2.5, -1.0, 4.0, 8.0]])
def test_categorical_codes_match_object_lookup(cats, monkeypatch):
    rng = np.random.default_rng(2)

    def frame(n, extra=()):
        vals = np.array(cats, dtype=object)[rng.integers(0, 5, n)]
        vals[rng.random(n) < 0.1] = None
        return pd.DataFrame({"c": pd.Categorical(vals, categories=list(cats) + list(extra)),
                             "x": rng.standard_normal(n)})

    train = frame(400)
    enc = TableEncoder().fit(train)
    query = frame(300, extra=["new"])
    query.loc[[3, 7], "c"] = "new"  # a category the training rows did not have
    calls = []
    monkeypatch.setattr(enc_mod, "_encode_distinct", lambda *a, f=enc_mod._encode_distinct:
                        calls.append(1) or f(*a))
    fast = enc.transform(query)
    assert calls  # the categorical column took the distinct-value path
    slow = enc.transform(query.astype({"c": object}))  # the row-by-row path
    np.testing.assert_array_equal(fast, slow)
    assert np.isnan(fast[:, 0]).sum() == query["c"].isna().sum() > 0
    assert (fast[[3, 7], 0] == enc.schema.columns[0].n_levels).all()  # unseen: code k
    np.testing.assert_array_equal(enc.transform(train), enc.fit_transform(train))
