"""The model file: one zip holding ``arrays.npz`` (plain numeric arrays) and ``meta.json``.

Reading is defensive, because a model file may come from someone else:

* only a regular file is read (never blocking on a FIFO), never past its size at open;
* no pickle: arrays must have a bool, integer or float dtype in native byte order;
* sizes are bounded *before* anything is decompressed: the uncompressed sizes the zip
  directories declare (which also cap what decompression can produce) must add up to at most
  ``max(MIN_BUDGET, MAX_INFLATION x file size)`` bytes, or the caller's ``max_bytes``;
* the CRC-32 of the arrays entry (every array, mapped or not, its header and the arrays'
  directory) and of the metadata must match;
* every ``.npy`` header must agree with its entry's declared size;
* the forest structure is checked by :func:`check_forest` (ids in range, every tree a tree)
  before any Numba kernel sees it, so a crafted file cannot crash or hang a kernel; learners
  check their own arrays with :func:`check_array` and friends;
* every failure is a :class:`ModelFileError` naming the file and the part.

Stored arrays may be memory-mapped; the model then holds a :class:`MappedFile`, which every
query checks first (:func:`check_mapping`), so a file changed in place after ``load`` raises
instead of faulting the process.

Writing is atomic (:func:`write_model_file`): the file is written to a locked temporary file
in the destination's directory, flushed to disk, and renamed over the destination, so a failed
or killed save leaves the previous file as it was; the next save removes the temporary files
of killed saves (:func:`remove_orphans`).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import struct
import tempfile
import weakref
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

FORMAT_VERSION = 3
# 1: before exact leaf cells and component parameters; 1-2: dense categorical pmf tables
READABLE_VERSIONS = (1, 2, 3)
MAX_INFLATION = 200  # uncompressed bytes allowed per byte of file (legit models: ~40)
MIN_BUDGET = 256 * 2**20  # a file may always inflate to this much
ARRAY_KINDS = "biuf"  # bool, signed / unsigned integer, float
ENTRIES = ("arrays.npz", "meta.json")
COMPRESS_LEVEL = 1  # zlib level of the arrays: 2.5x faster to write than 6, ~10% larger
ALIGN = 64  # stored arrays start at multiples of this many bytes (memory mapping)
#: files smaller than this are read into memory even with ``load(mmap=True)``: reading them
#: costs little, and what is read cannot change under a query
MMAP_MIN_BYTES = 64 * 2**20


class ModelFileError(ValueError):
    """A file that is not a well-formed forestgen model (the message says what is wrong)."""


# ---------------------------------------------------------------------------- writing
def to_json(value: Any, where: str) -> Any:
    """``value`` as plain JSON types (numpy scalars and small arrays become Python values).

    Random generators become ``None`` (a fitted model does not need its seed); components
    (splitters, leaf models, ensemblers, samplers, criteria — classes or instances) become
    ``{"__component__": kind, "name": registry name, "params": their parameters}``, so they
    reload identically; an unregistered component raises ``ValueError`` (before anything is
    written). Anything else raises ``TypeError`` naming ``where``.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.generic):
        return to_json(value.item(), where)
    if isinstance(value, (list, tuple, range)):  # a range (RFDE's depth_grid) saves as a list
        return [to_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray) and value.dtype.kind in ARRAY_KINDS and value.ndim <= 1:
        return to_json(value.tolist(), where)
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: to_json(v, f"{where}[{k!r}]") for k, v in value.items()}
        # non-string keys (e.g. integer column labels) keep their type as [key, value] pairs
        return {"__items__": [[to_json(k, f"{where} key"), to_json(v, f"{where}[{k!r}]")]
                              for k, v in value.items()]}
    if isinstance(value, (np.random.Generator, np.random.RandomState, np.random.SeedSequence)):
        return None
    kind = component_kind(value)
    if kind is not None:
        from forestgen import registry

        out = {"__component__": kind, "name": registry.name_of(kind, value)}
        if not isinstance(value, type) and kind != "criterion":
            out["params"] = to_json(value.get_params(), f"{where}.params")
        return out
    raise TypeError(f"parameter {where}={value!r} cannot be saved (type "
                    f"{type(value).__name__}); pass a number, string, list or registry name")


