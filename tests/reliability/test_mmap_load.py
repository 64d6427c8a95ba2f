"""Uncompressed model files load memory-mapped (issue 15): the stored arrays are aligned
views of the file, the model answers as the one read into memory, and compressed files (or
``mmap=False``) are read as before."""

from __future__ import annotations

import mmap

import numpy as np
import pandas as pd
import pytest

import forestgen.modelfile as mf
from forestgen.base import GenerativeForest
from forestgen.families.mixture.arf import ARF


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"x": rng.normal(size=n), "k": rng.integers(0, 5, n),
                       "c": pd.Categorical(rng.choice(list("abc"), n))})
    return ARF(n_trees=3, random_state=0, n_jobs=1).fit(df), df


def _mapped(a: np.ndarray) -> bool:
    b = a
    while b is not None and not isinstance(b, mmap.mmap):
        b = getattr(b, "base", None)
    return isinstance(b, mmap.mmap)


def test_stored_file_is_memory_mapped_and_answers_the_same(fitted, tmp_path, monkeypatch):
    model, df = fitted
    monkeypatch.setattr(mf, "MMAP_MIN_BYTES", 0)  # "auto" maps this small file
    q = df.head(40).copy()
    q.loc[q.index[::4], "x"] = np.nan
    path = model.save(tmp_path / "m.fgm", compress=False)
    arrays, _ = mf.read_model_file(path, mmap=True)
    big = {k: v for k, v in arrays.items() if v.size}
    assert big and all(_mapped(v) for v in big.values())
    assert all(v.ctypes.data % v.dtype.alignment == 0 for v in big.values())
    loaded = GenerativeForest.load(path)
    assert _mapped(loaded.forest_.threshold)
    np.testing.assert_array_equal(loaded.log_prob(q), model.log_prob(q))
    pd.testing.assert_frame_equal(loaded.sample(30, random_state=1),
                                  model.sample(30, random_state=1))
    # saving another model over the path (atomic rename) leaves the mapped model intact
    other = ARF(n_trees=2, random_state=1, n_jobs=1).fit(df)
    other.save(path, compress=False)
    np.testing.assert_array_equal(loaded.log_prob(q), model.log_prob(q))
    model.save(path, compress=False)
    # copy-on-write: writing to a loaded array leaves the file as it was
    loaded.leaf_log_weight_[:] = 0.0
    again = GenerativeForest.load(path, mmap=False)
    assert not _mapped(again.forest_.threshold)
    np.testing.assert_array_equal(again.leaf_log_weight_, model.leaf_log_weight_)
    # under MMAP_MIN_BYTES "auto" reads the file; mmap=True maps it all the same
    monkeypatch.setattr(mf, "MMAP_MIN_BYTES", path.stat().st_size + 1)
    small = GenerativeForest.load(path)
    assert not _mapped(small.forest_.threshold)
    np.testing.assert_array_equal(small.log_prob(q), model.log_prob(q))
    assert _mapped(GenerativeForest.load(path, mmap=True).forest_.threshold)


def test_mapped_model_pickles_as_a_plain_model(fitted, tmp_path):
    """A copy of a mapped model holds its arrays in memory: it does not check the file."""
    import copy
    import pickle

    model, df = fitted
    path = model.save(tmp_path / "m.fgm", compress=False)
    loaded = GenerativeForest.load(path, mmap=True)
    copies = [pickle.loads(pickle.dumps(loaded)), copy.deepcopy(loaded)]
    path.write_bytes(b"\0" * path.stat().st_size)  # the mapped original now refuses
    with pytest.raises(mf.ModelFileError, match="changed on disk"):
        loaded.log_prob(df.head(5))
    for c in copies:
        assert not _mapped(c.forest_.threshold)
        np.testing.assert_array_equal(c.log_prob(df.head(5)), model.log_prob(df.head(5)))


def test_compressed_or_unaligned_files_are_read(fitted, tmp_path, monkeypatch):
    model, df = fitted
    arrays, _ = mf.read_model_file(model.save(tmp_path / "z.fgm"))
    assert not any(_mapped(v) for v in arrays.values())
    monkeypatch.setattr(mf, "ALIGN", 1)  # no padding: some arrays start unaligned
    path = model.save(tmp_path / "u.fgm", compress=False)
    monkeypatch.undo()
    arrays, _ = mf.read_model_file(path)
    for k, v in arrays.items():
        assert v.ctypes.data % v.dtype.alignment == 0, k
    loaded = GenerativeForest.load(path)
    np.testing.assert_array_equal(loaded.log_prob(df.head(20)), model.log_prob(df.head(20)))
