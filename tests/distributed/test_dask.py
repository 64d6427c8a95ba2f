"""forestgen.distributed on 2-worker (and 1-worker) Dask LocalClusters (in-process workers)."""

from __future__ import annotations

import hashlib

import dask.dataframe as dd  # the dev extra installs dask: these tests never skip
import distributed
import numpy as np
import pandas as pd
import pytest

from forestgen import distributed as fd
from forestgen.data import TableEncoder
from forestgen.learners import ARF
from forestgen.leaves import CategoricalLeaf, TruncNormalLeaf, UniformLeaf
from forestgen.leaves.base import ColumnCell
from forestgen.leaves.stats import LevelStats, MomentStats, column_scale


def _table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    c = rng.choice(["a", "b", "c"], size=n, p=[0.5, 0.3, 0.2])
    y = 2 * x + (c == "a") + 0.3 * rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": y, "c": c, "k": rng.integers(0, 5, size=n)})
    df.loc[::40, "x"] = np.nan
    return df


TRAIN, TEST = _table(3000, 0), _table(1500, 1)


def _cluster(n_workers: int):
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1,
                                       processes=False, dashboard_address=":0")
    return cluster, distributed.Client(cluster, set_as_default=False)


@pytest.fixture(scope="module")
def clients():
    """A 2-worker and a 1-worker cluster; tests switch with ``client.as_current()``."""
    c2, k2 = _cluster(2)
    c1, k1 = _cluster(1)
    yield {2: k2, 1: k1}
    for k, c in ((k2, c2), (k1, c1)):
        k.close()
        c.close()


@pytest.fixture(scope="module")
def fits(clients):
    ddf = dd.from_pandas(TRAIN, npartitions=4)
    out = {}
    for w, client in clients.items():
        with client.as_current():
            out[w] = fd.fit_arf(ddf, n_trees=10, random_state=0, n_blocks=2)
    return out


def test_distributed_fit_matches_single_machine_heldout_loglik(fits):
    dist = fits[2]
    single = ARF(n_trees=10, random_state=0).fit(TRAIN)
    ld, ls = dist.log_prob(TEST), single.log_prob(TEST)
    assert np.isfinite(ld).all() and np.isfinite(ls).all()
    diff = ld - ls
    se = diff.std() / np.sqrt(len(diff))
    assert abs(diff.mean()) < 4 * se, (ld.mean(), ls.mean(), se)
    # and both are far better than a product of the marginals (a round-0-only forest of stumps)
    stumps = ARF(n_trees=10, random_state=0, max_depth=0, max_iters=0).fit(TRAIN)
    assert stumps.score(TEST) < ld.mean() - 0.5
    assert dist.n_rounds_ >= 2 and dist.fit_diagnostics_[0]["oob_accuracy"] > 0.6


def test_distributed_fit_is_identical_for_any_number_of_workers(fits):
    a, b = fits[1], fits[2]
    for k, v in a.forest_.to_arrays().items():
        np.testing.assert_array_equal(v, b.forest_.to_arrays()[k], err_msg=k)
    np.testing.assert_array_equal(a.leaf_log_weight_, b.leaf_log_weight_)
    for la, lb in zip(a.leaf_models_, b.leaf_models_):
        for k, v in la.param_arrays().items():
            np.testing.assert_array_equal(v, lb.param_arrays()[k])
    assert a.fit_diagnostics_[-1]["oob_accuracy"] == b.fit_diagnostics_[-1]["oob_accuracy"]


