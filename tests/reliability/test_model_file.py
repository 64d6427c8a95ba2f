"""Loading a model file someone sent you: crafted files are refused with an error naming what is
wrong, before any Numba kernel sees them (old main: segfaults, hangs, silently different models,
2 GB allocations)."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest

from forestgen.base import GenerativeForest
from forestgen.modelfile import ModelFileError


def _internal(arrays) -> np.ndarray:
    return np.nonzero(arrays["forest.feature"] >= 0)[0]


def test_valid_file_round_trips(tmp_path, arf_small, mixed_small):
    back = GenerativeForest.load(arf_small.save(tmp_path / "m.forestgen"))
    np.testing.assert_array_equal(back.log_prob(mixed_small), arf_small.log_prob(mixed_small))


def _child_out_of_range(a, m):
    a["forest.left"][_internal(a)[0]] = 10**6


def _self_loop(a, m):
    i = _internal(a)[0]
    a["forest.left"][i] = i


def _cycle(a, m):
    # a node deeper in tree 0 points back to the root: a cycle (old main: apply loops forever)
    inner = _internal(a)
    a["forest.right"][inner[1]] = inner[0]


def _child_in_other_tree(a, m):
    a["forest.right"][_internal(a)[0]] = a["forest.node_offsets"][1] + 1


def _feature_out_of_range(a, m):
    a["forest.feature"][_internal(a)[0]] = 7


def _duplicate_leaf_id(a, m):
    leaves = np.nonzero(a["forest.feature"] < 0)[0]
    a["forest.node_leaf"][leaves[1]] = a["forest.node_leaf"][leaves[0]]


def _leaf_id_out_of_range(a, m):
    leaves = np.nonzero(a["forest.feature"] < 0)[0]
    a["forest.node_leaf"][leaves[0]] = 10**6


def _cat_off_past_end(a, m):
    nominal = np.nonzero((a["forest.feature"] >= 0) & (a["forest.cat_off"] >= 0))[0]
    assert len(nominal), "fixture should have a nominal split"
    a["forest.cat_off"][nominal[0]] = len(a["forest.cat_left"])


def _cat_off_overflow(a, m):
    """An offset whose sum with the level count wraps around int64 (a segfault at the first
    query when the check added them)."""
    nominal = np.nonzero((a["forest.feature"] >= 0) & (a["forest.cat_off"] >= 0))[0]
    a["forest.cat_off"][nominal[0]] = np.iinfo(np.int64).max


def _bad_dtype_name(a, m):
    m["schema"]["columns"][0]["dtype"] = "zz"


def _null_dtype(a, m):
    m["schema"]["columns"][1]["dtype"] = None


def _null_leaf_floor(a, m):
    m["leaves"][2]["params"]["floor"] = None


def _node_offsets_wrong(a, m):
    a["forest.node_offsets"][-1] += 5


def _wrong_dtype(a, m):
    a["forest.left"] = a["forest.left"].astype(np.int64)


def _short_leaf_array(a, m):
    a["leaf0.mu_"] = a["leaf0.mu_"][:-1]


def _nan_sigma(a, m):
    a["leaf1.sigma_"][0] = np.nan


def _negative_pmf(a, m):
    a["leaf2.prob_"][0] = -1.0


def _missing_leaf_array(a, m):
    del a["leaf1.sigma_"]


def _dropped_category(a, m):
    m["schema"]["columns"][2]["categories"].pop()


def _dropped_column(a, m):
    m["schema"]["columns"].pop()


def _leaf_weight_shape(a, m):
    a["leaf_log_weight"] = a["leaf_log_weight"][:3]


def _missing_rate_shape(a, m):
    a["missing_rate"] = a["missing_rate"][:, :0]


def _missing_parent_cycle(a, m):
    a["missing_parent"] = np.zeros(len(a["missing_cols"]), np.int64)  # column 0 its own parent


def _stray_array(a, m):
    a["leaf9.mu_"] = np.zeros(3)


def _shadow_method(a, m):
    a["leaf0.log_prob"] = np.zeros(len(a["leaf_log_weight"]))


def _object_array(a, m):
    a["leaf_log_weight"] = np.array([{"payload": 1}], dtype=object)


def _unknown_learner(a, m):
    m["learner"] = "nope"


def _unknown_param(a, m):
    m["params"]["bogus"] = 1


def _unknown_leaf(a, m):
    m["leaves"][0]["name"] = "nope"


def _numeric_leaf_on_discrete_column(a, m):
    m["leaves"][2] = dict(m["leaves"][0])


def _version(a, m):
    m["format_version"] = 99


CASES = {
    "child out of range": (_child_out_of_range, "child id"),
    "self loop": (_self_loop, "child id"),
    "cycle": (_cycle, "child id"),
    "child in another tree": (_child_in_other_tree, "child id"),
    "feature out of range": (_feature_out_of_range, "forest.feature"),
    "duplicate leaf id": (_duplicate_leaf_id, "node_leaf"),
    "leaf id out of range": (_leaf_id_out_of_range, "node_leaf"),
    "nominal offset past cat_left": (_cat_off_past_end, "cat_left"),
    "nominal offset overflowing int64": (_cat_off_overflow, "cat_left"),
    "dtype name": (_bad_dtype_name, "'x'.*dtype 'zz'"),
    "null dtype": (_null_dtype, "'y'.*dtype must be"),
    "null leaf parameter": (_null_leaf_floor, "'c'.*floor"),
    "node offsets": (_node_offsets_wrong, "node_offsets"),
    "dtype": (_wrong_dtype, "forest.left must be a 1-D int32"),
    "short leaf array": (_short_leaf_array, "'x'.*mu_"),
    "NaN scale": (_nan_sigma, "'y'.*sigma_"),
    "negative pmf": (_negative_pmf, "'c'.*prob_"),
    "missing leaf array": (_missing_leaf_array, "'y'.*needs arrays"),
    "dropped category": (_dropped_category, "'c'.*3 levels"),
    "dropped column": (_dropped_column, "3 leaf models for 2 columns"),
    "leaf weight shape": (_leaf_weight_shape, "leaf_log_weight"),
    "missing-rate shape": (_missing_rate_shape, "missing_rate"),
    "missing-parent cycle": (_missing_parent_cycle, "missing_parent"),
    "stray array": (_stray_array, "unexpected arrays"),
    "array shadowing a method": (_shadow_method, "needs arrays.*log_prob"),
    "pickled object array": (_object_array, "dtype"),
    "unknown learner": (_unknown_learner, "unknown learner"),
    "unknown parameter": (_unknown_param, "bogus"),
    "unknown leaf model": (_unknown_leaf, "nope"),
    "leaf kind mismatch": (_numeric_leaf_on_discrete_column, "'c'.*numeric"),
    "format version": (_version, "version 99"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_crafted_file_is_refused(crafted, case):
    edit, message = CASES[case]
    path = crafted(edit)
    with pytest.raises(ModelFileError, match=message):
        GenerativeForest.load(path)


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04" + b"\0" * 40])
def test_garbage_is_refused(tmp_path, content):
    path = tmp_path / "g.forestgen"
    path.write_bytes(content)
    with pytest.raises(ModelFileError, match="not a forestgen model file"):
        GenerativeForest.load(path)


def test_truncated_file_is_refused(tmp_path, arf_small):
    raw = arf_small.save(tmp_path / "m.forestgen").read_bytes()
    for cut in (len(raw) // 3, len(raw) - 30):
        (tmp_path / "t.forestgen").write_bytes(raw[:cut])
        with pytest.raises(ModelFileError):
            GenerativeForest.load(tmp_path / "t.forestgen")


def test_bit_flip_is_refused_or_identical(tmp_path, arf_small, mixed_small):
    """Flipping any one of a sample of bytes gives an error or (if it hits padding) the same
    model — never a crash or a silently different model."""
    raw = bytearray(arf_small.save(tmp_path / "m.forestgen").read_bytes())
    want = arf_small.log_prob(mixed_small)
    rng = np.random.default_rng(0)
    for pos in rng.choice(len(raw), size=25, replace=False):
        bad = bytearray(raw)
        bad[pos] ^= 0xFF
        (tmp_path / "f.forestgen").write_bytes(bytes(bad))
        try:
            back = GenerativeForest.load(tmp_path / "f.forestgen")
        except ModelFileError:
            continue
        np.testing.assert_array_equal(back.log_prob(mixed_small), want)


def _bomb_npy(zf: zipfile.ZipFile, name: str, n_bytes: int) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (n_bytes // 8,)})
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    chunk = bytes(2**22)
    with zf.open(info, "w", force_zip64=True) as fh:
        fh.write(header.getvalue())
        for _ in range(n_bytes // len(chunk)):
            fh.write(chunk)


@pytest.mark.parametrize("layer", ["inner", "outer"])
def test_decompression_bomb_is_refused_cheaply(tmp_path, arf_small, layer):
    """300 MiB of zeros in a file of about 0.3 MiB: refused from the zip directories alone,
    without inflating anything (peak Python allocation stays far below the payload)."""
    good = arf_small.save(tmp_path / "good.forestgen")
    path = tmp_path / "bomb.forestgen"
    with zipfile.ZipFile(good) as src:
        npz, meta = src.read("arrays.npz"), src.read("meta.json")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zi:
        with zipfile.ZipFile(io.BytesIO(npz)) as zs:
            for info in zs.infolist():
                zi.writestr(info, zs.read(info))
        if layer == "inner":
            _bomb_npy(zi, "extra.bomb.npy", 300 * 2**20)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("arrays.npz", inner.getvalue())
        if layer == "outer":
            info = zipfile.ZipInfo("meta.json")
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w", force_zip64=True) as fh:
                fh.write(meta[:-1] + b', "pad": "')
                for _ in range(75):
                    fh.write(b" " * 2**22)
                fh.write(b'"}')
        else:
            zf.writestr("meta.json", meta)
    assert path.stat().st_size < 2 * 2**20
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError, match="decompression bomb"):
            GenerativeForest.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20


def test_npy_header_lying_about_its_size(tmp_path, arf_small):
    good = arf_small.save(tmp_path / "good.forestgen")
    with zipfile.ZipFile(good) as src:
        npz, meta = src.read("arrays.npz"), src.read("meta.json")
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        hdr, {"descr": "<f8", "fortran_order": False, "shape": (10**9,)})
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zi, zipfile.ZipFile(io.BytesIO(npz)) as zs:
        for info in zs.infolist():
            zi.writestr(info, zs.read(info))
        zi.writestr("extra.big.npy", hdr.getvalue() + bytes(8))
    with zipfile.ZipFile(tmp_path / "lie.forestgen", "w") as zf:
        zf.writestr("arrays.npz", inner.getvalue())
        zf.writestr("meta.json", meta)
    with pytest.raises(ModelFileError, match="declares shape"):
        GenerativeForest.load(tmp_path / "lie.forestgen")


def test_max_bytes_caps_and_raises_the_budget(tmp_path, arf_small):
    path = arf_small.save(tmp_path / "m.forestgen")
    with pytest.raises(ModelFileError, match="max_bytes"):
        GenerativeForest.load(path, max_bytes=1000)
    assert GenerativeForest.load(path, max_bytes=10**9).forest_.n_leaves == \
        arf_small.forest_.n_leaves


def test_meta_json_nesting_bomb(tmp_path, arf_small):
    good = arf_small.save(tmp_path / "good.forestgen")
    with zipfile.ZipFile(good) as src:
        npz = src.read("arrays.npz")
    with zipfile.ZipFile(tmp_path / "deep.forestgen", "w") as zf:
        zf.writestr("arrays.npz", npz)
        zf.writestr("meta.json", "[" * 200_000 + "]" * 200_000)
    with pytest.raises(ModelFileError):
        GenerativeForest.load(tmp_path / "deep.forestgen")


def test_meta_not_an_object(tmp_path, crafted):
    path = crafted(lambda a, m: None)
    with zipfile.ZipFile(path) as src:
        npz = src.read("arrays.npz")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("arrays.npz", npz)
        zf.writestr("meta.json", json.dumps([1, 2]))
    with pytest.raises(ModelFileError, match="object"):
        GenerativeForest.load(path)


# ---------------------------------------------------------------------------- issue 34
def _all_inf_weights(a, m):
    a["leaf_log_weight"][:] = -np.inf


def _one_tree_all_inf(a, m):
    lo = a["forest.leaf_offsets"]
    a["leaf_log_weight"][lo[0]:lo[1]] = -np.inf


CASES_34 = {
    "all leaf weights -inf": (_all_inf_weights, "leaf_log_weight.*finite"),
    "one tree's leaf weights -inf": (_one_tree_all_inf, "leaf_log_weight.*tree 0"),
}


@pytest.mark.parametrize("case", list(CASES_34))
def test_crafted_weights_are_refused(crafted, case):
    edit, message = CASES_34[case]
    with pytest.raises(ModelFileError, match=message):
        GenerativeForest.load(crafted(edit))


def _load_in_child(path, timeout=60):
    """``load(path)`` in a subprocess capped at 2 GiB of memory: (exit code, last line)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    code = ("import resource, sys\n"
            "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
            "from forestgen.base import GenerativeForest\n"
            "from forestgen.modelfile import ModelFileError\n"
            "try:\n"
            "    GenerativeForest.load(sys.argv[1])\n"
            "    print('loaded')\n"
            "except ModelFileError as e:\n"
            "    print('ModelFileError:', e)\n")
    env = dict(os.environ, PYTHONPATH=str(repo))
    try:
        p = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return "timeout", ""
    lines = (p.stdout or p.stderr).strip().splitlines()
    return p.returncode, lines[-1] if lines else ""


