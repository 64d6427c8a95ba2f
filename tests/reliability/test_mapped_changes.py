"""A memory-mapped model whose file changes after ``load`` (truncated, overwritten in place as
``cp`` does, zeroed) answers its next query with a ``ModelFileError`` naming the file — no
signal, no hang, no answer from the changed bytes — for every learner's stored format (old
main: SIGBUS after truncation, SIGSEGV after ``cp``, ``log_prob`` spinning for minutes on
zeroed child ids). Each scenario runs in a subprocess with a timeout, so a crash or a hang
fails the test instead of the test run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.reliability.conftest import FAST_LEARNERS

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    import forestgen.modelfile as mf
    from forestgen.base import GenerativeForest

    how, other = sys.argv[1], sys.argv[2]
    for path in sys.argv[3:]:
        model = GenerativeForest.load(path, mmap=True)  # map even these small files
        q = model.sample(20, random_state=0)
        if type(model).__name__ == "GeF":
            q = q.drop(columns="c")
        size = os.path.getsize(path)
        if how == "truncate":
            os.truncate(path, size // 3)
        elif how == "zero":
            with open(path, "r+b") as fh:
                fh.write(bytes(size))
        else:  # cp: truncate, then write another model's bytes into the same inode
            with open(other, "rb") as src, open(path, "r+b") as dst:
                dst.truncate(0)
                dst.write(src.read())
        out = []
        for query in (lambda: model.log_prob(q), lambda: model.sample(5, random_state=1)):
            try:
                query()
                out.append("answered")
            except mf.ModelFileError as e:
                out.append("ModelFileError: " + str(e))
            except Exception as e:
                out.append(type(e).__name__ + ": " + str(e))
        print(json.dumps([type(model).__name__, out]), flush=True)
""")


@pytest.mark.parametrize("how", ["truncate", "cp", "zero"])
def test_changed_mapped_file_raises_at_next_query(tmp_path, all_models, how):
    paths = []
    for name, model in all_models.items():
        if name == "NRGBoost":  # its save() takes compress= with the move to its family
            continue
        paths.append(str(model.save(tmp_path / f"{name}.fgm", compress=False)))
    other = shutil.copy(paths[0], tmp_path / "other.fgm")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, how, str(other), *paths[1:], paths[0]],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    seen = {}
    for line in proc.stdout.splitlines():
        name, outcomes = json.loads(line)
        seen[name] = outcomes
        for o in outcomes:
            assert o.startswith("ModelFileError") and "changed on disk" in o, (name, o)
    assert sorted(seen) == sorted(set(FAST_LEARNERS) - {"NRGBoost"})
