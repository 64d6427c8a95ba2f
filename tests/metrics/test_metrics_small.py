"""Metrics that hold on small tables: C2ST, column kinds and TSTR at 12 and 20 rows per side.

A disjoint sample of the same table must score C2ST ~ 0.5 with an interval covering 0.5; a
broken generator (columns shuffled independently, numeric means shifted by 2 sd) must be
detected (interval above 0.5). Uses the bundled adult table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen.metrics as fm
from forestgen.data import load_adult
from forestgen.metrics._prep import infer_schema
from forestgen.metrics.fidelity import SmallSampleWarning

COLUMNS = ["age", "fnlwgt", "education-num", "hours-per-week", "sex", "race", "income"]
NUMERIC = ["age", "fnlwgt", "education-num", "hours-per-week"]
SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return load_adult(n=3000, random_state=0)[COLUMNS].reset_index(drop=True)


def disjoint(table: pd.DataFrame, n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    idx = np.random.default_rng(seed).permutation(len(table))
    return table.iloc[idx[:n]].reset_index(drop=True), table.iloc[idx[n:2 * n]]


def broken(table: pd.DataFrame, sample: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Every column permuted on its own, numeric means shifted by 2 table sd."""
    rng = np.random.default_rng(seed)
    out = sample.reset_index(drop=True).copy()
    for c in out.columns:
        out[c] = out[c].to_numpy()[rng.permutation(len(out))]
    for c in NUMERIC:
        out[c] = out[c] + 2.0 * table[c].std()
    return out


@pytest.mark.parametrize("n", [12, 20])
def test_c2st_disjoint_sample_scores_half(table, n):
    aucs = []
    for seed in SEEDS:
        a, b = disjoint(table, n, seed)
        with pytest.warns(SmallSampleWarning, match=f"C2ST on {n} rows per side"):
            res = fm.c2st(a, b, random_state=seed)
        lo, hi = res.auc_ci
        assert lo < 0.5 < hi, (seed, res)
        assert res.classifier == "RandomForestClassifier" and res.warning
        aucs.append(res.auc)
    assert abs(np.mean(aucs) - 0.5) < 0.15, aucs


@pytest.mark.filterwarnings("ignore::forestgen.metrics.fidelity.SmallSampleWarning")
@pytest.mark.parametrize("n", [12, 20])
def test_c2st_detects_broken_generator(table, n):
    for seed in SEEDS:
        a, b = disjoint(table, n, seed)
        res = fm.c2st(a, broken(table, b, seed), random_state=seed)
        assert res.auc > 0.8 and res.auc_ci[0] > 0.5, (seed, res)


def test_c2st_chance_classifier_scores_exactly_half(table):
    """A classifier that learns nothing gives AUC 0.5, not the below-chance artefact of
    unequal folds (old main: 0.40 on 12 rows per side)."""
    from sklearn.dummy import DummyClassifier

    a, b = disjoint(table, 12, 0)
    with pytest.warns(SmallSampleWarning):
        res = fm.c2st(a, broken(table, b, 0), classifier=DummyClassifier(strategy="prior"))
    assert res.auc == 0.5 and res.auc_ci[0] < 0.5 < res.auc_ci[1]


def test_c2st_interval_narrows_and_warning_stops_with_more_rows(table):
    a, b = disjoint(table, 400, 0)
    res = fm.c2st(a, b)
    assert res.warning is None and res.classifier == "HistGradientBoostingClassifier"
    assert res.auc_ci[0] < 0.5 < res.auc_ci[1] and res.auc_ci[1] - res.auc_ci[0] < 0.2


def test_column_kinds_come_from_dtype_not_sample_cardinality(table):
    a, b = disjoint(table, 12, 0)
    schema = infer_schema(a)
    assert set(schema.numeric) == set(NUMERIC)
    marg = fm.marginal_distances(a, b).set_index("column")
    assert set(marg.loc[NUMERIC, "metric"]) == {"ks"}
    # disjoint samples share few exact values: read as categories they would differ wholesale
    assert marg.loc[NUMERIC, "statistic"].max() < 0.7
    from sklearn.ensemble import RandomForestClassifier

    aucs = []
    for seed in SEEDS:
        a, b = disjoint(table, 20, seed)
        with pytest.warns(SmallSampleWarning):
            rf = RandomForestClassifier(n_estimators=50, random_state=0)
            aucs.append(fm.c2st(a, b, classifier=rf, random_state=seed).auc)
    assert np.mean(aucs) < 0.65, aucs


def test_column_kinds_from_a_fitted_model():
    from forestgen import ARF

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=60), "flag": rng.integers(0, 2, 60)})
    model = ARF(n_trees=3, random_state=0).fit(df)
    assert infer_schema(df).numeric == ("x", "flag")
    kinds = infer_schema(df, model)
    assert kinds.numeric == ("x",) and kinds.categorical == ("flag",)
    assert fm.marginal_distances(df, df, kinds=model).set_index("column").loc[
        "flag", "metric"] == "tv"


def _labelled(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "z": rng.normal(size=n),
                         "y": np.where(x > 0, "pos", "neg"), "v": 3.0 * x})


