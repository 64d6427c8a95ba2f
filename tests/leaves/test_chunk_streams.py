"""FORGE from THREAD_ROWS rows on: (column, chunk) tasks with their own uniform streams
(issue 33 item 5). The chunks draw the same law as the row-by-row path, independently, and
the Generator's next draws do not depend on how many chunks there were."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import ARF
from forestgen.sampling.ancestral import THREAD_ROWS, chunk_entropy, chunk_seed, chunk_seeds


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(11)
    n = 1500
    z = rng.standard_normal(n)
    df = pd.DataFrame({"x": z, "y": np.exp(z + 0.3 * rng.standard_normal(n)),
                       "g": np.array(list("abcd"))[(z > 0) + 2 * (rng.random(n) < 0.3)]})
    return ARF(n_trees=4, min_node_size=5, n_jobs=2, random_state=0).fit(df)


def test_chunked_law_matches_the_row_path(model):
    big = model.sample_encoded(3 * THREAD_ROWS + 7, random_state=1)  # four chunks a column
    small = np.vstack([model.sample_encoded(THREAD_ROWS - 1, random_state=s) for s in (2, 3, 4)])
    for j in (0, 1):  # numeric columns: two-sample KS at a strict level
        assert stats.ks_2samp(big[:, j], small[:, j]).pvalue > 1e-4
    kb = np.bincount(big[:, 2].astype(int), minlength=4)
    ks = np.bincount(small[:, 2].astype(int), minlength=4)
    assert stats.chi2_contingency(np.stack([kb, ks])).pvalue > 1e-4


def test_chunks_draw_independent_uniforms(model):
    # one leaf per row, the same leaf everywhere: with shared or repeated streams the chunks
    # of a column would repeat one another's values
    n = 2 * THREAD_ROWS
    leaf = np.zeros(n, np.int64)
    out = model.component("sampler").draw(model, leaf, np.random.default_rng(5))
    a, b = out[:THREAD_ROWS, 0], out[THREAD_ROWS:, 0]
    assert not np.array_equal(np.sort(a), np.sort(b))
    assert abs(np.corrcoef(np.sort(a)[::97], np.sort(b)[::97])[0, 1]) > 0.99  # same law
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05  # not paired
    assert abs(np.corrcoef(out[:, 0], out[:, 1])[0, 1]) < 0.05  # columns not paired either


def test_chunk_seeds_leave_the_generator_where_any_count_would():
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    sa, sb = chunk_seeds(a, 3), chunk_seeds(b, 9)
    assert a.random() == b.random()

    def first(seeds):
        return [np.random.Generator(np.random.PCG64(s)).random() for s in seeds]

    assert first(sa) == first(sb[:3])  # spawn order is stable
    assert len(set(first(sb))) == 9


def test_chunk_seed_is_the_spawned_child():
    """A task's own seed (made in the task) is the child spawn would have given it."""
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    spawned, entropy = chunk_seeds(a, 6), chunk_entropy(b)
    assert a.random() == b.random()
    for k, s in enumerate(spawned):
        own = chunk_seed(entropy, k)
        assert np.array_equal(own.generate_state(8), s.generate_state(8))
        assert np.random.Generator(np.random.PCG64(own)).random(5).tolist() == \
            np.random.Generator(np.random.PCG64(s)).random(5).tolist()