@pytest.mark.parametrize("kind", ["/dev/zero", "symlink to /dev/zero", "FIFO", "directory"])
def test_only_regular_files_are_read(tmp_path, kind):
    """Refused at once (old main: /dev/zero read until memory ran out, a FIFO blocked)."""
    import os

    path = {"/dev/zero": "/dev/zero", "directory": str(tmp_path)}.get(kind)
    if kind == "symlink to /dev/zero":
        path = tmp_path / "m.fgm"
        path.symlink_to("/dev/zero")
    elif kind == "FIFO":
        path = tmp_path / "m.fgm"
        os.mkfifo(path)
    rc, line = _load_in_child(path)
    assert rc == 0 and line.startswith("ModelFileError") and "regular file" in line, (rc, line)


def _flip_zip_flags(raw: bytes, entry: bytes) -> bytes:
    """Set the 'encrypted' bit of ``entry``'s central-directory record."""
    at = raw.rfind(b"PK\x01\x02", 0, raw.rfind(entry))
    bad = bytearray(raw)
    bad[at + 8] |= 0x01
    return bytes(bad)


def test_damaged_zip_flags_are_model_file_errors(tmp_path, arf_small):
    """Old main: ``RuntimeError: File ... is encrypted`` escaped."""
    raw = arf_small.save(tmp_path / "m.fgm").read_bytes()
    (tmp_path / "f.fgm").write_bytes(_flip_zip_flags(raw, b"meta.json"))
    with pytest.raises(ModelFileError, match="f.fgm.*meta.json"):
        GenerativeForest.load(tmp_path / "f.fgm")


