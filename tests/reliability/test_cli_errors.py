"""The command line answers bad input with one line on stderr and exit status 2, never a
traceback (old main: tracebacks for malformed YAML and corrupt model files)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from forestgen.cli import main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_csv(tmp_path, mixed_small):
    p = tmp_path / "d.csv"
    mixed_small.to_csv(p, index=False)
    return p


def _one_line_error(capsys, code, *needles):
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("yaml_text", ["learner: arf\nparams: {n_trees: [1, 2\n",
                                       "learner: arf\n  bad indent: : :\n", "- just\n- a list\n",
                                       "learner: arf\nparams: {n_trees: [1, 2]}\n"])
def test_bad_config(tmp_path, data_csv, capsys, yaml_text):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    code = main(["fit", str(data_csv), "--config", str(cfg), "--out", str(tmp_path / "m")])
    _one_line_error(capsys, code, "forestgen fit: error:")


@pytest.mark.parametrize("content", [b"garbage", b"PK\x05\x06" + bytes(18)])
@pytest.mark.parametrize("command", ["sample", "score"])
def test_corrupt_model_file(tmp_path, data_csv, capsys, content, command):
    model = tmp_path / "m.forestgen"
    model.write_bytes(content)
    argv = [command, str(model)] + (["-n", "5"] if command == "sample" else [str(data_csv)])
    _one_line_error(capsys, main(argv), f"forestgen {command}: error:", str(model))


def test_crafted_model_file(crafted, data_csv, capsys):
    path = crafted(lambda a, m: a["forest.left"].__setitem__(0, 10**6))
    _one_line_error(capsys, main(["score", str(path), str(data_csv)]), "child id")


def test_missing_files(tmp_path, data_csv, capsys):
    _one_line_error(capsys, main(["score", str(tmp_path / "nope.forestgen"), str(data_csv)]),
                    "nope.forestgen")
    _one_line_error(capsys, main(["fit", str(data_csv), "--config", str(tmp_path / "no.yaml")]),
                    "no.yaml")


def test_entry_point_exit_status(tmp_path):
    """The installed ``forestgen`` command (``python -m forestgen``) exits with status 2."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learner: [\n")
    data = tmp_path / "d.csv"
    data.write_text("a,b\n1,2\n3,4\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-m", "forestgen", "fit", str(data), "--config",
                        str(cfg)], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "malformed YAML" in r.stderr
