"""The command line on real files (issue 35): fit without --config, CSV and Parquet, dates and
times detected, integers with NaN kept as integers, stray strings refused by name unless the
schema declares the column, --help listing learners and presets, documented exit codes, and
(issue 34) score on header-only or column-missing tables, a bounded -n, no tracebacks."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest

from forestgen import registry
from forestgen.cli import (
    DEFAULT_LEARNER,
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    LEARNER_HELP,
    PRESET_HELP,
    build_parser,
    main,
)
from forestgen.data.files import read_table


def _table(n=240, seed=0) -> pd.DataFrame:
    """Dates with gaps (a third of the days of ~2 years, at random: a grid of days; every
    third day would be a grid of 3 days), times of day, an integer with NaN, a text boolean
    with NaN, a float and a category."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.choice(3 * n, n, replace=False),
                                                        unit="D")
    temp = 10 + 8 * np.sin(2 * np.pi * days.dayofyear / 365) + rng.normal(0, 1, n)
    count = rng.poisson(4, n).astype(float)
    count[rng.uniform(size=n) < 0.1] = np.nan
    flag = np.where(rng.uniform(size=n) < 0.5, "True", "False").astype(object)
    flag[rng.uniform(size=n) < 0.05] = None
    clock = [f"{h:02d}:{m:02d}" for h, m in zip(rng.integers(6, 20, n), rng.integers(0, 60, n))]
    return pd.DataFrame({"day": days.strftime("%Y-%m-%d"), "clock": clock,
                         "temp": temp.round(1), "count": count, "flag": flag,
                         "kind": rng.choice(["a", "b", "c"], n)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    df = _table()
    df.iloc[:200].to_csv(d / "train.csv", index=False)
    df.iloc[200:].to_csv(d / "test.csv", index=False)
    return d


@pytest.fixture(scope="module")
def fitted(files):
    model = files / "m.forestgen"
    assert main(["fit", str(files / "train.csv"), "--out", str(model), "--seed", "0",
                 "--no-progress"]) == 0
    return model


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_reader_types_dates_times_integers_and_booleans(files):
    t = read_table(files / "train.csv")
    assert str(t["day"].dtype).startswith("datetime64")
    assert str(t["clock"].dtype).startswith("timedelta64")
    assert str(t["count"].dtype) == "Int64" and t["count"].isna().any()
    assert str(t["flag"].dtype) == "boolean" and t["flag"].isna().any()
    assert t["temp"].dtype == np.float64


def test_fit_without_config_uses_the_default_learner(fitted, capsys):
    from forestgen.base import GenerativeForest

    m = GenerativeForest.load(fitted)
    assert type(m) is registry.get("learner", DEFAULT_LEARNER)
    kinds = {s.name: s for s in m.schema_.columns}
    assert kinds["day"].dtype.startswith("datetime64") and not kinds["day"].is_discrete
    assert kinds["day"].step == 86400.0  # modelled as dates (a day grid), not as levels


def test_sample_keeps_types_and_draws_new_dates(files, fitted):
    out = files / "s.csv"
    assert main(["sample", str(fitted), "-n", "400", "--out", str(out), "--seed", "1",
                 "--no-progress"]) == 0
    real, synth = read_table(files / "train.csv"), read_table(out)
    assert dict(synth.dtypes.astype(str)) == dict(real.dtypes.astype(str))
    # dates are drawn from a density over days: most fall on days absent from training
    copies = synth["day"].isin(set(real["day"])).mean()
    assert copies < 0.6, copies
    assert synth["day"].between(real["day"].min(), real["day"].max()).all()
    text = out.read_text().splitlines()[1].split(",")
    assert len(text[0]) == 10 and len(text[1]) == 8  # 2020-05-17 and 07:41:00
    assert synth["clock"].between(pd.Timedelta(0), pd.Timedelta("1D")).all()


def test_held_out_rows_with_unseen_dates_score(files, fitted, capsys):
    assert main(["score", str(fitted), str(files / "test.csv")]) == 0
    line = capsys.readouterr().out
    lp = float(line.split("mean log-likelihood: ")[1].split()[0])
    assert -40 < lp < 0, line  # a nominal date column scored unseen dates near -57 nats/row


def test_parquet_in_and_out(files, tmp_path):
    pytest.importorskip("pyarrow")
    df = read_table(files / "train.csv")
    df.to_parquet(tmp_path / "t.parquet")
    model = tmp_path / "m.forestgen"
    assert main(["fit", str(tmp_path / "t.parquet"), "--out", str(model), "--seed", "0",
                 "--learner", "arf", "--preset", "fastest", "--no-progress"]) == 0
    assert main(["sample", str(model), "-n", "50", "--out", str(tmp_path / "s.parquet"),
                 "--no-progress"]) == 0
    s = pd.read_parquet(tmp_path / "s.parquet")
    assert dict(s.dtypes.astype(str)) == dict(df.dtypes.astype(str))


def test_stray_strings_refused_by_name_unless_declared(tmp_path, capsys):
    df = _table(120)
    df["temp"] = df["temp"].astype(object)
    df.loc[7, "temp"] = "x"
    path = tmp_path / "stray.csv"
    df.to_csv(path, index=False)
    assert main(["fit", str(path), "--out", str(tmp_path / "m")]) == EXIT_BAD_INPUT
    err = _err(capsys)
    assert "'temp'" in err and "'x'" in err and "--schema" in err and len(err.splitlines()) == 1
    for sdtype, kind in (("numerical", "continuous"), ("categorical", "categorical")):
        schema = tmp_path / f"{sdtype}.json"
        schema.write_text(json.dumps({"columns": {"temp": {"sdtype": sdtype}}}))
        assert main(["fit", str(path), "--schema", str(schema), "--out",
                     str(tmp_path / "m"), "--no-progress"]) == 0
        from forestgen.base import GenerativeForest

        spec = GenerativeForest.load(tmp_path / "m").schema_.columns[2]
        assert spec.kind == kind
    assert "read as missing" in _err(capsys)


def test_none_text_is_a_level_of_text_columns_and_missing_elsewhere(tmp_path):
    # R's Arthritis codes Improved as None / Some / Marked: pandas alone reads "None" as missing
    rows = ["None,3,2020-01-01,True,None,1", "Some,None,None,None,None,None",
            "Marked,5,2020-01-03,False,None,x"] + ["Some,4,2020-01-02,True,None,2"] * 20
    path = tmp_path / "none.csv"
    path.write_text("Improved,age,day,flag,empty,code\n" + "\n".join(rows) + "\n")
    df = read_table(path, {"code": {"sdtype": "categorical"}})
    assert df["Improved"].tolist()[:3] == ["None", "Some", "Marked"]
    assert df["Improved"].isna().sum() == 0
    assert str(df["age"].dtype) == "Int64" and df["age"].isna().sum() == 1
    assert str(df["day"].dtype).startswith("datetime64") and df["day"].isna().sum() == 1
    assert str(df["flag"].dtype) == "boolean" and df["flag"].isna().sum() == 1
    assert df["empty"].isna().all()
    assert df["code"].tolist()[:3] == ["1", "None", "x"]  # declared categorical: a level
    # named as missing, or declared numerical: missing
    cat = {"code": {"sdtype": "categorical"}}
    assert read_table(path, cat, na_values=["None"])["Improved"].isna().sum() == 1
    declared = read_table(path, {"age": {"sdtype": "numerical"}, "code": {"sdtype": "categorical"}})
    assert declared["age"].isna().sum() == 1
    # a mostly numeric column keeps naming its real strays, not "None"
    with pytest.raises(ValueError, match="'x'") as e:
        read_table(path)
    assert "None" not in str(e.value).split("holds numbers except")[1].split(";")[0]


def test_schema_declares_ranges_decimals_and_datetime_format(tmp_path, capsys):
    df = _table(150)
    df["day"] = pd.to_datetime(df["day"]).dt.strftime("%d.%m.%Y")  # not ISO: needs a format
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    schema = {"columns": {"day": {"sdtype": "datetime", "datetime_format": "%d.%m.%Y"},
                          "temp": {"sdtype": "numerical", "range_min": 0, "range_max": 15,
                                   "decimal_places": 0}}}
    (tmp_path / "s.json").write_text(json.dumps(schema))
    df["temp"] = df["temp"].clip(0, 15).round()
    df.to_csv(path, index=False)
    assert main(["fit", str(path), "--schema", str(tmp_path / "s.json"), "--out",
                 str(tmp_path / "m"), "--no-progress"]) == 0
    assert main(["sample", str(tmp_path / "m"), "-n", "300", "--out", str(tmp_path / "o.csv"),
                 "--no-progress"]) == 0
    s = read_table(tmp_path / "o.csv")
    assert str(s["day"].dtype).startswith("datetime64")
    assert s["temp"].between(0, 15).all() and (s["temp"] == s["temp"].round()).all()
    (tmp_path / "bad.json").write_text('{"columns": {"nope": {"sdtype": "numerical"}}}')
    assert main(["fit", str(path), "--schema", str(tmp_path / "bad.json")]) == EXIT_BAD_INPUT
    assert "'nope'" in _err(capsys)


def test_score_refuses_header_only_and_missing_columns(files, fitted, tmp_path, capsys):
    header = tmp_path / "h.csv"
    header.write_text((files / "test.csv").read_text().splitlines()[0] + "\n")
    assert main(["score", str(fitted), str(header)]) == EXIT_BAD_INPUT
    assert "no rows" in _err(capsys)
    part = tmp_path / "part.csv"
    read_table(files / "test.csv").drop(columns=["temp"]).to_csv(part, index=False)
    assert main(["score", str(fitted), str(part)]) == EXIT_BAD_INPUT
    assert "['temp']" in _err(capsys)
    assert main(["score", str(fitted), str(part), "--marginalise"]) == 0
    assert "marginal" in capsys.readouterr().out


def test_sample_n_bounded_and_bad_arguments(fitted, tmp_path, capsys):
    assert main(["sample", str(fitted), "-n", str(10**13), "--out",
                 str(tmp_path / "s.csv")]) == EXIT_BAD_INPUT
    assert "free" in _err(capsys) and not (tmp_path / "s.csv").exists()
    assert main(["sample", str(fitted), "-n", "-3"]) == EXIT_BAD_INPUT
    assert main(["sample", str(fitted), "-n", "3", "--out", str(tmp_path / "s.xlsx")]) == 2
    assert "unknown table format" in _err(capsys)


def test_internal_errors_are_one_line_with_status_1(files, fitted, monkeypatch, capsys):
    from forestgen.base import GenerativeForest

    def boom(self, *a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(GenerativeForest, "log_prob", boom)
    assert main(["score", str(fitted), str(files / "test.csv")]) == EXIT_INTERNAL
    err = _err(capsys).strip().splitlines()
    assert len(err) == 1 and "internal error" in err[0] and "kaboom" in err[0]


def test_help_lists_learners_presets_and_describes_every_option(capsys):
    # the package's own learners (other test modules register test subclasses of their own)
    builtin = {n for n in registry.available("learner")
               if registry.get("learner", n).__module__.startswith("forestgen.")}
    assert set(LEARNER_HELP) == builtin | {"auto"}  # auto: AutoForest, which chooses one
    for name, presets in PRESET_HELP.items():
        assert set(presets) == set(registry.get("learner", name).PRESETS)
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"{name} {action.option_strings} has no help text"
        text = sub.format_help()
        assert "exit status" in text and "130" in text, name
    fit_help = subs.choices["fit"].format_help()
    for learner in LEARNER_HELP:
        assert learner in fit_help
    for preset in PRESET_HELP["arf"]:
        assert preset in fit_help


def test_fit_auto_saves_the_learner_it_chose(tmp_path, capsys):
    from forestgen.base import GenerativeForest

    rng = np.random.default_rng(3)
    x = rng.normal(size=90).round(2)
    df = pd.DataFrame({"x": x, "y": (2 * x + rng.normal(0, 0.3, 90)).round(2),
                       "g": np.where(x > 0, "hi", "lo")})
    df.to_csv(tmp_path / "t.csv", index=False)
    model = tmp_path / "m.forestgen"
    assert main(["fit", str(tmp_path / "t.csv"), "--learner", "auto", "--target", "g",
                 "--out", str(model), "--seed", "0", "--no-progress"]) == 0
    out = capsys.readouterr().out
    m = GenerativeForest.load(model)
    assert "fitted AutoForest (chose " in out and f": {type(m).__name__})" in out, out
    assert main(["sample", str(model), "-n", "200", "--out", str(tmp_path / "s.csv"),
                 "--seed", "1", "--no-progress"]) == 0
    s = read_table(tmp_path / "s.csv")
    assert list(s.columns) == ["x", "y", "g"] and len(s) == 200
    # g is a threshold of x in every training row (lo up to -0.02, hi from 0.02): kept in
    # every sample, with one cut in the gap (the roundest value, 0, rounded down half a step:
    # forestgen.data.rules.threshold_cuts, so a drawn 0.00 is "hi")
    hi = s["g"] == "hi"
    assert s["x"][hi].min() > s["x"][~hi].max()
    assert (s["x"][hi] >= 0).all() and (s["x"][~hi] <= -0.01).all()
    # a preset of a learner without presets is bad input, named
    assert main(["fit", str(tmp_path / "t.csv"), "--learner", "auto", "--preset", "fastest",
                 "--out", str(tmp_path / "m2")]) == EXIT_BAD_INPUT
    assert "'auto'" in _err(capsys)


def test_config_names_auto(tmp_path):
    from forestgen.auto import AutoForest
    from forestgen.config import build_learner, load_config

    (tmp_path / "c.yaml").write_text("learner: auto\nparams:\n  tolerance: 0.02\n")
    m = build_learner(load_config(tmp_path / "c.yaml"))
    assert isinstance(m, AutoForest) and m.tolerance == 0.02
    with pytest.raises(ValueError, match="'auto'"):
        build_learner({"learner": "auto", "params": {"n_trees": 3}})