@pytest.mark.parametrize("header", [b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,",
                                    b"{'descr': '<f8', 'fortran_order': False, 'shape': ((",
                                    b"\xff\xfe"])
def test_damaged_npy_header_is_a_model_file_error(tmp_path, arf_small, header):
    """Old main: ``tokenize.TokenError`` / ``SyntaxError`` escaped from numpy's header parser."""
    good = arf_small.save(tmp_path / "good.fgm")
    with zipfile.ZipFile(good) as src:
        npz, meta = src.read("arrays.npz"), src.read("meta.json")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zi, zipfile.ZipFile(io.BytesIO(npz)) as zs:
        for info in zs.infolist():
            data = zs.read(info)
            if info.filename == "leaf_log_weight.npy":
                hlen = int.from_bytes(data[8:10], "little")
                body = header.ljust(hlen - 1, b" ") + b"\n"
                data = data[:10] + body[:hlen] + data[10 + hlen:]
            zi.writestr(info, data)
    with zipfile.ZipFile(tmp_path / "h.fgm", "w") as zf:
        zf.writestr("arrays.npz", inner.getvalue())
        zf.writestr("meta.json", meta)
    with pytest.raises(ModelFileError, match="h.fgm.*leaf_log_weight"):
        GenerativeForest.load(tmp_path / "h.fgm")


