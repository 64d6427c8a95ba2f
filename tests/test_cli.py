"""The forestgen command: fit / sample / score from a YAML preset, and config errors."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forestgen.cli import main
from forestgen.config import build_learner, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_fit_sample_score_roundtrip(tmp_path, mixed_2d, capsys):
    data = tmp_path / "data.csv"
    mixed_2d.to_csv(data, index=False)
    model = tmp_path / "m.forestgen"
    assert main(["fit", str(data), "--config", str(CONFIGS / "arf.yaml"), "--out", str(model)]) == 0
    out = tmp_path / "s.csv"
    assert main(["sample", str(model), "-n", "50", "--out", str(out), "--seed", "1"]) == 0
    s = pd.read_csv(out)
    assert list(s.columns) == list(mixed_2d.columns) and len(s) == 50
    assert set(s["c"]) <= {"a", "b", "c"}
    assert main(["score", str(model), str(data)]) == 0
    assert "mean log-likelihood" in capsys.readouterr().out


def test_all_presets_build():
    for path in sorted(CONFIGS.glob("*.yaml")):
        learner = build_learner(load_config(path))
        assert hasattr(learner, "fit"), path


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("learner: nope\n")
    with pytest.raises(KeyError, match="nope"):
        build_learner(load_config(bad))
    bad.write_text("learner: arf\nparams: {n_tres: 3}\n")
    with pytest.raises(ValueError, match="n_tres"):
        build_learner(load_config(bad))
    bad.write_text("learner: arf\nwhatever: 1\n")
    with pytest.raises(ValueError, match="whatever"):
        load_config(bad)
    assert main(["fit", str(tmp_path / "missing.csv"), "--config", str(bad)]) == 2


def test_demo_small(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--n-rows", "1500", "--n-trees", "3"]) == 0
    out = capsys.readouterr().out
    assert "held-out log-likelihood" in out
    synth = pd.read_csv(tmp_path / "adult_synthetic.csv")
    assert len(synth) == 1500 and "income" in synth.columns
    assert (tmp_path / "report.md").exists()
