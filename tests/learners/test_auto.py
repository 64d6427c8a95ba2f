"""AutoForest (issue 37): chooses among candidates by held-out C2ST (ties by held-out
log-likelihood), refits the choice on all rows and answers every query through it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

import forestgen as fg


def table(n=240, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x.round(3), "y": (2 * x + rng.normal(0, 0.3, n)).round(3),
                         "c": np.where(x + rng.normal(0, 0.5, n) > 0, "hi", "lo")})


def cands():
    return [("small ARF", fg.ARF(n_trees=5, max_iters=0)),
            ("uniform-ish RFDE", fg.RFDE(n_trees=3, smoothing=0.5))]


def test_chooses_on_held_out_c2st_and_refits_on_all_rows():
    df = table()
    a = fg.AutoForest(candidates=cands(), random_state=0).fit(df)
    board = a.leaderboard_
    assert list(board["candidate"]) == ["small ARF", "uniform-ish RFDE"]
    assert board["chosen"].sum() == 1 and a.n_validation_folds_ == 3
    best = board.loc[board["chosen"]].iloc[0]
    assert best["c2st_distance"] <= board["c2st_distance"].min() + a.tolerance
    # the heavily smoothed RFDE is easy to tell from the real rows; ARF is chosen
    assert a.best_name_ == "small ARF" and isinstance(a.best_, fg.ARF)
    assert a.best_.n_features_in_ == 3
    s = a.sample(50, random_state=1)
    assert list(s.columns) == list(df.columns) and len(s) == 50
    np.testing.assert_allclose(a.log_prob(df.head(4)), a.best_.log_prob(df.head(4)))
    assert a.predict_proba(df.head(3), target="c").shape == (3, 2)
    assert a.schema_.d == 3  # fitted attributes come from the chosen learner


def test_save_gives_back_the_chosen_learner(tmp_path):
    df = table()
    a = fg.AutoForest(candidates=cands(), random_state=0).fit(df)
    back = fg.AutoForest.load(a.save(tmp_path / "auto.forestgen"))
    assert type(back) is type(a.best_)
    np.testing.assert_allclose(back.log_prob(df.head(5)), a.log_prob(df.head(5)))


def test_same_seed_same_choice_and_sample():
    """The same seed, given as an int or as ``SeedSequence(int)`` as to every learner (the
    SeedSequence's first state word seeded AutoForest: another model)."""
    df = table()
    a = fg.AutoForest(candidates=cands(), random_state=3).fit(df)
    b = fg.AutoForest(candidates=cands(), random_state=np.random.SeedSequence(3)).fit(df)
    pd.testing.assert_frame_equal(a.leaderboard_.drop(columns="cpu_s"),
                                  b.leaderboard_.drop(columns="cpu_s"))
    pd.testing.assert_frame_equal(a.sample(20, random_state=0), b.sample(20, random_state=0))


def test_the_chosen_learners_other_methods_answer_too(tmp_path):
    """``sample_to``, ``sample_encoded``, ``warmup``, ``require``: what every learner has."""
    a = fg.AutoForest(candidates=cands(), random_state=0).fit(table())
    out = a.sample_to(tmp_path / "s.csv", 30, random_state=1)
    assert len(pd.read_csv(out)) == 30
    assert a.sample_encoded(5, random_state=0).shape == (5, 3)
    assert a.warmup() is a.best_
    with pytest.raises(AttributeError, match="no attribute '_private'"):
        a._private  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'sample_to'"):
        fg.AutoForest().sample_to  # noqa: B018


def test_ties_go_to_held_out_likelihood_and_budget_skips():
    df = table()
    a = fg.AutoForest(candidates=cands(), tolerance=1.0, random_state=0).fit(df)
    board = a.leaderboard_
    assert board.loc[board["chosen"], "log_likelihood"].iloc[0] == board["log_likelihood"].max()
    b = fg.AutoForest(candidates=cands(), time_budget=1e-9, random_state=0).fit(df)
    assert b.leaderboard_["note"].iloc[1].startswith("skipped")
    assert b.best_name_ == "small ARF"


def test_sklearn_contract_and_errors():
    a = fg.AutoForest(candidates=cands(), random_state=0)
    assert clone(a).get_params()["random_state"] == 0
    with pytest.raises(fg.NotFittedError):
        a.sample(3)
    with pytest.raises(TypeError, match="not a forestgen learner"):
        fg.AutoForest(candidates=[object()]).fit(table())
    with pytest.raises(ValueError, match="time_budget"):
        fg.AutoForest(time_budget=-1).fit(table())


class ZeroDensityARF(fg.ARF):
    """An ARF whose density is zero everywhere (held-out log-likelihood -inf)."""

    def log_prob(self, X, conditions=None, **kw):
        return np.full(len(X), -np.inf)


def test_a_zero_density_at_validation_rows_is_chosen_only_as_last_resort():
    df = table()
    zero = ("zero density", ZeroDensityARF(n_trees=5, max_iters=0))
    rfde = cands()[1]  # samples far from the rows: the zero-density ARF wins on C2ST alone
    a = fg.AutoForest(candidates=[zero, rfde], random_state=0).fit(df)
    board = a.leaderboard_
    assert board.loc[0, "c2st_distance"] < board.loc[1, "c2st_distance"] - a.tolerance
    assert np.isneginf(board.loc[0, "log_likelihood"]) and a.best_name_ == rfde[0]
    assert np.isfinite(a.score(df))
    b = fg.AutoForest(candidates=[zero], random_state=0).fit(df)
    assert b.best_name_ == "zero density"


class RowCountARF(fg.ARF):
    """An ARF that records how many rows each fit saw (built with ``marginal_weight=0``: at
    ``"auto"`` each fit also fits a held-out copy of its class on 80% of its rows, which
    would be recorded too)."""

    seen: list = []

    def fit(self, X, y=None, **kw):
        RowCountARF.seen.append(len(X))
        return super().fit(X, y, **kw)


def _counted():
    return RowCountARF(n_trees=3, max_iters=0, marginal_weight=0)


def test_large_tables_score_candidates_on_capped_rows_and_refit_on_all(monkeypatch):
    import forestgen.auto as auto

    monkeypatch.setattr(auto, "SMALL_TABLE", 200)
    monkeypatch.setattr(auto, "SELECT_ROWS", 60)
    df = table(n=400)
    RowCountARF.seen = []
    a = fg.AutoForest(candidates=[("counted", _counted())],
                      random_state=0).fit(df)
    # one split: 120 validation rows capped at 60, 280 fitting rows capped at 60; refit on 400
    assert a.n_validation_folds_ == 1 and a.selection_rows_ == (60, 60)
    assert RowCountARF.seen == [60, 400]
    assert a.best_.n_features_in_ == 3
    b = fg.AutoForest(candidates=[("counted", _counted())],
                      random_state=0).fit(df)
    pd.testing.assert_frame_equal(a.leaderboard_.drop(columns="cpu_s"),
                                  b.leaderboard_.drop(columns="cpu_s"))


def test_small_tables_keep_three_folds_on_every_row():
    df = table(n=240)
    RowCountARF.seen = []
    a = fg.AutoForest(candidates=[("counted", _counted())],
                      random_state=0).fit(df)
    assert a.n_validation_folds_ == 3 and a.selection_rows_ == (160, 80)
    assert RowCountARF.seen == [160, 160, 160, 240]


class LowDensityARF(fg.ARF):
    """ARF's samples with its density divided by e^50 (not normalised: a stand-in for a
    candidate whose samples win but whose density is poor)."""

    def log_prob(self, X, conditions=None, **kw):
        return super().log_prob(X, conditions, **kw) - 50.0


def test_a_density_below_the_column_marginals_yields_to_one_that_samples_nearly_as_well(
        monkeypatch):
    df = table()
    low = ("low density", LowDensityARF(n_trees=5, max_iters=0))
    marg = ("marginals", fg.auto.marginals_model())  # independent columns: a worse C2ST
    a = fg.AutoForest(candidates=[low, marg], random_state=0).fit(df)
    board = a.leaderboard_
    gap = board.loc[1, "c2st_distance"] - board.loc[0, "c2st_distance"]
    assert gap > a.tolerance
    assert board.loc[0, "log_likelihood"] < board.loc[0, "marginal_ll"]
    assert board.loc[1, "log_likelihood"] == pytest.approx(board.loc[1, "marginal_ll"])
    # the marginals win exactly when their C2ST is within MARGINAL_SLACK of the best
    assert a.best_name_ == ("marginals" if gap <= fg.auto.MARGINAL_SLACK else "low density")
    for slack, chosen in ((gap + 0.01, "marginals"), (gap - 0.01, "low density")):
        monkeypatch.setattr(fg.auto, "MARGINAL_SLACK", slack)
        assert fg.AutoForest(candidates=[low, marg], random_state=0).fit(df).best_name_ \
            == chosen
    b = fg.AutoForest(candidates=[low], random_state=0).fit(df)
    assert b.best_name_ == "low density"


def test_a_table_too_small_to_score_gets_the_prior_with_a_warning():
    df = table().head(12)
    with pytest.warns(UserWarning, match="too few to score candidates.*the prior candidate"):
        a = fg.AutoForest(random_state=0).fit(df)
    assert a.best_name_ == "Anchored" and a.n_validation_folds_ == 0
    # the default candidates (GF.Boost dropped at stop 52, Anchored added at stop 55)
    assert a.leaderboard_["candidate"].tolist() == ["ARF", "ARF best samples", "NRGBoost",
                                                   "Chain", "Anchored"]
    assert a.leaderboard_["chosen"].tolist()[-1] and a.leaderboard_["c2st_auc"].isna().all()
    with pytest.warns(UserWarning, match="the first candidate, 'ARF'"):
        b = fg.AutoForest(random_state=0, prior=None).fit(df)
    assert b.best_name_ == "ARF"
    assert len(a.sample(20, random_state=0)) == 20
    assert np.isfinite(a.log_prob(df)).all()


def test_a_bad_column_raises_the_learners_own_error():
    df = table().assign(empty=np.nan)
    with pytest.raises(ValueError, match="column 'empty' is entirely missing"):
        fg.AutoForest(random_state=0).fit(df)


def _fixed_utility(monkeypatch, by_type):
    """Make the validation TSTR of each candidate a fixed number, by its learner's class."""
    import forestgen.auto as auto

    monkeypatch.setattr(auto, "_utility", lambda model, *a: by_type[type(model).__name__])


def test_with_a_target_ties_within_the_c2st_noise_go_to_validation_tstr(monkeypatch):
    df = table()
    a = fg.AutoForest(candidates=cands(), random_state=0).fit(df, target="y")
    board = a.leaderboard_
    # the tie width is UTILITY_SE standard errors of the C2ST pooled over all 240 rows
    assert a.tie_width_ == pytest.approx(max(a.tolerance, fg.auto.UTILITY_SE * 0.41
                                             / np.sqrt(240)))
    assert board["tstr"].notna().all()  # R² of y from x and c, trained on samples
    tied = board["c2st_distance"] <= board["c2st_distance"].min() + a.tie_width_
    assert board.loc[board["chosen"], "tstr"].iloc[0] == board.loc[tied, "tstr"].max()
    gap = board.loc[1, "c2st_distance"] - board.loc[0, "c2st_distance"]
    assert gap > 0  # ARF samples better; RFDE wins on utility only within the tie width
    _fixed_utility(monkeypatch, {"ARF": 0.1, "RFDE": 0.9})
    for width, chosen in ((gap + 0.01, "uniform-ish RFDE"), (gap - 0.01, "small ARF")):
        monkeypatch.setattr(fg.auto, "UTILITY_SE", width * np.sqrt(240) / 0.41)
        b = fg.AutoForest(candidates=cands(), random_state=0).fit(df, target="y")
        assert b.best_name_ == chosen
        np.testing.assert_allclose(b.leaderboard_["tstr"], [0.1, 0.9])
    # without a target the utility is not computed and ties go to the log-likelihood
    c = fg.AutoForest(candidates=cands(), tolerance=1.0, random_state=0).fit(df)
    assert "tstr" not in c.leaderboard_ and c.tie_width_ == 1.0


def test_utility_never_overrides_the_zero_density_and_marginals_rules(monkeypatch):
    df = table()
    zero = ("zero density", ZeroDensityARF(n_trees=5, max_iters=0))
    rfde = cands()[1]
    _fixed_utility(monkeypatch, {"ZeroDensityARF": 1.0, "RFDE": 0.0})
    a = fg.AutoForest(candidates=[zero, rfde], tolerance=1.0, random_state=0).fit(
        df, target="c")
    assert a.best_name_ == rfde[0]
    low = ("low density", LowDensityARF(n_trees=5, max_iters=0))
    marg = ("marginals", fg.auto.marginals_model())
    _fixed_utility(monkeypatch, {"LowDensityARF": 1.0, "GFBoost": 0.0})
    monkeypatch.setattr(fg.auto, "MARGINAL_SLACK", 1.0)
    b = fg.AutoForest(candidates=[low, marg], tolerance=1.0, random_state=0).fit(
        df, target="c")
    assert b.best_name_ == "marginals"


def test_a_target_is_a_column_and_its_choice_is_seeded():
    df = table()
    with pytest.raises(ValueError, match="target column 'nope'"):
        fg.AutoForest(candidates=cands()).fit(df, target="nope")
    a = fg.AutoForest(candidates=cands(), random_state=5).fit(df, target="c")
    b = fg.AutoForest(candidates=cands(), random_state=5).fit(df, target="c")
    pd.testing.assert_frame_equal(a.leaderboard_.drop(columns="cpu_s"),
                                  b.leaderboard_.drop(columns="cpu_s"))
    assert 0.5 < a.leaderboard_["tstr"].max() <= 1.0  # ROC AUC of c from x and y


def test_without_any_validation_tstr_ties_go_to_the_log_likelihood(monkeypatch):
    df = table()
    _fixed_utility(monkeypatch, {"ARF": float("nan"), "RFDE": float("nan")})
    first_rfde = cands()[::-1]  # the first tied candidate is not the likelihood's choice
    a = fg.AutoForest(candidates=first_rfde, tolerance=1.0, random_state=0).fit(df, target="c")
    board = a.leaderboard_
    assert board["tstr"].isna().all()
    assert a.best_name_ == "small ARF"
    assert board.loc[board["chosen"], "log_likelihood"].iloc[0] == board["log_likelihood"].max()
    _fixed_utility(monkeypatch, {"ARF": float("nan"), "RFDE": 0.5})
    b = fg.AutoForest(candidates=cands(), tolerance=1.0, random_state=0).fit(df, target="c")
    assert b.best_name_ == "uniform-ish RFDE"


def test_the_prior_stays_unless_clearly_beaten():
    """The prior candidate is kept unless the rule's pick has a validation C2ST distance
    smaller than the prior's by more than PRIOR_SE standard errors of the C2ST."""
    df = table()
    se = 0.41 / np.sqrt(len(df))
    # the heavily smoothed RFDE as the prior: beaten by far more than two standard errors
    a = fg.AutoForest(candidates=cands(), prior="uniform-ish RFDE", random_state=0).fit(df)
    board = a.leaderboard_
    gap = board.loc[1, "c2st_distance"] - board.loc[0, "c2st_distance"]
    assert gap > fg.auto.PRIOR_SE * se and a.best_name_ == "small ARF"
    # the same evidence with a wider margin keeps the prior
    wide = gap / se + 0.5
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fg.auto, "PRIOR_SE", wide)
        b = fg.AutoForest(candidates=cands(), prior="uniform-ish RFDE", random_state=0).fit(df)
    np.testing.assert_allclose(b.leaderboard_["c2st_distance"], board["c2st_distance"])
    assert b.best_name_ == "uniform-ish RFDE"
    # a prior that is not a candidate's name changes nothing
    c = fg.AutoForest(candidates=cands(), prior="absent", random_state=0).fit(df)
    assert c.best_name_ == "small ARF"


def test_a_budget_that_bites_keeps_the_prior():
    """With a budget, the prior is scored first: scored last, it was the first dropped by a
    budget that bit, although it is the default's choice and its cheapest candidate."""
    pairs = cands() + [("prior", fg.ARF(n_trees=3, random_state=0))]
    a = fg.AutoForest(candidates=pairs, time_budget=1e-9, prior="prior",
                      random_state=0).fit(table())
    board = a.leaderboard_.set_index("candidate")
    assert not str(board.loc["prior", "note"]).startswith("skipped")
    assert all(str(board.loc[n, "note"]).startswith("skipped") for n, _ in cands())
    assert list(a.leaderboard_["candidate"]) == [n for n, _ in pairs]  # in the given order
