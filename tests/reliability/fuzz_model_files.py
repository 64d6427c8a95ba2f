"""Fuzzing model files: every mutant of a model file is refused with a ``ModelFileError``, or
loads and answers exactly as the original — never a crash, a hang, another exception or a
silently different model.

The corpus is one small model of every learner, saved compressed and stored
(``compress=False``, loaded memory-mapped). Mutant ``i`` mutates corpus file ``i mod n`` with a
generator seeded by ``(seed, i)``: bit flips and random bytes anywhere, flips aimed at the zip
and ``.npy`` headers, overwritten / zeroed spans, truncation, insertion, deletion and
transposition of spans. A worker subprocess loads each mutant and asks the original's queries
(``log_prob`` of fixed rows, ``sample`` with a seed, GeF's ``predict_proba``); the driver reads
one line per mutant under a per-mutant timeout, so a crash (a signal) or a hang is charged to
the mutant that caused it, and the worker is restarted after it.

CI runs a small budget (``tests/reliability/test_fuzz.py``; ``FORESTGEN_FUZZ_MUTANTS`` raises
it). The big run::

    python tests/reliability/fuzz_model_files.py --mutants 5000 \
        --out benchmarks/results/fuzz_model_files.json

prints the counts per learner, format and outcome and keeps failing mutants (``--keep DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[2]
OK = ("refused at load", "refused at query", "identical")
CRAFTED_OK = OK + ("answers differ",)  # a crafted file may be another valid model
STRATEGIES = ("bit flip", "random byte", "header flip", "span overwrite", "span zero",
              "truncate", "insert", "delete", "transpose")


# ---------------------------------------------------------------------------- corpus
def build_corpus(directory: Path, models: dict | None = None) -> list[dict]:
    """Save one small model of every learner, compressed and stored, into ``directory``;
    returns the corpus entries (also written to ``corpus.json``)."""
    sys.path.insert(0, str(REPO))
    from tests.reliability.conftest import FAST_LEARNERS, fit_fast

    directory.mkdir(parents=True, exist_ok=True)
    if models is None:
        table = corpus_table()
        models = {name: fit_fast(name, table) for name in FAST_LEARNERS}
    corpus = []
    for name, model in models.items():
        for compress in (True, False):
            path = directory / f"{name}-{'deflated' if compress else 'stored'}.fgm"
            model.save(path, compress=compress)
            corpus.append({"learner": name, "format": "deflated" if compress else "stored",
                           "path": str(path)})
    (directory / "corpus.json").write_text(json.dumps(corpus))
    return corpus


def corpus_table(n: int = 300) -> pd.DataFrame:
    """The table the corpus models are fitted on: ``mixed_small`` of the test suite and a
    zero-inflated column (so that EOGT stores region atoms, ARF point-mass leaves)."""
    rng = np.random.default_rng(0)
    c = rng.choice(["a", "b", "c", "d"], size=n)
    x = rng.normal(size=n) + (c == "b") * 2.0
    y = 0.5 * x + rng.normal(size=n)
    x[rng.random(n) < 0.05] = np.nan
    z = np.where(rng.random(n) < 0.6, 0.0, np.round(rng.exponential(3.0, n), 1))
    return pd.DataFrame({"x": x, "y": y, "c": c, "z": z})


# ---------------------------------------------------------------------------- mutation
def _anchors(raw: bytes) -> list[int]:
    """Offsets of zip record signatures and ``.npy`` magic strings."""
    out = []
    for sig in (b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07",
                b"\x93NUMPY"):
        at = raw.find(sig)
        while at >= 0:
            out.append(at)
            at = raw.find(sig, at + 1)
    return out


def mutate(raw: bytes, seed: int, index: int) -> tuple[bytes, str]:
    """Mutant ``index`` of ``raw`` and the strategy that made it."""
    rng = np.random.default_rng([seed, index])
    strategy = STRATEGIES[int(rng.integers(len(STRATEGIES)))]
    b = bytearray(raw)
    n = len(b)
    pos = int(rng.integers(n))
    span = int(rng.integers(1, 65))
    if strategy == "bit flip":
        b[pos] ^= 1 << int(rng.integers(8))
    elif strategy == "random byte":
        b[pos] = (b[pos] + int(rng.integers(1, 256))) % 256
    elif strategy == "header flip":
        anchors = _anchors(raw)
        at = min(anchors[int(rng.integers(len(anchors)))] + int(rng.integers(0, 128)), n - 1)
        b[at] ^= 1 << int(rng.integers(8))
    elif strategy == "span overwrite":
        b[pos:pos + span] = rng.integers(0, 256, size=len(b[pos:pos + span]),
                                         dtype=np.uint8).tobytes()
    elif strategy == "span zero":
        b[pos:pos + span] = bytes(len(b[pos:pos + span]))
    elif strategy == "truncate":
        del b[pos:]
    elif strategy == "insert":
        b[pos:pos] = rng.integers(0, 256, size=int(rng.integers(1, 17)), dtype=np.uint8).tobytes()
    elif strategy == "delete":
        del b[pos:pos + int(rng.integers(1, 17))]
    else:  # transpose two spans of equal length
        other = int(rng.integers(n))
        k = min(span, n - max(pos, other))
        b[pos:pos + k], b[other:other + k] = bytes(b[other:other + k]), bytes(b[pos:pos + k])
    return bytes(b), strategy


CRAFTS = ("element", "element bits", "shorter", "longer", "dtype", "drop", "meta number")


def craft(raw: bytes, seed: int, index: int) -> tuple[bytes, str]:
    """Crafted mutant ``index`` of ``raw``: one array (or a number of the metadata) changed
    and the file written again with valid checksums, as an attacker would; what it tests is
    the structure validation: the mutant must be refused or load and answer (differently is
    fine: it may be another valid model) — never crash, hang or fail otherwise."""
    import io
    import zipfile

    rng = np.random.default_rng([seed, index, 1])
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        meta = json.loads(zf.read("meta.json"))
        with np.load(io.BytesIO(zf.read("arrays.npz"))) as npz:
            arrays = {k: npz[k] for k in npz.files}
    strategy = CRAFTS[int(rng.integers(len(CRAFTS)))]
    keys = sorted(arrays)
    key = keys[int(rng.integers(len(keys)))]
    a = np.array(arrays[key])
    if strategy in ("element", "element bits") and a.size:
        flat = a.reshape(-1)
        at = int(rng.integers(flat.size))
        if strategy == "element bits":
            view = flat[at:at + 1].view(np.uint8)
            view[int(rng.integers(view.size))] ^= np.uint8(1 << int(rng.integers(8)))
        elif a.dtype.kind == "f":
            flat[at] = [0.0, -1.0, 1.0, np.nan, np.inf, -np.inf, 1e308, -1e-300,
                        float(rng.normal() * 10)][int(rng.integers(9))]
        elif a.dtype.kind in "iu":
            info = np.iinfo(a.dtype)
            choices = [0, 1, info.max, int(rng.integers(-3, max(flat.size, 1) + 3))]
            if a.dtype.kind == "i":
                choices += [-1, -2, info.min]
            flat[at] = choices[int(rng.integers(len(choices)))]
        else:
            flat[at] = not flat[at]
        arrays[key] = a
    elif strategy == "shorter" and a.ndim and a.shape[0]:
        arrays[key] = a[:-1]
    elif strategy == "longer" and a.ndim:
        arrays[key] = np.concatenate([a, a[-1:] if a.shape[0] else np.zeros((1,) + a.shape[1:],
                                                                           a.dtype)])
    elif strategy == "dtype":
        arrays[key] = a.astype([np.int64, np.float32, np.int32, np.uint8][int(rng.integers(4))])
    elif strategy == "drop":
        del arrays[key]
    else:  # a number somewhere in the metadata
        paths = []

        def walk(v, path):
            if isinstance(v, dict):
                for k, x in v.items():
                    walk(x, path + [k])
            elif isinstance(v, list):
                for k, x in enumerate(v):
                    walk(x, path + [k])
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                paths.append(path)

        walk(meta, [])
        if paths:
            path = paths[int(rng.integers(len(paths)))]
            holder = meta
            for k in path[:-1]:
                holder = holder[k]
            holder[path[-1]] = [0, -1, 10**6, 1e308, 0.5, 2][int(rng.integers(6))]
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("arrays.npz", buf.getvalue())
        zf.writestr("meta.json", json.dumps(meta))
    return out.getvalue(), f"crafted {strategy}"


# ---------------------------------------------------------------------------- worker
def _answers(model) -> list:
    """The queries a mutant must answer as the original: exact values."""
    name = type(model).__name__
    rows = corpus_table(40)
    rows.loc[::5, "y"] = np.nan
    out = []
    if name == "GeF":
        feats = rows.drop(columns="c")
        out.append(model.log_prob(feats))
        out.append(model.predict_proba(feats).to_numpy())
    else:
        out.append(model.log_prob(rows))
    out.append(model.sample(20, random_state=0))
    return out


def _same(a: list, b: list) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, pd.DataFrame):
            if not (isinstance(y, pd.DataFrame) and x.equals(y)):
                return False
        elif not np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True):
            return False
    return len(a) == len(b)


def worker(corpus_path: str, seed: int, start: int, stop: int, scratch: str,
           crafted: bool = False) -> None:
    """Load and query mutants ``start..stop-1``, one JSON line each (``begin`` first, so the
    driver knows which mutant a crash or a hang belongs to)."""
    import warnings

    from forestgen.base import GenerativeForest
    from forestgen.modelfile import ModelFileError

    warnings.simplefilter("ignore")
    corpus = json.loads(Path(corpus_path).read_text())
    raws = [Path(c["path"]).read_bytes() for c in corpus]
    base = [_answers(GenerativeForest.load(c["path"])) for c in corpus]
    for i in range(start, stop):
        k = i % len(corpus)
        data, strategy = (craft if crafted else mutate)(raws[k], seed, i)
        path = Path(scratch) / f"m{i}.fgm"
        path.write_bytes(data)
        print(json.dumps({"begin": i}), flush=True)
        mmap = corpus[k]["format"] == "stored"
        try:
            model = GenerativeForest.load(path, mmap=mmap)
        except ModelFileError:
            outcome = "refused at load"
        except Exception as e:  # noqa: BLE001 - what the fuzzer is here to find
            outcome = f"other error at load: {type(e).__name__}: {str(e)[:200]}"
        else:
            try:
                same = _same(_answers(model), base[k])
                outcome = "identical" if same else "answers differ" if crafted else \
                    "silent change"
            except ModelFileError:
                outcome = "refused at query"
            except Exception as e:  # noqa: BLE001
                outcome = f"other error at query: {type(e).__name__}: {str(e)[:200]}"
            del model
        path.unlink()
        print(json.dumps({"i": i, "outcome": outcome, "strategy": strategy}), flush=True)


# ---------------------------------------------------------------------------- driver
def run(corpus_dir: Path, n_mutants: int, seed: int = 0, timeout: float = 60.0,
        keep: Path | None = None, progress: bool = False, crafted: bool = False) -> dict:
    """Run ``n_mutants`` mutants (``crafted``: crafted ones, :func:`craft`) of the corpus in
    ``corpus_dir`` through worker subprocesses; returns the record (outcome counts overall and
    per learner / format / strategy, failing mutants)."""
    ok = CRAFTED_OK if crafted else OK
    corpus = json.loads((corpus_dir / "corpus.json").read_text())
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results: dict[int, dict] = {}
    failures = []
    t0 = time.time()
    nxt = 0
    with tempfile.TemporaryDirectory() as scratch:
        while nxt < n_mutants:
            proc = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(corpus_dir / "corpus.json"),
                 str(seed), str(nxt), str(n_mutants), scratch, str(int(crafted))],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            current, startup = None, True
            while True:
                ready, _, _ = select.select([proc.stdout], [], [],
                                            timeout * (5 if startup else 1))
                if not ready:  # a hang
                    proc.kill()
                    proc.wait()
                    i = current if current is not None else nxt
                    results[i] = {"i": i, "outcome": f"hang (> {timeout:.0f} s)"}
                    nxt = i + 1
                    break
                line = proc.stdout.readline()
                if not line:  # the worker died
                    rc = proc.wait()
                    if current is None and rc == 0:
                        nxt = n_mutants
                        break
                    if startup:  # not a mutant's doing: the worker could not start
                        raise RuntimeError(f"fuzz worker failed to start (exit {rc}): "
                                           f"{proc.stderr.read().decode(errors='replace')}")
                    i = current if current is not None else nxt
                    err = proc.stderr.read().decode(errors="replace")[-300:]
                    results[i] = {"i": i, "outcome": f"crash (exit {rc})", "stderr": err}
                    nxt = i + 1
                    break
                rec = json.loads(line)
                startup = False
                if "begin" in rec:
                    current = rec["begin"]
                    continue
                results[rec["i"]] = rec
                current = None
                nxt = rec["i"] + 1
                if progress and nxt % 500 == 0:
                    print(f"{nxt} mutants, {time.time() - t0:.0f} s", file=sys.stderr)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    by: dict[str, Counter] = {"outcome": Counter(), "learner": Counter(), "format": Counter(),
                              "strategy": Counter()}
    for i, rec in sorted(results.items()):
        c = corpus[i % len(corpus)]
        outcome = rec["outcome"]
        kind = outcome if outcome in ok or outcome == "silent change" else outcome.split(":")[0]
        by["outcome"][kind] += 1
        by["learner"][f"{c['learner']} {kind}"] += 1
        by["format"][f"{c['format']} {kind}"] += 1
        if "strategy" in rec:
            by["strategy"][f"{rec['strategy']} {kind}"] += 1
        if outcome not in ok:
            raw = Path(c["path"]).read_bytes()
            data, strategy = (craft if crafted else mutate)(raw, seed, i)
            failures.append({"i": i, "learner": c["learner"], "format": c["format"],
                             "strategy": strategy, "outcome": outcome})
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"mutant-{i}-{c['learner']}-{c['format']}.fgm").write_bytes(data)
    return {"mutants": len(results), "crafted": crafted, "seed": seed, "timeout_s": timeout,
            "seconds": round(time.time() - t0, 1),
            "counts": {k: dict(sorted(v.items())) for k, v in by.items()},
            "failures": failures}


def markdown(record: dict) -> str:
    """The record as a Markdown page: outcome counts per learner and format, failures."""
    lines = ["# Model-file fuzzing (issue 34)", "", f"Command: `{record['command']}`", ""]
    for kind, title in (("bytes", "Byte mutants (bit flips, spans, truncation, ...)"),
                        ("crafted", "Crafted mutants (one array or number changed, valid "
                                    "checksums)")):
        r = record.get(kind)
        if not r or not r["mutants"]:
            continue
        outcomes = sorted(r["counts"]["outcome"])
        lines += [f"## {title}", "", f"{r['mutants']} mutants, seed {r['seed']}, "
                  f"{r['seconds']:.0f} s wall, per-mutant timeout {r['timeout_s']:.0f} s.", ""]
        groups = sorted({k.split()[0] for k in r["counts"]["learner"]})
        lines.append("| learner | " + " | ".join(outcomes) + " |")
        lines.append("|---" * (len(outcomes) + 1) + "|")
        for g in groups + ["all"]:
            row = [str(r["counts"]["outcome"].get(o, 0)) if g == "all" else
                   str(r["counts"]["learner"].get(f"{g} {o}", 0)) for o in outcomes]
            lines.append(f"| {g} | " + " | ".join(row) + " |")
        lines += ["", "| format | " + " | ".join(outcomes) + " |",
                  "|---" * (len(outcomes) + 1) + "|"]
        for f in ("deflated", "stored"):
            row = [str(r["counts"]["format"].get(f"{f} {o}", 0)) for o in outcomes]
            lines.append(f"| {f} | " + " | ".join(row) + " |")
        what = "crash, hang, other error" + (", silent change" if kind == "bytes" else "")
        lines += ["", f"Failures ({what}): {len(r['failures'])}.", ""]
        for fail in r["failures"][:20]:
            lines.append(f"- mutant {fail['i']} ({fail['learner']}, {fail['format']}, "
                         f"{fail['strategy']}): {fail['outcome']}")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mutants", type=int,
                    default=int(os.environ.get("FORESTGEN_FUZZ_MUTANTS", 5000)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant")
    ap.add_argument("--corpus", type=Path, help="directory for the corpus (default: a temp)")
    ap.add_argument("--keep", type=Path, help="write failing mutants here")
    ap.add_argument("--out", type=Path, help="write the record (JSON) here")
    ap.add_argument("--crafted", type=int, default=0,
                    help="crafted mutants (valid checksums) to run after the byte mutants")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        corpus, seed, start, stop, scratch, crafted = args.worker
        worker(corpus, int(seed), int(start), int(stop), scratch, bool(int(crafted)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        corpus_dir = args.corpus or Path(tmp)
        if not (corpus_dir / "corpus.json").exists():
            build_corpus(corpus_dir)
        record = {"bytes": run(corpus_dir, args.mutants, args.seed, args.timeout, args.keep,
                               progress=True)}
        if args.crafted:
            record["crafted"] = run(corpus_dir, args.crafted, args.seed, args.timeout,
                                    args.keep, progress=True, crafted=True)
    record["command"] = "python tests/reliability/fuzz_model_files.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = json.dumps(record, indent=1)
    if args.out:
        args.out.write_text(markdown(record) if args.out.suffix == ".md" else text + "\n")
    print(text)
    return 0 if not any(r["failures"] for r in record.values() if isinstance(r, dict)) else 1


if __name__ == "__main__":
    sys.exit(main())