def component_kind(value: Any) -> str | None:
    """Registry kind of a component class / instance / criterion function, else ``None``."""
    from numba.core.registry import CPUDispatcher

    from forestgen.ensemble.base import Ensembler
    from forestgen.leaves.base import LeafModel
    from forestgen.sampling.base import Sampler
    from forestgen.splitters.base import Splitter

    if isinstance(value, CPUDispatcher):
        return "criterion"
    for kind, base in (("splitter", Splitter), ("leaf", LeafModel), ("ensembler", Ensembler),
                       ("sampler", Sampler)):
        if isinstance(value, base) or (isinstance(value, type) and issubclass(value, base)):
            return kind
    return None


def from_json(value: Any) -> Any:
    """Inverse of the dict encoding of :func:`to_json`."""
    if isinstance(value, dict):
        if "__component__" in value:
            from forestgen import registry

            obj = registry.get(value["__component__"], value["name"])
            if "params" in value:
                return obj(**from_json(value["params"]))
            return obj
        if set(value) == {"__items__"}:
            return {_hashable(from_json(k)): from_json(v) for k, v in value["__items__"]}
        return {k: from_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value


def _hashable(k: Any) -> Any:
    return tuple(_hashable(v) for v in k) if isinstance(k, list) else k


def write_model_file(path: str | Path, arrays: dict[str, np.ndarray], meta: dict,
                     compress: bool = True) -> Path:
    """Write ``arrays`` and ``meta`` atomically to ``path`` (arrays deflated at zlib level
    ``COMPRESS_LEVEL``, or stored as they are with ``compress=False``).

    Everything is validated and encoded in memory first; then the bytes go to a temporary
    file in the same directory, which is fsync'ed and renamed over ``path``. On any error the
    temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    for k, v in arrays.items():
        if not isinstance(v, np.ndarray) or v.dtype.kind not in ARRAY_KINDS:
            raise TypeError(f"model array {k!r} must be a numeric numpy array, got "
                            f"{getattr(v, 'dtype', type(v).__name__)}")
    meta_bytes = json.dumps(meta).encode()
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    directory = path.parent
    remove_orphans(path)
    fd, tmp = _locked_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w") as zf:
                # the .npz streams array by array into its entry: no in-memory copy of the file
                outer = _aligned_info("arrays.npz", 0)
                with zf.open(outer, "w", force_zip64=True) as npz, \
                        zipfile.ZipFile(npz, "w", zipfile.ZIP_DEFLATED if compress
                                        else zipfile.ZIP_STORED,
                                        compresslevel=COMPRESS_LEVEL) as inner:
                    base = _data_start(outer, 0)
                    for k, v in arrays.items():
                        info = (f"{k}.npy" if compress
                                else _aligned_info(f"{k}.npy", base + inner.fp.tell()))
                        with inner.open(info, "w", force_zip64=True) as out:
                            np.lib.format.write_array(out, np.ascontiguousarray(v),
                                                      allow_pickle=False)
                zf.writestr("meta.json", meta_bytes)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    return path


def _temp_names(path: Path) -> list[Path]:
    """Temporary files of saves of ``path`` (``.<name>.<8 random characters>.tmp``)."""
    try:
        names = os.listdir(path.parent or ".")
    except OSError:
        return []
    pre = f".{path.name}."
    return [path.parent / n for n in names
            if n.startswith(pre) and _TEMP_NAME.match(n) and len(n) == len(pre) + 12]


def remove_orphans(path: str | Path) -> list[Path]:
    """Remove the temporary files that saves of ``path`` killed midway left behind; returns
    them. A save holds an exclusive ``flock`` on its temporary file until it is renamed, and
    the kernel releases it when the saving process dies, so a file whose lock can be taken is
    an orphan, while another process's save in progress is left alone. (Without ``fcntl``,
    e.g. on Windows, nothing is removed.)"""
    if fcntl is None:
        return []
    removed = []
    for tmp in _temp_names(Path(path)):
        try:
            fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a live save holds it
            os.close(fd)
            continue
        try:
            os.unlink(tmp)
            removed.append(tmp)
        except OSError:
            pass
        finally:
            os.close(fd)  # releases the lock
    return removed


def _locked_temp(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path``, exclusively locked (see :func:`remove_orphans`)."""
    while True:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        if fcntl is None:
            return fd, tmp
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink > 0:
            return fd, tmp
        os.close(fd)  # another save took it for an orphan between creation and lock: retry


