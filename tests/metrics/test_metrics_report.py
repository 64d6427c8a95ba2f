"""report() / QualityReport exports and the ``evaluate`` CLI."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm
from forestgen.metrics.cli import add_evaluate_parser, run_evaluate

SECTIONS = ["Summary", "Metrics", "Per-column marginals", "Pairwise associations", "Coverage",
            "Utility", "Privacy", "Timings"]


@pytest.fixture(scope="module")
def small(adult_split):
    A, B, H = adult_split["A"].iloc[:1500], adult_split["B"].iloc[:1500], adult_split["H"]
    return A, B, H.iloc[:800]


@pytest.fixture(scope="module")
def rep(small):
    A, B, H = small
    return fm.report(A, B, holdout=H, target="income", max_rows=500, c2st_rows=1000,
                     coverage_rows=800, n_threads=1)


def test_report_table(rep, small):
    assert isinstance(rep, fm.QualityReport)
    t = rep.table
    assert list(t.columns) == ["group", "metric", "column", "value", "ideal"]
    assert set(t["group"]) == {"fidelity", "coverage", "utility", "privacy"}
    for m in ("ks_mean", "tv_mean", "association_gap_mean", "c2st_auc", "mmd2",
              "energy_distance", "sliced_wasserstein", "alpha_precision_delta",
              "beta_recall_delta", "nn_precision", "nn_recall", "dcr_share_closer_to_train"):
        assert np.isfinite(rep.value(m)), m
    assert rep.value("ks", column="age") == pytest.approx(
        fm.marginal_distances(small[0], small[1]).set_index("column").loc["age", "statistic"])
    assert rep.value("tstr_auc", column="income") > 0.8
    assert rep.value("c2st_auc") < 0.6 and rep.value("copying_flag") == 0.0
    assert rep.association.matrix.shape == (15, 15)
    assert len(rep.columns) == 15
    assert set(rep.timings) >= {"c2st", "mmd", "tstr", "dcr"}
    text = rep.summary()
    assert "C2ST AUC" in text and "TSTR" in text and "COPYING" not in text
    with pytest.raises(KeyError):
        rep.value("nope")


def test_report_exports(rep, tmp_path):
    md = rep.to_markdown(tmp_path / "out" / "report.md")
    text = md.read_text()
    for sec in SECTIONS:
        assert f"## {sec}" in text
    figs = tmp_path / "out" / "report_figures"
    for name in ("marginals", "association_gap", "alpha_precision"):
        png = figs / f"{name}.png"
        assert png.exists() and png.read_bytes()[:4] == b"\x89PNG"
        assert f"report_figures/{name}.png" in text
    html = rep.to_html(tmp_path / "report.html").read_text()
    for sec in SECTIONS:
        assert f"<h2>{sec}</h2>" in html
    assert html.count("data:image/png;base64,") == 3
    assert "<table" in html


def test_report_subset_and_errors(small):
    A, B, _ = small
    r = fm.report(A, B, metrics=["marginals", "mmd"], max_rows=300)
    assert set(r.table["group"]) == {"fidelity"} and r.c2st is None and r.privacy is None
    assert "C2ST" not in r.summary()
    assert "coverage" not in r.summary()  # (an empty "coverage :" line was printed)
    with pytest.raises(ValueError, match="unknown metric"):
        fm.report(A, B, metrics=["bogus"])
    with pytest.raises(ValueError, match="target"):
        fm.report(A, B, target="nope", metrics=["marginals"])
    with pytest.raises(ValueError, match="missing column"):
        fm.report(A, B.drop(columns="age"), metrics=["marginals"])


def test_report_on_numpy_arrays():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 3)), rng.normal(size=(300, 3))
    r = fm.report(x, y, max_rows=200, c2st_rows=300, coverage_rows=300, n_threads=1)
    assert r.info["n_numeric"] == 3 and np.isfinite(r.value("mmd2"))


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="forestgen")
    add_evaluate_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli_run_evaluate(tmp_path, capsys):
    rng = np.random.default_rng(1)
    n = 400

    def frame(shift: float) -> pd.DataFrame:
        x = rng.normal(shift, 1, n)
        return pd.DataFrame({"x": x, "z": x + rng.normal(size=n),
                             "c": rng.choice(["a", "b", "?"], n),
                             "y": np.where(x > 0, "pos", "neg")})

    real, syn, hold = frame(0.0), frame(0.2), frame(0.0)
    for name, df in (("real", real), ("syn", syn), ("hold", hold)):
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    out = tmp_path / "rep.html"
    args = _parse(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"),
                   "--target", "y", "--holdout", str(tmp_path / "hold.csv"),
                   "--out", str(out), "--threads", "1"])
    assert args.func is run_evaluate
    assert run_evaluate(args) == 0
    printed = capsys.readouterr().out
    assert "forestgen quality report" in printed and "TSTR" in printed
    assert "<h2>Utility</h2>" in out.read_text()
    # "?" is read as missing: the categorical column has a <missing> level
    r = fm.report(pd.read_csv(tmp_path / "real.csv", na_values=["?"]),
                  pd.read_csv(tmp_path / "syn.csv", na_values=["?"]), metrics=["marginals"])
    assert r.columns.set_index("column").loc["c", "type"] == "categorical"
    md = tmp_path / "rep.md"
    args = _parse(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "syn.csv"),
                   "--out", str(md), "--metrics", "marginals,association"])
    assert run_evaluate(args) == 0 and "## Pairwise associations" in md.read_text()
    syn.drop(columns="z").to_csv(tmp_path / "bad.csv", index=False)
    bad = _parse(["evaluate", str(tmp_path / "real.csv"), str(tmp_path / "bad.csv")])
    assert run_evaluate(bad) == 2
    assert "missing column" in capsys.readouterr().err
    assert run_evaluate(_parse(["evaluate", "a.csv", "b.csv", "--out", "x.pdf"])) == 2
    # an integer-coded column is numeric by its dtype unless declared categorical
    for name, df in (("real_k", real), ("syn_k", syn)):
        df.assign(k=rng.integers(0, 3, n)).to_csv(tmp_path / f"{name}.csv", index=False)
    kmd = tmp_path / "k.md"
    base = ["evaluate", str(tmp_path / "real_k.csv"), str(tmp_path / "syn_k.csv"),
            "--metrics", "marginals", "--out", str(kmd)]
    assert run_evaluate(_parse(base)) == 0 and "| k | numeric | ks |" in kmd.read_text()
    assert run_evaluate(_parse([*base, "--categorical", "k"])) == 0
    assert "| k | categorical | tv |" in kmd.read_text()
    assert run_evaluate(_parse([*base, "--categorical", "kk"])) == 2
    assert "['kk'] that are not in the data" in capsys.readouterr().err