def test_distributed_leaf_statistics_equal_single_machine(clients):
    model = ARF(n_trees=5, random_state=1, finite_bounds="local").fit(TRAIN)
    ddf = dd.from_pandas(TRAIN, npartitions=5)
    with clients[2].as_current():
        dist = fd.leaf_statistics(model, ddf)
    whole = fd.leaf_statistics(model, TRAIN)  # one partition
    np.testing.assert_array_equal(dist.coverage, whole.coverage)
    np.testing.assert_array_equal(dist.missing, whole.missing)
    for a, b in zip(dist.columns, whole.columns):
        if isinstance(a, LevelStats):
            np.testing.assert_array_equal(a.counts, b.counts)
        else:
            for f in ("count", "vmin", "vmax"):
                np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
            # merged moments: equal up to the rounding of the merges
            np.testing.assert_allclose(a.mean, b.mean, rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(a.m2, b.m2, rtol=1e-9, atol=1e-13)
    # refitting the single-machine model's leaves from the distributed statistics gives its
    # own leaves back: weights, pmfs, counts and missing rates exactly, normals to rounding
    refit = ARF(n_trees=5, random_state=1, finite_bounds="local").fit(TRAIN)
    with clients[2].as_current():
        fd.refit_leaves(refit, ddf)
    np.testing.assert_array_equal(refit.leaf_log_weight_, model.leaf_log_weight_)
    np.testing.assert_array_equal(refit.missing_rate_, model.missing_rate_)
    assert refit.missing_parent_ is None  # the statistics do not say which rows nest
    for la, lb in zip(refit.leaf_models_, model.leaf_models_):
        for k, v in la.param_arrays().items():
            if v.dtype.kind != "f" or k in ("count_", "lo_", "hi_"):
                np.testing.assert_array_equal(v, lb.param_arrays()[k], err_msg=k)
            else:
                np.testing.assert_allclose(v, lb.param_arrays()[k], rtol=1e-9, err_msg=k)


def test_honest_refit_on_new_rows_changes_only_leaf_parameters(clients):
    model = ARF(n_trees=5, random_state=2).fit(TRAIN)
    trees = model.forest_.to_arrays()
    with clients[2].as_current():
        fd.refit_leaves(model, dd.from_pandas(TEST, npartitions=3))
    direct = fd.leaf_statistics(model, TEST)
    for k, v in model.forest_.to_arrays().items():
        np.testing.assert_array_equal(v, trees[k])
    cover = np.exp(model.leaf_log_weight_) * model.forest_.n_trees
    np.testing.assert_allclose(cover * len(TEST), direct.coverage, rtol=1e-12)


def test_sampling_to_parquet_is_bit_identical_for_1_and_2_workers(fits, clients, tmp_path):
    model = fits[2]
    digests = {}
    for w, client in clients.items():
        with client.as_current():
            paths = fd.sample_to_parquet(model, 2500, tmp_path / f"w{w}", rows_per_part=1000,
                                         random_state=7)
        assert [p.name for p in paths] == ["part-00000.parquet", "part-00001.parquet",
                                           "part-00002.parquet"]
        digests[w] = [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths]
    assert digests[1] == digests[2]
    # and without a cluster (Dask's local threads)
    paths = fd.sample_to_parquet(model, 2500, tmp_path / "local", rows_per_part=1000,
                                 random_state=7)
    assert [hashlib.sha256(p.read_bytes()).hexdigest() for p in paths] == digests[1]
    out = dd.read_parquet(tmp_path / "w2").compute()
    assert len(out) == 2500 and list(out.columns) == list(TRAIN.columns)
    assert len(set(digests[1])) == 3  # each part draws its own rows
    # the synthetic rows follow the training distribution
    assert abs(out["y"].mean() - TRAIN["y"].mean()) < 0.15
    assert set(out["c"].dropna()) <= {"a", "b", "c"}
    assert abs((out["c"] == "a").mean() - (TRAIN["c"] == "a").mean()) < 0.05


def test_log_prob_of_dask_frame_equals_pandas(fits, clients):
    model = fits[2]
    with clients[2].as_current():
        lp = fd.log_prob(model, dd.from_pandas(TEST, npartitions=3)).compute()
    np.testing.assert_array_equal(lp.to_numpy(), model.log_prob(TEST))


def test_level_missing_from_the_encoder_sample_is_named(clients):
    df = TRAIN.copy()
    df.loc[df.index[-10:], "c"] = "zzz"  # only in the last partition's tail
    ddf = dd.from_pandas(df, npartitions=3)
    with clients[2].as_current(), pytest.raises(ValueError, match="column 'c'"):
        fd.fit_arf(ddf, n_trees=2, random_state=0, encoder_rows=30, max_iters=0)


def test_an_infinite_value_outside_the_encoder_sample_is_named(clients):
    """Training rows with ``inf`` are refused by name though the encoder, fitted on a sample,
    keeps a query's ``inf`` as a value past the range."""
    num = next(c for c in TRAIN.columns if pd.api.types.is_float_dtype(TRAIN[c]))
    df = TRAIN.copy()
    df.loc[df.index[-1], num] = np.inf  # only in the last partition's tail
    ddf = dd.from_pandas(df, npartitions=3)
    with clients[2].as_current(), pytest.raises(ValueError,
                                                match=f"column '{num}' contains infinite"):
        fd.fit_arf(ddf, n_trees=2, random_state=0, encoder_rows=30, max_iters=0)


def test_levels_seen_only_outside_the_encoder_sample_are_in_the_support(clients):
    """The Dask encoder takes each label column's unobserved levels from every row, not from
    its sample: "c" only in the last partition's tail is seen; "d", declared, is not."""
    df = TRAIN.assign(c=pd.Categorical(TRAIN["c"].where(TRAIN["c"] != "c", "a"),
                                       categories=["a", "b", "c", "d"]))
    df.loc[df.index[-10:], "c"] = "c"
    ddf = dd.from_pandas(df, npartitions=3)
    with clients[2].as_current():
        enc = fd.fit_encoder(ddf, encoder_rows=30)
    assert enc.schema["c"].unobserved == [3]
    assert TableEncoder().fit(df).schema["c"].unobserved == [3]


def test_oob_coverage_is_not_supported(clients):
    with clients[2].as_current(), pytest.raises(NotImplementedError, match="coverage='oob'"):
        fd.fit_arf(dd.from_pandas(TRAIN, npartitions=2), n_trees=2, coverage="oob")


def test_numeric_prior_is_not_supported(clients):
    with clients[2].as_current(), pytest.raises(NotImplementedError, match="numeric_prior=3"):
        fd.fit_arf(dd.from_pandas(TRAIN, npartitions=2), n_trees=2, numeric_prior=3.0)


def test_grid_spikes_weight_is_not_supported(clients):
    with clients[2].as_current(), pytest.raises(NotImplementedError, match="grid_spikes=0.5"):
        fd.fit_arf(dd.from_pandas(TRAIN, npartitions=2), n_trees=2, grid_spikes=0.5)


# ---------------------------------------------------------------- sufficient statistics
def _pairs(seed, n=400, L=7):
    rng = np.random.default_rng(seed)
    x = rng.normal(3.0, 2.0, n)
    x[::9] = np.nan
    return x, rng.integers(0, L, n), L


def test_moment_stats_merge_equals_stats_of_the_union():
    x, leaf, L = _pairs(0)
    a = MomentStats.from_pairs(x[:150], leaf[:150], L, minmax=True)
    b = MomentStats.from_pairs(x[150:], leaf[150:], L, minmax=True)
    u = MomentStats.from_pairs(x, leaf, L, minmax=True)
    m = a.merge(b)
    np.testing.assert_array_equal(m.count, u.count)
    np.testing.assert_array_equal(m.vmin, u.vmin)
    np.testing.assert_array_equal(m.vmax, u.vmax)
    np.testing.assert_allclose(m.mean, u.mean, rtol=1e-13)
    np.testing.assert_allclose(m.var, np.array([np.nanvar(x[leaf == i], ddof=1)
                                                for i in range(L)]), rtol=1e-12)
    # an empty part changes nothing
    e = MomentStats.from_pairs(x[:0], leaf[:0], L, minmax=True)
    np.testing.assert_array_equal(u.merge(e).mean, u.mean)
    np.testing.assert_array_equal(e.merge(u).m2, u.m2)


def test_leaf_models_fit_from_stats_as_from_pairs():
    x, leaf, L = _pairs(1)
    cell = ColumnCell(lower=np.full(L, -np.inf), upper=np.full(L, np.inf), allowed=None,
                      data_min=float(np.nanmin(x)), data_max=float(np.nanmax(x)))
    s = column_scale(cell.data_min, cell.data_max)
    st = MomentStats.from_pairs(x, leaf, L, scale=s, minmax=True)
    for proto in (TruncNormalLeaf(), TruncNormalLeaf(finite_bounds="local"), UniformLeaf()):
        a = type(proto)(**proto.get_params()).fit(x, leaf, cell)
        b = type(proto)(**proto.get_params()).fit_stats(st, cell)
        for k, v in a.param_arrays().items():
            np.testing.assert_array_equal(v, b.param_arrays()[k], err_msg=f"{proto} {k}")
    codes = np.floor(np.abs(np.nan_to_num(x))).clip(0, 3)
    allowed = np.ones((L, 4), bool)
    allowed[0, 3] = False
    dcell = ColumnCell(lower=np.full(L, -np.inf), upper=np.full(L, np.inf), allowed=allowed,
                       data_min=0.0, data_max=3.0, n_levels=4)
    a = CategoricalLeaf(alpha=0.5).fit(codes, leaf, dcell)
    b = CategoricalLeaf(alpha=0.5).fit_stats(LevelStats.from_pairs(codes, leaf, L, 4), dcell)
    for k, v in a.param_arrays().items():
        np.testing.assert_array_equal(v, b.param_arrays()[k], err_msg=k)
    pa = a.probs(np.arange(L))
    np.testing.assert_array_equal(pa, b.probs(np.arange(L)))
    assert (pa[0, 3] == 0) and np.allclose(pa.sum(1), 1)


def test_point_mass_column_refits_from_distributed_statistics(clients):
    # a zero-inflated column (60% zeros) gets PointMassLeaf; its atom shares and the moments of
    # the other values merge over partitions and give the single-machine leaves back
    rng = np.random.default_rng(5)
    n = 1500
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "spend": np.where(rng.random(n) < 0.6, 0.0, rng.gamma(2.0, 50.0, n)),
                       "g": rng.choice(list("abc"), n)})
    # the paper's model: the distributed statistics carry no back-off tree (marginal_weight)
    model = ARF(n_trees=5, random_state=3, marginal_weight=0).fit(df)
    assert type(model.leaf_models_[1]).__name__ == "PointMassLeaf"
    refit = ARF(n_trees=5, random_state=3, marginal_weight=0).fit(df)
    with clients[2].as_current():
        fd.refit_leaves(refit, dd.from_pandas(df, npartitions=4))
    for k, v in model.leaf_models_[1].param_arrays().items():
        np.testing.assert_allclose(refit.leaf_models_[1].param_arrays()[k], v, rtol=1e-9,
                                   atol=1e-12, err_msg=k)
    np.testing.assert_allclose(refit.log_prob(df.head(200)), model.log_prob(df.head(200)),
                               rtol=1e-9)
    with clients[2].as_current():
        fitted = fd.fit_arf(dd.from_pandas(df, npartitions=4), n_trees=4, random_state=0)
    zero_share = float((fitted.sample(4000, random_state=1)["spend"] == 0).mean())
    assert abs(zero_share - 0.6) < 0.05


