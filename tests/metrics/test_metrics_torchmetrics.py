"""torchmetrics wrappers: batched == one-shot, merge_state, reset."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

import forestgen.metrics as fm  # noqa: E402
from forestgen.metrics.torchmetrics import (  # noqa: E402
    C2ST,
    MMD,
    EnergyDistance,
    ForestLogLikelihood,
    MarginalDistance,
)


class _Gauss:
    """Stand-in forest: standard normal log density, accepts arrays or DataFrames."""

    def __init__(self) -> None:
        self.seen: list[type] = []

    def log_prob(self, X):
        self.seen.append(type(X))
        X = np.asarray(X, dtype=float)
        return -0.5 * (X**2).sum(1) - 0.5 * X.shape[1] * np.log(2 * np.pi)


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(240, 3)), rng.normal(0.3, 1.2, size=(180, 3))


def _batches(a: np.ndarray, n: int):
    return [torch.tensor(b) for b in np.array_split(a, n)]


def test_forest_log_likelihood_batches_equal_one_shot(data):
    x, _ = data
    model = _Gauss()
    m = ForestLogLikelihood(model)
    for b in _batches(x, 4):
        m.update(b)
    ref = fm.log_likelihood(model, x)
    assert m.compute().item() == pytest.approx(ref.mean, rel=1e-12)
    per_dim = ForestLogLikelihood(model, columns=["a", "b", "c"], per_dimension=True)
    per_dim.update(torch.tensor(x[:100]))
    per_dim.update(pd.DataFrame(x[100:], columns=["a", "b", "c"]))
    assert per_dim.compute().item() == pytest.approx(ref.per_dim, rel=1e-12)
    assert model.seen[-1] is pd.DataFrame and model.seen[-2] is pd.DataFrame


def test_forest_log_likelihood_merge_reset_and_errors(data):
    x, _ = data
    model = _Gauss()
    m1, m2 = ForestLogLikelihood(model), ForestLogLikelihood(model)
    m1.update(torch.tensor(x[:100]))
    m2.update(torch.tensor(x[100:]))
    m1.merge_state(m2)
    assert m1.compute().item() == pytest.approx(fm.log_likelihood(model, x).mean, rel=1e-12)
    assert int(m1.n_rows) == len(x)
    m1.reset()
    assert int(m1.n_rows) == 0
    m1.update(torch.tensor(x[:10]))
    assert m1.compute().item() == pytest.approx(fm.log_likelihood(model, x[:10]).mean)

    class Bad:
        def log_prob(self, X):
            out = np.zeros(len(X))
            out[0], out[1] = np.nan, -np.inf
            return out

    with pytest.raises(ValueError, match="NaN"):
        ForestLogLikelihood(Bad()).update(torch.tensor(x[:5]))

    class NegInf:
        def log_prob(self, X):
            out = np.zeros(len(X))
            out[:3] = -np.inf
            return out

    m = ForestLogLikelihood(NegInf())
    m.update(torch.tensor(x[:5]))
    m.update(torch.tensor(x[5:9]))
    assert int(m.n_neginf) == 6 and m.compute().item() == -np.inf


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
@pytest.mark.parametrize("cls, fn", [(MMD, fm.mmd), (EnergyDistance, fm.energy_distance)])
def test_kernel_metrics_batches_merge_reset(data, cls, fn):
    x, y = data
    m = cls(max_rows=None)
    for bx, by in zip(_batches(x, 3), _batches(y, 3)):
        m.update(bx, by)
    one_shot = fn(x, y, max_rows=None, preprocess=False)
    assert m.compute().item() == pytest.approx(one_shot, rel=1e-10)
    # merge: incoming states first, then local (torchmetrics order); value is order-free here
    a, b = cls(max_rows=None), cls(max_rows=None)
    a.update(torch.tensor(x[:100]), torch.tensor(y[:50]))
    b.update(torch.tensor(x[100:]), torch.tensor(y[50:]))
    a.merge_state(b)
    assert a.compute().item() == pytest.approx(one_shot, rel=1e-10)
    a.reset()
    with pytest.raises(RuntimeError):
        a.compute()
    a.update(real=torch.tensor(x))
    a.update(synthetic=torch.tensor(y))
    assert a.compute().item() == pytest.approx(one_shot, rel=1e-10)


def test_marginal_distance_histograms(data):
    x, y = data
    x = x.copy()
    x[:, 2] = np.round(x[:, 2])  # a discrete column -> one bin per value
    y = y.copy()
    y[:, 2] = np.clip(np.round(y[:, 2]), x[:, 2].min(), x[:, 2].max())
    y[:7, 0] = np.nan
    kinds = {"x0": "numeric", "x1": "numeric", "x2": "categorical"}
    m = MarginalDistance(x, n_bins=10, kinds=kinds)
    for b in _batches(y, 5):
        m.update(b)
    batched = m.compute()
    single = MarginalDistance(x, n_bins=10, kinds=kinds)
    single.update(torch.tensor(y))
    one = single.compute()
    for k in ("tv", "ks"):
        assert torch.allclose(batched[k], one[k])
    # numpy reference for the discrete column: exact TV between value frequencies
    p = pd.Series(x[:, 2]).value_counts(normalize=True)
    q = pd.Series(y[:, 2]).value_counts(normalize=True)
    p, q = p.align(q, fill_value=0)
    assert batched["tv"][2].item() == pytest.approx(0.5 * (p - q).abs().sum())
    # numpy reference for a continuous column with the same edges
    edges = m.edges[1][torch.isfinite(m.edges[1])].numpy()
    hp = np.bincount(np.searchsorted(edges, x[:, 1], side="left"), minlength=len(edges) + 1)
    hq = np.bincount(np.searchsorted(edges, y[:, 1], side="left"), minlength=len(edges) + 1)
    tv = 0.5 * np.abs(hp / hp.sum() - hq / hq.sum()).sum()
    assert batched["tv"][1].item() == pytest.approx(tv)
    # missing values count in their own bin
    assert batched["tv"][0].item() >= 7 / len(y) / 2
    # explicit real batches and merge_state / reset
    a, b = MarginalDistance(x, n_bins=10, kinds=kinds), MarginalDistance(x, n_bins=10, kinds=kinds)
    a.update(torch.tensor(y[:90]), real=torch.tensor(x[:120]))
    b.update(torch.tensor(y[90:]), real=torch.tensor(x[120:]))
    a.merge_state(b)
    assert torch.allclose(a.compute()["tv"], one["tv"])
    a.reset()
    assert float(a.synthetic_counts.sum()) == 0.0
    a.update(torch.tensor(x))
    assert torch.allclose(a.compute()["tv"], torch.zeros(3, dtype=torch.float64))


def test_c2st_metric_equals_numpy(data):
    x, y = data
    m = C2ST(n_folds=3)
    for bx, by in zip(_batches(x, 2), _batches(y, 2)):
        m.update(bx, by)
    out = m.compute()
    ref = fm.c2st(x, y, n_folds=3)
    assert out["auc"].item() == pytest.approx(ref.auc)
    assert out["auc_ci_low"].item() == pytest.approx(ref.auc_ci[0])
    assert m.result == ref


def _schema():
    from forestgen.data.schema import ColumnSpec, Schema

    return Schema([ColumnSpec("a", "continuous", "float64"),
                   ColumnSpec("c", "categorical", "object", categories=["u", "v", "w"])])


def test_kinds_come_from_the_schema_never_from_cardinality():
    rng = np.random.default_rng(1)
    # 12 rows: the float column has 12 distinct values, the code column 3 levels
    ref = np.c_[rng.normal(size=12), rng.integers(0, 3, 12)]
    untyped = MarginalDistance(ref)
    assert untyped.categorical.tolist() == [False, False]  # no guessing from few values
    typed = MarginalDistance(ref, kinds=_schema())
    assert typed.categorical.tolist() == [False, True]
    # a level the reference never had is unseen: full TV, not merged into a neighbouring bin
    syn = np.c_[rng.normal(size=30), np.full(30, 5.0)]
    typed.update(torch.tensor(syn))
    assert typed.compute()["tv"][1].item() == pytest.approx(1.0)
    # a mapping declares the same kinds by column name
    named = MarginalDistance(ref, kinds={"a": "numeric", "c": "categorical"})
    assert named.categorical.tolist() == [False, True]


def test_two_sample_wrappers_pass_declared_kinds(data):
    x, y = data
    x, y = x[:, :2].copy(), y[:, :2].copy()
    x[:, 1], y[:, 1] = np.floor(np.abs(x[:, 1]) * 1.5) % 3, np.floor(np.abs(y[:, 1])) % 3
    frames = [pd.DataFrame(v, columns=["a", "c"]) for v in (x, y)]
    kinds = {"a": "numeric", "c": "categorical"}
    m = C2ST(n_folds=3, kinds=_schema())
    m.update(torch.tensor(x), torch.tensor(y))
    ref = fm.c2st(*frames, n_folds=3, kinds=kinds)
    assert m.compute()["auc"].item() == pytest.approx(ref.auc)
    assert m.result == ref
    mm = MMD(preprocess=True, max_rows=None, kinds=kinds, columns=["a", "c"])
    mm.update(torch.tensor(x), torch.tensor(y))
    one_hot = fm.mmd(*frames, max_rows=None, kinds=kinds)
    assert mm.compute().item() == pytest.approx(one_hot, rel=1e-10)
    assert one_hot != pytest.approx(fm.mmd(x, y, max_rows=None), rel=1e-6)  # kinds matter
    # declared kinds preprocess by default (they failed with the old default, False)
    e = EnergyDistance(max_rows=None, kinds=kinds, columns=["a", "c"])
    e.update(torch.tensor(x), torch.tensor(y))
    assert e.compute().item() == pytest.approx(
        fm.energy_distance(*frames, max_rows=None, kinds=kinds), rel=1e-10)
    mm = MMD(max_rows=None, kinds=kinds, columns=["a", "c"])
    mm.update(torch.tensor(x), torch.tensor(y))
    assert mm.compute().item() == pytest.approx(one_hot, rel=1e-10)
    with pytest.raises(ValueError, match="preprocess=True"):
        e = EnergyDistance(kinds=kinds, preprocess=False)
        e.update(torch.tensor(x), torch.tensor(y))
        e.compute()
    bad = C2ST(kinds=kinds)
    bad.update(torch.tensor(np.c_[x, x]), torch.tensor(np.c_[y, y]))
    with pytest.raises(ValueError, match="4 columns but 2"):
        bad.compute()


def test_forest_log_likelihood_reads_the_torch_layers_encoded_rows():
    """Encoded rows (level codes) read as a table were unseen levels (-44.9 against -26.2)."""
    import forestgen as fg
    from forestgen.metrics.torchmetrics import ForestLogLikelihood

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(["p", "q", "r"], 200)})
    m = fg.ARF(n_trees=5, random_state=0).fit(df)
    Z = m.to_torch(dtype=torch.float64).encode(df.head(50))
    metric = ForestLogLikelihood(m, encoded=True)
    metric.update(Z[:20])
    metric.update(Z[20:])
    assert metric.compute().item() == pytest.approx(float(np.mean(m.log_prob(df.head(50)))),
                                                    rel=1e-12)
    with pytest.raises(ValueError, match="columns=None"):
        ForestLogLikelihood(m, columns=["x", "c"], encoded=True)
