"""The forestgen command: fit / sample / score from a YAML preset, and config errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from forestgen.cli import main
from forestgen.config import build_learner, load_config

ROOT = Path(__file__).resolve().parents[1]

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


def test_short_out_option(tmp_path, mixed_2d):
    """``-o`` is ``--out`` for fit, sample and evaluate: the files land where it says."""
    data = tmp_path / "data.csv"
    mixed_2d.to_csv(data, index=False)
    model, out, rep = tmp_path / "short.forestgen", tmp_path / "short.csv", tmp_path / "r.md"
    assert main(["fit", str(data), "--config", str(CONFIGS / "arf.yaml"), "-o", str(model)]) == 0
    assert main(["sample", str(model), "-n", "40", "-o", str(out), "--seed", "2"]) == 0
    assert len(pd.read_csv(out)) == 40
    assert main(["evaluate", str(data), str(out), "--metrics", "marginals", "-o", str(rep)]) == 0
    assert rep.read_text().strip()

def test_all_presets_build():
    for path in sorted(CONFIGS.glob("*.yaml")):
        learner = build_learner(load_config(path))
        assert hasattr(learner, "fit"), path
    for name in ("arf.yaml", "arf_density.yaml"):  # the paper's model, not the back-off
        assert build_learner(load_config(CONFIGS / name)).marginal_weight == 0, name


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
    report = (tmp_path / "report.md").read_text()
    assert "![marginals](report_figures/marginals.png)" in report
    assert (tmp_path / "report_figures" / "marginals.png").stat().st_size > 1000
    assert "compiles the Numba tree kernels" in out


def test_evaluate_without_matplotlib(tmp_path, mixed_2d, monkeypatch, capsys):
    """A fresh install without matplotlib still writes the report (no figures, and says so)."""
    import sys

    real, synth = tmp_path / "real.csv", tmp_path / "synth.csv"
    mixed_2d.iloc[:300].to_csv(real, index=False)
    mixed_2d.iloc[300:].to_csv(synth, index=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    for name in ("report.md", "report.html"):
        assert main(["evaluate", str(real), str(synth), "--metrics", "marginals,association",
                     "--out", str(tmp_path / name)]) == 0
        text = (tmp_path / name).read_text()
        assert "matplotlib is not installed" in text and "KS" in text
    assert not (tmp_path / "report_figures").exists()


def test_ci_runs_the_readme_commands_verbatim():
    """.ci/run executes exactly the README's numbered commands (extracted, so they cannot drift)."""
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("rc", root / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    readme = (root / "README.md").read_text()
    cmds = mod.readme_commands(readme)
    assert len(cmds) == 3 and cmds[0].endswith("forestgen demo")
    assert cmds[1].endswith("python -m pytest -n 2 --dist loadfile")
    assert cmds[2].endswith("mkdocs build --strict")  # the documentation site
    for c in cmds:
        assert c in readme  # verbatim lines
    ci = (root / ".ci" / "run").read_text()
    assert "readme_commands.py" in ci and "pip install" not in ci
    with pytest.raises(ValueError, match="not followed by a command"):
        mod.readme_commands("```bash\n# 1. demo\n# 2. x\ny\n```")


def test_fit_gef_preset_with_target(tmp_path, natural, capsys):
    """configs/gef.yaml runs from the CLI with --target; unsupervised learners reject it."""
    data = tmp_path / "t.csv"
    natural.dropna().to_csv(data, index=False)
    model = tmp_path / "g.forestgen"
    assert main(["fit", str(data), "--config", str(CONFIGS / "gef.yaml"), "--out", str(model),
                 "--target", "cut"]) == 0
    assert main(["sample", str(model), "-n", "20", "--out", str(tmp_path / "s.csv")]) == 0
    assert list(pd.read_csv(tmp_path / "s.csv").columns) == list(natural.columns)
    assert main(["fit", str(data), "--config", str(CONFIGS / "arf.yaml"), "--target", "cut",
                 "--out", str(tmp_path / "a.forestgen")]) == 2
    assert "unsupervised" in capsys.readouterr().err


def test_the_command_line_imports_heavy_modules_only_when_a_command_needs_them():
    """Issue 11: every CLI call spent seconds importing metrics, scikit-learn and Numba."""
    code = ("import sys, forestgen.cli as c; c.build_parser().parse_args(['sample', 'm', '-n', "
            "'1']); heavy = [m for m in ('sklearn', 'numba', 'pandas', 'scipy', 'torch', "
            "'forestgen.metrics.fidelity', 'forestgen.base') if m in sys.modules]; "
            "print(heavy); import forestgen as fg; fg.ARF; print('sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "True"], out


def test_readme_command_lines_parse():
    """Every ``forestgen ...`` line of the README and docs/cli.md is a valid command line."""
    import shlex

    from forestgen.cli import build_parser

    root = Path(__file__).resolve().parents[1]
    lines = [ln.split("  #")[0].strip()
             for doc in ("README.md", "docs/cli.md")
             for ln in (root / doc).read_text().splitlines() if ln.startswith("forestgen ")]
    assert any("--learner auto" in ln for ln in lines)
    parser = build_parser()
    for ln in lines:
        args = parser.parse_args(shlex.split(ln)[1:])
        assert callable(args.func), ln


def test_an_output_folder_that_does_not_exist_is_refused_before_the_work(tmp_path, mixed_2d,
                                                                          capsys, monkeypatch):
    """``fit`` ran the whole fit, then failed naming an internal temporary file; ``fit``,
    ``sample`` and ``score`` now refuse at once, naming the folder."""
    import forestgen.cli as cli

    data = tmp_path / "data.csv"
    mixed_2d.to_csv(data, index=False)
    gone = tmp_path / "no" / "such"
    monkeypatch.setattr(cli, "read_table", lambda *a, **k: pytest.fail("fit read the data"))
    assert main(["fit", str(data), "--out", str(gone / "m.forestgen")]) == 2
    assert f"the folder {gone} does not exist" in capsys.readouterr().err
    monkeypatch.undo()
    model = tmp_path / "m.forestgen"
    assert main(["fit", str(data), "--config", str(CONFIGS / "arf.yaml"), "--out",
                 str(model)]) == 0
    assert main(["sample", str(model), "-n", "5", "--out", str(gone / "s.csv")]) == 2
    assert main(["score", str(model), str(data), "--out", str(gone / "lp.csv")]) == 2
    assert capsys.readouterr().err.count("does not exist") == 2
