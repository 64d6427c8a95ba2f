"""The one logsumexp (forestgen.logsumexp): every form follows the same rule for NaN, +inf
and -inf terms, and they agree on ordinary values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from forestgen.logsumexp import (
    logmeanexp,
    logsumexp,
    lse_merge,
    lse_push,
    lse_value,
    segment_logsumexp,
    torch_logsumexp,
    torch_segment_logsumexp,
)

NAN, INF = math.nan, math.inf
CASES = [  # terms -> the rule's answer
    ([], -INF),
    ([-INF, -INF], -INF),
    ([0.0, -INF], 0.0),
    ([1.0, INF], INF),
    ([1.0, NAN], NAN),
    ([INF, NAN], NAN),
    ([NAN, INF], NAN),
    ([-INF, NAN], NAN),
    ([INF, INF], INF),
]


@njit(cache=True)
def _streamed(v):
    mx, acc = -np.inf, 0.0
    for x in v:
        mx, acc, _, _ = lse_push(mx, acc, x)
    return lse_value(mx, acc)


@njit(cache=True)
def _merged(v, split):
    a, sa = -np.inf, 0.0
    for x in v[:split]:
        a, sa, _, _ = lse_push(a, sa, x)
    b, sb = -np.inf, 0.0
    for x in v[split:]:
        b, sb, _, _ = lse_push(b, sb, x)
    mx, acc, _, _ = lse_merge(a, sa, b, sb)
    return lse_value(mx, acc)


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) < 1e-12 * max(1, abs(b))


@pytest.mark.parametrize("terms, want", CASES)
def test_every_form_follows_one_rule(terms, want):
    import torch

    v = np.array(terms, float)
    got = {
        "numpy": logsumexp(v),
        "axis": float(logsumexp(v[:, None], axis=0)[0]),
        "segment": float(segment_logsumexp(np.array([0, len(v)]), v)[0]),
        "stream": float(_streamed(v)),
        "torch": float(torch_logsumexp(torch.tensor(v, dtype=torch.float64), 0)),
        "torch segment": float(torch_segment_logsumexp(
            torch.tensor(v, dtype=torch.float64), torch.zeros(len(v), dtype=torch.long), 1)[0]),
    }
    for split in range(len(v) + 1):
        got[f"merge at {split}"] = float(_merged(v, split))
    bad = {k: g for k, g in got.items() if not _same(g, want)}
    assert not bad, (terms, want, bad)


def test_forms_agree_on_ordinary_values():
    import torch

    rng = np.random.default_rng(0)
    v = rng.normal(scale=30, size=(7, 5))
    ref = np.log(np.exp(v.astype(np.longdouble)).sum(axis=0)).astype(float)
    ptr = np.arange(6) * 7
    flat = v.T.ravel()
    np.testing.assert_allclose(logsumexp(v, axis=0), ref, rtol=1e-13)
    np.testing.assert_allclose(segment_logsumexp(ptr, flat), ref, rtol=1e-13)
    np.testing.assert_allclose([_streamed(v[:, c]) for c in range(5)], ref, rtol=1e-13)
    np.testing.assert_allclose([_merged(v[:, c], 3) for c in range(5)], ref, rtol=1e-13)
    np.testing.assert_allclose(torch_logsumexp(torch.tensor(v), 0).numpy(), ref, rtol=1e-13)
    rows = torch.repeat_interleave(torch.arange(5), 7)
    np.testing.assert_allclose(torch_segment_logsumexp(torch.tensor(flat), rows, 5).numpy(),
                               ref, rtol=1e-13)
    np.testing.assert_allclose(logmeanexp(v, axis=0), ref - math.log(7), rtol=1e-13)


def test_torch_gradient_is_zero_where_every_term_is_minus_inf():
    import torch

    s = torch.tensor([[-INF, 0.0], [-INF, 1.0]], dtype=torch.float64, requires_grad=True)
    out = torch_logsumexp(s, 0)
    assert out[0] == -INF
    out[1].backward()
    assert torch.isfinite(s.grad).all() and s.grad[:, 0].eq(0).all()
    np.testing.assert_allclose(s.grad[:, 1].numpy(), np.exp([0, 1]) / np.exp([0, 1]).sum())