def _data_start(info: zipfile.ZipInfo, header_offset: int) -> int:
    """Where the data of an entry written with ``force_zip64`` starts in its zip (local header:
    30 bytes, the name, ``info.extra`` and the 20-byte zip64 field)."""
    return header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 20


def _aligned_info(name: str, header_offset: int) -> zipfile.ZipInfo:
    """A ZipInfo whose padding extra field puts its data at a multiple of ``ALIGN`` bytes in
    the file, so a stored ``.npy`` (whose header pads its data to 64 bytes) can be
    memory-mapped with every array aligned."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o600 << 16
    info.extra = b"\x35\xd9\x00\x00"  # padding block: id 0xD935, then its length
    pad = -_data_start(info, header_offset) % ALIGN
    info.extra = struct.pack("<HH", 0xD935, pad) + b"\x00" * pad
    return info


def _file_mode(path: Path) -> int:
    """Keep an existing file's permissions; a new file gets ``0o666`` minus the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        pass
    umask = 0o022
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
    except OSError:
        pass
    return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- reading
class ModelArrays(dict):
    """The arrays of a model file (a dict); ``source`` is the :class:`MappedFile` they are
    views of when memory-mapped, else ``None``."""

    source: MappedFile | None = None
    mapped: bool = False


class MappedFile:
    """The open file a memory-mapped model's arrays are views of, and its identity when it was
    verified (device, inode, size and modification time in nanoseconds).

    :meth:`check` (one ``fstat``; every query of the model calls it first) raises
    :class:`ModelFileError` if the file changed since: truncated, written in place (``cp``
    onto it), zeroed. A copy of the model (pickle, ``copy.deepcopy``) holds its arrays in
    memory and carries no ``MappedFile``.
    """

    def __init__(self, path: Path, fd: int, identity: tuple):
        self.path, self._fd, self.identity = path, os.dup(fd), identity
        weakref.finalize(self, os.close, self._fd)

    def check(self) -> None:
        try:
            now = _identity(os.fstat(self._fd))
        except OSError as e:  # pragma: no cover - the descriptor is ours
            now = (str(e),)
        if now != self.identity:
            raise ModelFileError(
                f"{self.path}: changed on disk since it was loaded (it is memory-mapped, and "
                f"its size or modification time differs now); nothing was read from it. Load "
                f"it again, or load with mmap=False a file that others may rewrite in place")

    def __reduce__(self):
        return (_no_mapping, ())


def _no_mapping() -> None:
    return None


def _identity(st: os.stat_result) -> tuple:
    # not the status-change time: replacing the path by an atomic save (a rename) changes the
    # old file's link count, and so its ctime, but not its bytes, which the mapping still holds
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


_TEMP_NAME = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")  # write_model_file's temporary files