def test_tstr_on_twenty_rows_detects_broken_labels():
    real, good = _labelled(20, 0), _labelled(20, 1)
    cls_real, cls_good = real.drop(columns="v"), good.drop(columns="v")
    cls_bad = cls_good.assign(y=cls_good["y"].to_numpy()[::-1])  # labels cut from x
    with pytest.warns(SmallSampleWarning, match="TSTR scored on 20 real rows"):
        ok = fm.tstr(cls_real, cls_good, "y")
    assert ok.n_test == 20 and ok.trtr["accuracy"] > 0.8
    assert abs(ok.tstr["accuracy"] - ok.trtr["accuracy"]) <= 0.15
    row = ok.table.set_index("metric").loc["accuracy"]
    assert row.gap_ci_low <= 0.0 <= row.gap_ci_high
    with pytest.warns(SmallSampleWarning):
        worse = fm.tstr(cls_real, cls_bad, "y")
    row = worse.table.set_index("metric").loc["accuracy"]
    assert row.gap > 0.3 and row.gap_ci_low > 0.0
    with pytest.warns(SmallSampleWarning):
        reg_real, reg_good = real.drop(columns="y"), good.drop(columns="y")
        reg_ok = fm.tstr(reg_real, reg_good, "v")
        reg_bad = fm.tstr(reg_real, reg_good.assign(v=reg_good["v"].to_numpy()[::-1]), "v")
    assert reg_ok.task == "regression" and reg_ok.trtr["r2"] > 0.7 and reg_ok.tstr["r2"] > 0.7
    assert reg_bad.table.set_index("metric").loc["r2", "gap_ci_low"] > 0.3


def test_tstr_without_bootstrap_keeps_the_scores():
    real, synth, test = _labelled(60, 0), _labelled(60, 1), _labelled(60, 2)
    full = fm.tstr(real, synth, "y", test=test)
    bare = fm.tstr(real, synth, "y", test=test, n_boot=0)
    assert bare.tstr == full.tstr and bare.trtr == full.trtr
    assert bare.table[["gap_ci_low", "gap_ci_high"]].isna().all().all()
    assert full.table[["gap_ci_low", "gap_ci_high"]].notna().all().all()


def _copies(table: pd.DataFrame, n: int, seed: int):
    """Training rows, a disjoint holdout, and a 'generator' that returns the training rows."""
    train, holdout = disjoint(table, n, seed)
    copies = train.iloc[np.random.default_rng(seed).permutation(n)].reset_index(drop=True)
    return train, holdout.reset_index(drop=True), copies


@pytest.mark.filterwarnings("ignore::forestgen.metrics.fidelity.SmallSampleWarning")
@pytest.mark.parametrize("n", [12, 20])
def test_c2st_against_training_rows_flags_copies_below_chance(table, n):
    """Copies of the training rows read far below 0.5 against those rows (old main: no
    warning, AUC ~0.01-0.05 reads as better than perfect); against unseen rows ~0.5."""
    for seed in SEEDS:
        train, holdout, copies = _copies(table, n, seed)
        with pytest.warns(fm.BelowChanceWarning, match="below chance"):
            own = fm.c2st(train, copies, random_state=seed)
        assert own.auc_ci[1] < 0.5 and "near-copies" in own.warning
        fair = fm.c2st(holdout, copies, random_state=seed)
        assert fair.auc_ci[0] < 0.5 < fair.auc_ci[1], (seed, fair)


@pytest.mark.filterwarnings("ignore::forestgen.metrics.fidelity.SmallSampleWarning")
def test_report_runs_c2st_against_the_holdout(table):
    train, holdout, copies = _copies(table, 20, 0)
    rep = fm.report(train, copies, holdout=holdout, metrics=["c2st", "dcr"])
    assert rep.info["c2st_reference"] == "holdout"
    assert rep.c2st.auc_ci[0] < 0.5 < rep.c2st.auc_ci[1] and rep.c2st.n_real == 20
    assert rep.value("copying_flag") == 1.0  # the memorisation shows in DCR instead
    assert "vs holdout rows" in rep.summary()
    with pytest.warns(fm.BelowChanceWarning):
        alone = fm.report(train, copies, metrics=["c2st"])
    assert alone.info["c2st_reference"] == "training" and alone.c2st.auc < 0.5


@pytest.mark.filterwarnings("ignore::forestgen.metrics.fidelity.SmallSampleWarning")
def test_report_summary_without_holdout_prints_no_nan(table):
    """Without holdout rows the privacy line states there is nothing to compare (it printed
    ``vs holdout nan | closer-to-train share nan``); with them it gives both figures."""
    train, holdout, copies = _copies(table, 20, 0)
    alone = fm.report(train, copies, metrics=["dcr"]).summary()
    line = next(s for s in alone.splitlines() if "privacy" in s)
    assert "nan" not in line and "no holdout rows" in line and "exact matches" in line
    both = fm.report(train, copies, holdout=holdout, metrics=["dcr"]).summary()
    line = next(s for s in both.splitlines() if "privacy" in s)
    assert "vs holdout" in line and "closer-to-train share" in line and "nan" not in line


def test_report_function_not_shadowed_by_its_module():
    """``forestgen.metrics.report`` stays the function after its module is imported first
    (the module was ``forestgen/metrics/report.py``, so importing it replaced the function on
    the package: ``forestgen evaluate`` then broke ``fm.report`` for the rest of a process)."""
    import subprocess
    import sys

    code = ("import forestgen.metrics.quality\nimport forestgen.metrics.cli\n"
            "import forestgen.metrics as fm\nassert callable(fm.report), fm.report\n"
            "from forestgen.metrics import report\nassert callable(report)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