def test_back_off_is_refused_where_statistics_cannot_carry_it(clients):
    """A model backed off toward the marginals (``marginal_weight_ > 0``) cannot refit its
    leaves from forest statistics (the back-off leaf is not among them): a clear error, not
    a silently different model. ``fit_arf`` fits the paper's model under the default
    ``"auto"`` and refuses an explicit weight."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({f"x{j}": rng.normal(size=120) for j in range(4)}
                      | {"c": rng.choice(["a", "b"], 120)})  # independent columns
    backed = ARF(n_trees=5, random_state=0).fit(df)
    assert backed.marginal_weight_ > 0
    ddf = dd.from_pandas(df, npartitions=2)
    with clients[2].as_current():
        with pytest.raises(NotImplementedError, match=r"ARF\.fit_leaves_from_stats.*"
                                                      r"marginal_weight=0"):
            fd.refit_leaves(backed, ddf)
        with pytest.raises(NotImplementedError, match=r"fit_arf: marginal_weight=0\.5"):
            fd.fit_arf(ddf, n_trees=3, random_state=0, marginal_weight=0.5)
        fitted = fd.fit_arf(ddf, n_trees=3, random_state=0)
    assert fitted.marginal_weight == "auto" and fitted.marginal_weight_ == 0.0
    assert np.isfinite(fitted.log_prob(df.head(20))).all()