def _open_regular(path: Path):
    """``(file object, stat)`` of ``path`` opened for reading, refused unless a regular file
    (never blocks: a FIFO is opened non-blocking, then refused)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise ModelFileError(f"{path}: not a regular file (a directory)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a character device"
                    if stat.S_ISCHR(st.st_mode) else "a block device"
                    if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                    else "a directory" if stat.S_ISDIR(st.st_mode) else "not a file")
            raise ModelFileError(f"{path}: not a regular file ({kind}); model files are "
                                 f"regular files")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def read_model_file(path: str | Path, max_bytes: int | None = None,
                    mmap: bool | str = "auto") -> tuple[ModelArrays, dict]:
    """``(arrays, meta)`` of a model file, with sizes bounded before decompression.

    Only a regular file is read, and never past the size it had when opened. ``max_bytes``:
    cap on the total uncompressed size (default: ``max(MIN_BUDGET, MAX_INFLATION x file
    size)``); raise it only for files you trust. The CRC-32 of the arrays entry — every
    array, mapped or not, with its header and the directory of the arrays — and of the
    metadata is verified before anything is returned. ``mmap``: arrays stored uncompressed
    (``save(compress=False)``) are views of a private (copy-on-write) memory map of the file
    instead of read — with ``True`` always, with ``"auto"`` in a file of at least
    ``MMAP_MIN_BYTES`` — and ``arrays.source`` is then the :class:`MappedFile` to check before
    each use; arrays that are compressed, empty or not aligned are read.
    Raises :class:`ModelFileError`, naming the file and the part, for anything that is not a
    well-formed model file; ``OSError`` if the file cannot be opened.
    """
    path = Path(path)
    if mmap not in (True, False, "auto"):
        raise ValueError(f"mmap must be True, False or 'auto', got {mmap!r}")
    if _TEMP_NAME.match(path.name):
        raise ModelFileError(f"{path}: the temporary file of a save that did not finish (the "
                             f"next save of that model removes it), not a model file")
    fh, st = _open_regular(path)
    size = st.st_size
    budget = max(MIN_BUDGET, MAX_INFLATION * size) if max_bytes is None else int(max_bytes)
    part = "the zip directory"
    try:
        # one handle for everything, bounded by the size at open: a file renamed over
        # ``path`` meanwhile is never mixed in, a growing one never read past that size
        with fh, zipfile.ZipFile(_Window(fh, 0, size)) as zf:
            infos = {i.filename: i for i in zf.infolist()}
            if sorted(infos) != sorted(ENTRIES) or len(zf.infolist()) != len(ENTRIES):
                raise ModelFileError(f"{path}: not a forestgen model file (entries "
                                     f"{sorted(infos)[:5]}, expected {list(ENTRIES)})")
            _check_budget(path, sum(i.file_size for i in infos.values()), budget)
            part = "meta.json"
            meta_raw = zf.read("meta.json")
            part = "arrays.npz"
            outer = infos["arrays.npz"]
            if outer.compress_type == zipfile.ZIP_STORED:  # read in place, no copy
                base = _local_data_start(path, fh, outer.header_offset)
                if base + outer.file_size > size:
                    raise ModelFileError(f"{path}: arrays.npz runs past the end of the file")
                if _crc_of(fh, base, outer.file_size) != outer.CRC:
                    raise ModelFileError(f"{path}: arrays.npz fails its checksum (CRC-32): "
                                         f"the file is corrupt")
                mapped = mmap is True or (mmap == "auto" and size >= MMAP_MIN_BYTES)
                arrays = _read_npz(path, _Window(fh, base, outer.file_size),
                                   budget - len(meta_raw), base, fh, mapped)
                if arrays.mapped:
                    arrays.source = MappedFile(path, fh.fileno(), _identity(st))
                    if _identity(os.fstat(fh.fileno())) != arrays.source.identity:
                        arrays.source.check()  # changed while we read it
            else:
                arrays = _read_npz(path, io.BytesIO(zf.read(outer)), budget - len(meta_raw))
        part = "meta.json"
        meta = json.loads(meta_raw)
    except ModelFileError:
        raise
    except (MemoryError, RecursionError) as e:
        raise ModelFileError(f"{path}: {part}: too large or too deeply nested to read "
                             f"({type(e).__name__})") from None
    except Exception as e:  # zipfile, zlib, json and numpy's header parser raise many kinds
        raise ModelFileError(f"{path}: {part}: corrupt or not a forestgen model file "
                             f"({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: meta.json must hold an object")
    if meta.get("format_version") not in READABLE_VERSIONS:
        raise ModelFileError(f"{path}: unsupported model file version "
                             f"{meta.get('format_version')!r} (this forestgen reads "
                             f"{FORMAT_VERSION})")
    return arrays, meta


CRC_CHUNK = 8 * 2**20


def _crc_of(fh, start: int, n: int) -> int:
    """CRC-32 of ``n`` bytes of ``fh`` from ``start`` (read in chunks: a file truncated
    meanwhile gives a short read, never a fault)."""
    crc, buf = 0, bytearray(min(CRC_CHUNK, max(n, 1)))
    view = memoryview(buf)
    fh.seek(start)
    while n > 0:
        got = fh.readinto(view[:min(n, len(buf))])
        if not got:
            raise ModelFileError(f"{getattr(fh, 'name', 'file')}: ends before its arrays do")
        crc = zlib.crc32(view[:got], crc)
        n -= got
    return crc


def _check_budget(path: Path, total: int, budget: int) -> None:
    if total > budget:
        raise ModelFileError(
            f"{path}: declares {total / 2**20:.0f} MiB of uncompressed data, more than the "
            f"{budget / 2**20:.0f} MiB allowed for a file of this size (a decompression bomb?); "
            f"pass max_bytes= to load a large model from a trusted source")


class _Window(io.RawIOBase):
    """The bytes ``[start, start + size)`` of an open file, as a seekable read-only file."""

    def __init__(self, fh, start: int, size: int):
        self._fh, self._start, self._size, self._pos = fh, start, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        ref = (0, self._pos, self._size)[whence]
        self._pos = min(max(0, ref + pos), self._size)
        return self._pos

    def readinto(self, buf) -> int:
        n = min(len(buf), self._size - self._pos)
        if n <= 0:
            return 0
        self._fh.seek(self._start + self._pos)
        got = self._fh.readinto(memoryview(buf)[:n]) or 0
        self._pos += got
        return got


def _local_data_start(path: Path, fh, header_offset: int) -> int:
    """File offset of the data of the zip entry whose local header is at ``header_offset``."""
    fh.seek(header_offset)
    head = fh.read(30)
    if len(head) != 30 or head[:4] != b"PK\x03\x04":
        raise ModelFileError(f"{path}: bad local zip header at {header_offset}")
    n, m = struct.unpack("<HH", head[26:30])
    return header_offset + 30 + n + m


def _read_npz(path: Path, npz, budget: int, base: int | None = None, fh=None,
              mapped: bool = False) -> ModelArrays:
    """Arrays of the ``.npz`` stream ``npz``; ``base``: file offset of its first byte when it
    is stored uncompressed in the open file ``fh`` (its stored arrays are then read straight
    from the file, or memory-mapped if ``mapped``)."""
    out = ModelArrays()
    with zipfile.ZipFile(npz) as inner:
        infos = inner.infolist()
        _check_budget(path, sum(i.file_size for i in infos), budget)
        for info in infos:
            name = info.filename
            key = name[:-4]
            if not name.endswith(".npy") or key in out:
                raise ModelFileError(f"{path}: unexpected or duplicate array entry {name!r}")
            try:
                with inner.open(info) as entry:
                    version = np.lib.format.read_magic(entry)
                    if version == (1, 0):
                        shape, fortran, dtype = np.lib.format.read_array_header_1_0(entry)
                    elif version == (2, 0):
                        shape, fortran, dtype = np.lib.format.read_array_header_2_0(entry)
                    else:
                        raise ModelFileError(f"{path}: array {key!r} has npy version {version}")
                    header = entry.tell()
            except ModelFileError:
                raise
            except Exception as e:
                raise ModelFileError(f"{path}: array {key!r}: malformed .npy header "
                                     f"({type(e).__name__}: {e})") from None
            if dtype.kind not in ARRAY_KINDS or dtype.hasobject or dtype.fields is not None \
                    or not (dtype.isnative or dtype.itemsize == 1):
                raise ModelFileError(f"{path}: array {key!r} has dtype {dtype.str}; model "
                                     f"arrays are native bool, integer or float")
            nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
            if header + nbytes != info.file_size:
                raise ModelFileError(f"{path}: array {key!r} declares shape {shape} "
                                     f"({nbytes} bytes) but its entry holds "
                                     f"{info.file_size - header} bytes")
            order = "F" if fortran else "C"
            start = (None if base is None or info.compress_type != zipfile.ZIP_STORED
                     else _local_data_start(path, fh, base + info.header_offset) + header)
            try:
                if start is not None and nbytes > 0 and start % dtype.alignment == 0:
                    if mapped:
                        out.mapped = True
                        flat = np.memmap(fh, dtype=dtype, mode="c", offset=start,
                                         shape=(nbytes // dtype.itemsize,)).view(np.ndarray)
                    else:
                        raw = bytearray(nbytes)
                        fh.seek(start)
                        if fh.readinto(raw) != nbytes:
                            raise ModelFileError(f"{path}: array {key!r} runs past the end of "
                                                 f"the file")
                        flat = np.frombuffer(raw, dtype=dtype)
                    out[key] = flat.reshape(tuple(shape), order=order)
                else:
                    with inner.open(info) as entry:
                        out[key] = np.lib.format.read_array(entry, allow_pickle=False)
            except ModelFileError:
                raise
            except Exception as e:
                raise ModelFileError(f"{path}: array {key!r}: cannot be read "
                                     f"({type(e).__name__}: {e})") from None
    return out


# ---------------------------------------------------------------------------- structure
_FOREST_DTYPES = {
    "feature": np.int32, "threshold": np.float64, "nan_left": np.uint8, "left": np.int32,
    "right": np.int32, "cat_off": np.int64, "cat_left": np.uint8, "node_leaf": np.int32,
    "node_offsets": np.int64, "leaf_offsets": np.int64, "n_levels": np.int32,
    "node_value": np.float64,
}


def check_forest(forest: Any, n_columns: int, name: str = "forest") -> None:
    """Raise ``ValueError`` unless ``forest`` (a ``ForestArrays``) is a well-formed forest.

    Checks dtypes and shapes, tree and leaf offsets, that feature ids and child ids are in
    range, that nodes are in topological order (children after their parent, inside their
    tree) with exactly one parent each — so every tree is a tree: acyclic and connected —,
    that leaf ids are a permutation consistent with ``leaf_offsets``, and that nominal split
    level sets lie inside ``cat_left``. Cost: a few vectorised passes over the node arrays.
    """
    for key, dt in _FOREST_DTYPES.items():
        a = getattr(forest, key)
        want_ndim = 2 if key == "node_value" else 1
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != want_ndim:
            raise ValueError(f"{name}.{key} must be a {want_ndim}-D {np.dtype(dt).name} array, "
                             f"got {getattr(a, 'dtype', type(a).__name__)} with shape "
                             f"{getattr(a, 'shape', None)}")
    feature, left, right = forest.feature, forest.left, forest.right
    N = len(feature)
    for key in ("threshold", "nan_left", "left", "right", "cat_off", "node_leaf"):
        if len(getattr(forest, key)) != N:
            raise ValueError(f"{name}.{key} has {len(getattr(forest, key))} entries, "
                             f"{name}.feature {N}")
    if len(forest.n_levels) != n_columns:
        raise ValueError(f"{name}.n_levels has {len(forest.n_levels)} entries for "
                         f"{n_columns} columns")
    no, lo = forest.node_offsets, forest.leaf_offsets
    if len(no) < 2 or len(lo) != len(no):
        raise ValueError(f"{name}.node_offsets / leaf_offsets must have n_trees + 1 >= 2 entries")
    if no[0] != 0 or no[-1] != N or np.any(np.diff(no) < 1):
        raise ValueError(f"{name}.node_offsets must rise from 0 to the node count, >= 1 node "
                         "per tree")
    is_leaf = feature < 0
    L = int(is_leaf.sum())
    if lo[0] != 0 or lo[-1] != L or np.any(np.diff(lo) < 1):
        raise ValueError(f"{name}.leaf_offsets must rise from 0 to the leaf count, >= 1 leaf "
                         "per tree")
    if np.any(feature < -1) or np.any(feature >= n_columns):
        raise ValueError(f"{name}.feature holds ids outside -1..{n_columns - 1}")
    if np.any(forest.nan_left > 1) or np.any(forest.cat_left > 1):
        raise ValueError(f"{name}.nan_left / cat_left must hold 0 or 1")
    tree = np.repeat(np.arange(len(no) - 1), np.diff(no))
    end = no[1:][tree]
    node = np.arange(N)
    inner = ~is_leaf
    for key, child in (("left", left), ("right", right)):
        if np.any(child[is_leaf] != -1):
            raise ValueError(f"{name}.{key} must be -1 at leaves")
        c = child[inner]
        if np.any(c <= node[inner]) or np.any(c >= end[inner]):
            raise ValueError(f"{name}.{key} holds a child id outside its tree or not after "
                             f"its parent (a cycle or a dangling id)")
    n_parents = np.bincount(np.concatenate([left[inner], right[inner]]), minlength=N)
    want = np.ones(N, np.int64)
    want[no[:-1]] = 0
    if not np.array_equal(n_parents, want):
        raise ValueError("every node but a tree's root must have exactly one parent")
    nl = forest.node_leaf
    if np.any(nl[inner] != -1):
        raise ValueError(f"{name}.node_leaf must be -1 at internal nodes")
    leaf_ids = nl[is_leaf].astype(np.int64)
    lt = np.repeat(np.arange(len(lo) - 1), np.diff(lo))
    if (np.any(leaf_ids < 0) or np.any(leaf_ids >= L)
            or not np.array_equal(np.bincount(leaf_ids, minlength=L), np.ones(L, np.int64))
            or not np.array_equal(lt[leaf_ids], tree[is_leaf])):
        raise ValueError(f"{name}.node_leaf must number each tree's leaves inside its "
                         "leaf_offsets range, each id once")
    if np.any(forest.n_levels < 0):
        raise ValueError(f"{name}.n_levels must be >= 0")
    off = forest.cat_off
    nom = inner & (off >= 0)
    if np.any(off < -1):
        raise ValueError(f"{name}.cat_off must be -1 or a non-negative offset")
    if nom.any():
        k = forest.n_levels[feature[nom]].astype(np.int64)
        if np.any(k <= 0) or np.any(off[nom] > len(forest.cat_left) - k):  # (no overflow)
            raise ValueError(f"{name}.cat_off / n_levels point outside {name}.cat_left")
    nv = forest.node_value
    if nv.size and nv.shape[0] != N:
        raise ValueError(f"{name}.node_value has {nv.shape[0]} rows for {N} nodes")
    lo_c, hi_c, mask_c = forest.cell_lower, forest.cell_upper, forest.cell_mask
    if lo_c.size or hi_c.size:
        if (lo_c.dtype != np.float64 or hi_c.dtype != np.float64 or lo_c.shape != (L, n_columns)
                or hi_c.shape != lo_c.shape or np.isnan(lo_c).any() or np.isnan(hi_c).any()
                or np.any(hi_c < lo_c)):
            raise ValueError(f"{name}.cell_lower / cell_upper must be float64 [{L}, {n_columns}] "
                             "with lower <= upper")
        if mask_c.dtype != np.bool_ or mask_c.ndim != 2 or mask_c.shape[0] != L:
            raise ValueError(f"{name}.cell_mask must be a bool [{L}, levels] array")
    lm = forest.leaf_mass
    if lm.size and (lm.dtype != np.float64 or lm.shape != (L,) or not np.all(lm >= 0)):
        raise ValueError(f"{name}.leaf_mass must be {L} non-negative float64 masses")


def check_tree_weights(name: str, log_weight: np.ndarray, leaf_offsets: np.ndarray) -> None:
    """Raise ``ValueError`` unless every tree has a leaf of finite log-weight (a tree whose
    leaves all weigh ``-inf`` would score every row ``-inf``)."""
    lo = np.asarray(leaf_offsets, np.int64)
    finite = np.isfinite(log_weight)
    per_tree = np.add.reduceat(finite.astype(np.int64), lo[:-1]) if len(log_weight) else \
        np.zeros(len(lo) - 1, np.int64)
    bad = np.flatnonzero(per_tree == 0)
    if bad.size:
        raise ValueError(f"{name}: tree {int(bad[0])} has no leaf of finite weight "
                         f"({bad.size} such trees); every tree needs one")


def attach_mapping(model: Any, arrays: dict) -> None:
    """Record on a loaded ``model`` the :class:`MappedFile` its arrays are views of (if any),
    for :func:`check_mapping`."""
    source = getattr(arrays, "source", None)
    if source is not None:
        model.__dict__["_mapped_file"] = source


def check_mapping(model: Any) -> None:
    """Raise :class:`ModelFileError` if ``model`` is memory-mapped from a file that changed
    on disk since it was loaded (one ``fstat``)."""
    source = model.__dict__.get("_mapped_file")
    if source is not None:
        source.check()


def check_array(name: str, a: Any, kinds: str, shape: tuple | None = None, *, ndim: int = 1,
                finite: bool = False, nan: bool = False, low: float | None = None,
                high: float | None = None) -> np.ndarray:
    """Raise ``ValueError`` naming ``name`` unless ``a`` is an array of a dtype kind in
    ``kinds`` (``"b"``, ``"i"``, ``"u"``, ``"f"``) with ``shape`` (``None`` entries: any
    length) or ``ndim`` dimensions, whose values are finite (``finite``; NaN too if ``nan``),
    not NaN (unless ``nan``) and within ``[low, high]``; returns ``a``. The structure check of
    a learner's extra arrays."""
    if not isinstance(a, np.ndarray) or a.dtype.kind not in kinds:
        raise ValueError(f"{name} must be an array of kind {kinds!r}, got "
                         f"{getattr(a, 'dtype', type(a).__name__)}")
    want = len(shape) if shape is not None else ndim
    if a.ndim != want or (shape is not None and any(
            s is not None and s != n for s, n in zip(shape, a.shape))):
        raise ValueError(f"{name} has shape {a.shape}, expected "
                         f"{shape if shape is not None else f'{ndim} dimension(s)'}")
    if a.size and a.dtype.kind == "f":
        bad = np.isinf(a) if finite else np.zeros(a.shape, bool)
        if not nan:
            bad |= np.isnan(a)
        if bad.any():
            raise ValueError(f"{name} must hold finite numbers{' or NaN' if nan else ''}")
    if a.size and low is not None and np.any(a < low):
        raise ValueError(f"{name} holds values below {low}")
    if a.size and high is not None and np.any(a > high):
        raise ValueError(f"{name} holds values above {high}")
    return a


def check_box(prefix: str, lo: Any, hi: Any, d: int) -> None:
    """A bounding box read from a file: two finite float arrays of ``d`` entries, lo <= hi."""
    check_array(f"{prefix}box_lo", lo, "f", (d,), finite=True)
    check_array(f"{prefix}box_hi", hi, "f", (d,), finite=True)
    if np.any(hi < lo):
        raise ValueError(f"{prefix}box_hi is below {prefix}box_lo")


def check_count(name: str, value: Any, low: int = 0) -> int:
    """An integer count read from a model file's metadata."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value