@pytest.mark.parametrize("mmap", [True, False])
def test_flipped_byte_in_a_stored_array_is_refused(tmp_path, mixed_small, mmap):
    """Old main: arrays over ~4 KiB of a stored file were mapped without their CRC checked, so
    a flipped byte loaded as a different model."""
    import forestgen.modelfile as mf
    from forestgen import ARF

    model = ARF(n_trees=20, min_node_size=2, random_state=0, n_jobs=1).fit(mixed_small)
    path = model.save(tmp_path / "m.fgm", compress=False)
    raw = bytearray(path.read_bytes())
    arrays, _ = mf.read_model_file(path, mmap=False)
    target = arrays["leaf0.mu_"].tobytes()
    assert len(target) > 4096
    at = bytes(raw).find(target)
    assert at > 0
    raw[at + len(target) // 2] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="m.fgm.*(checksum|CRC)"):
        GenerativeForest.load(path, mmap=mmap)


def test_temporary_files_of_killed_saves_are_cleaned_and_never_loaded(tmp_path, arf_small):
    """A save killed midway leaves ``.<name>.<random>.tmp``; the next save of that name removes
    it, and loading one is refused (old main: 12 kills left 12 files)."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    dst = tmp_path / "dst.fgm"
    code = ("import sys, forestgen.modelfile as mf\n"
            "from forestgen.base import GenerativeForest\n"
            "m = GenerativeForest.load(sys.argv[1])\n"
            "real = mf.os.fsync\n"
            "def stop(fd):\n"
            "    real(fd); print('written', flush=True); import time; time.sleep(60)\n"
            "mf.os.fsync = stop\n"
            "m.save(sys.argv[2])\n")
    src = arf_small.save(tmp_path / "src.fgm")
    env = dict(os.environ, PYTHONPATH=str(repo))
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-c", code, str(src), str(dst)],
                             stdout=subprocess.PIPE, env=env)
        try:
            assert p.stdout.readline().strip() == b"written"
        finally:
            p.kill()
            p.wait(timeout=60)
    orphans = sorted(tmp_path.glob(".dst.fgm.*.tmp"))
    assert len(orphans) == 1  # each killed save removed the orphan of the one before
    with pytest.raises(ModelFileError, match="temporary file"):
        GenerativeForest.load(orphans[0])  # complete, but never renamed: not a model
    time.sleep(0.01)
    arf_small.save(dst)
    assert sorted(tmp_path.glob("*.tmp")) + sorted(tmp_path.glob(".*.tmp")) == []
    np.testing.assert_array_equal(GenerativeForest.load(dst).leaf_log_weight_,
                                  arf_small.leaf_log_weight_)


def test_nrgboost_save_takes_compress(tmp_path, all_models, mixed_small):
    """Old main: ``NRGBoost.save() got an unexpected keyword argument 'compress'``."""
    model = all_models["NRGBoost"]
    stored = model.save(tmp_path / "s.fgm", compress=False)
    deflated = model.save(tmp_path / "d.fgm")
    assert stored.stat().st_size > deflated.stat().st_size
    for path in (stored, deflated):
        back = GenerativeForest.load(path)
        np.testing.assert_array_equal(back.log_prob(mixed_small), model.log_prob(mixed_small))


@pytest.mark.parametrize("compress", [True, False])
def test_flipped_byte_in_an_array_name_is_refused(tmp_path, compress):
    """One flipped byte in the arrays' zip directory renamed EOGT's optional
    ``region_atoms.observed``: old main loaded the file without it (its answers changed);
    the checksum of the arrays entry now covers the directory."""
    from tests.reliability.conftest import fit_fast
    from tests.reliability.fuzz_model_files import corpus_table

    model = fit_fast("EOGT", corpus_table())
    assert len(model.region_atoms_.columns)  # the zero-inflated column has atoms
    raw = bytearray(model.save(tmp_path / "m.fgm", compress=compress).read_bytes())
    name = b"region_atoms.observed.npy"
    at = bytes(raw).rfind(name)  # its record in the central directory
    raw[at + len(name) - 5] ^= 0x01  # 'observed' -> 'observee'
    (tmp_path / "f.fgm").write_bytes(bytes(raw))
    with pytest.raises(ModelFileError, match="f.fgm.*(checksum|CRC)"):
        GenerativeForest.load(tmp_path / "f.fgm")
