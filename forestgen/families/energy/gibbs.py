"""Gibbs sampling from an additive energy, and NRGBoost's rejection/refresh training pool.

Systematic-scan Gibbs (spec ``nrgboost_def.md`` §5.2): a sweep updates the free columns in
order; column ``j`` is drawn from ``softmax_k (log q0_j(k) + sum_t value_t(x with x_j := k))``,
computed per tree that splits on ``j`` from its leaf bitsets
(:mod:`~forestgen.families.energy.leaf_sets`: the leaves the line through ``x`` along ``j`` crosses,
the AND of the tree's bitsets of the other columns, kept as a prefix and a suffix so that a
column update costs about two ANDs per tree instead of a walk). Chains run in parallel blocks,
each chain with its own splitmix64 stream seeded from a ``SeedSequence`` spawn, so results do
not depend on the number of threads. Conditioning = clamping: clamped columns are not updated,
and an ``allowed`` weight per chain and code restricts the codes a free column may take
(interval / level-set evidence: 0 for a code outside it, the share of a bin's mass inside an
interval that cuts the bin), added to the logits as its log.

Two shortcuts change the logits only in floating-point rounding, not the conditional law: a tree
whose line crosses a single leaf adds the same value to every code of ``j`` and is skipped (the
softmax cancels it), and the softmax's ``exp`` is :func:`exp_below`, a branch-free polynomial
that the compiler vectorises (within one ulp of ``exp``; the same bits on every thread).

Pool (spec §3.5, Alg. 1, with one change): round 2 draws ``M`` exact samples of ``q_1`` by
rejection from ``q0``. Later rounds keep every sample but *reweight* it: each sample caches its
log importance weight ``log q_t(x) - log q_drawn(x)``, to which a round adds only the newest
tree's value (minus the round's log Z step, estimated from the pool itself). Then each sample
is dropped with probability ``p_refresh`` and the dropped ones are refilled with Gibbs chains
(weight 1), and the pool is resampled if its effective size falls below ``min_ess · M``. The
refill chains start once at training rows with ``burn_in`` sweeps and then persist across rounds
(the official code restarts them, burn-in included, every round). The paper instead *rejects*
survivors with probability
``1 - exp(v - max v)`` and refills those too: in expectation the same masses, but the weights
carry the information rejection throws away (lower variance), and the refill — the only part
of a round whose cost grows with the number of trees, since a Gibbs sweep is linear in trees —
shrinks to the ``p_refresh`` fraction (on the 10,000-row synthetic table of
``benchmarks/bench_nrgboost.py``, 8,000 instead of about 17,700 fresh samples per round).

Flat refill (``refill_trees=k``): any draw of a *new* point of the current model must evaluate
all ``t`` trees on it, so a round costs at least (fresh points) x ``t``; a per-round cost flat
in ``t`` needs about ``1/t`` fresh points per round. The flat refill spends a constant budget,
``p_refresh · M · k`` tree evaluations (the paper's refill at ``k`` trees), on sweeps of the
persistent chains and replaces only that many random samples with their draws; the other
samples stay with their importance weights (exact draws of the current model as far as the
pool is, reweighted tree by tree).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from forestgen.families.energy.ensembler import AdditiveEnergy
from forestgen.families.energy.leaf_sets import ALL
from forestgen.logsumexp import logsumexp
from forestgen.parallel import parallel_kernel
from forestgen.registry import register
from forestgen.sampling.base import Sampler


class Schedule(NamedTuple):
    """``n_sweeps`` sweeps; the state is recorded after sweeps ``record_from``,
    ``record_from + thin``, ... (``n_rec`` records)."""

    n_sweeps: int
    record_from: int
    thin: int
    n_rec: int


class ChainEvidence(NamedTuple):
    """The columns a sweep updates (``free_cols``, ascending) and the log-weights of the codes
    each chain may take (``-inf``: excluded): ``allowed [m, sum(n_codes)]`` rows, chain ``i``
    reading row ``arow[i]``."""

    free_cols: np.ndarray
    allowed: np.ndarray
    arow: np.ndarray


class CodeGrid(NamedTuple):
    """Per-code base log-mass ``log_q0`` at flat offsets ``off``; per column ``n_codes``,
    ``n_values`` and ``ordered``."""

    log_q0: np.ndarray
    off: np.ndarray
    n_codes: np.ndarray
    n_values: np.ndarray
    ordered: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _uniform(st, i):
    """splitmix64 step on ``st[i]``; a double in [0, 1)."""
    z = st[i] + np.uint64(0x9E3779B97F4A7C15)
    st[i] = z
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM ``fma``: one vector instruction where the loop
    vectorises; Numba otherwise keeps a multiply and an add apart)."""
    if not all(isinstance(x, (types.Float, types.Integer)) for x in (a, b, c)):
        return None
    sig = types.float64(a, b, c)

    def codegen(context, builder, sig, args):
        return builder.fma(*(context.cast(builder, v, t, types.float64)
                             for v, t in zip(args, sig.args)))
    return sig, codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238  # ln 2 split so that q * _LN2_HI is exact for |q| < 2^11
_LN2_LO = 1.9082149292705877e-10
#: below this exponent ``exp_below`` returns 0 (``exp(-708)`` is about the smallest normal)
EXP_FLOOR = -708.0


@njit(cache=True, nogil=True, inline="always")
def exp_below(lg, n, mx, bits, scale):
    """``lg[:n] := exp(lg[:n] - mx[:n])`` for ``lg <= mx`` elementwise (0 below
    ``EXP_FLOOR``, so for ``-inf``): ``2^q`` times a degree-13 Taylor polynomial on
    ``|r| <= ln2 / 2`` in fused multiply-adds (within one ulp of ``exp``: relative error
    below ``2.3e-16``), written without branches so that the loops vectorise; ``bits``
    (int64) and ``scale`` (its float64 view) are scratch of at least ``n``."""
    for k in range(n):
        y0 = lg[k] - mx[k]
        y = max(y0, EXP_FLOOR)
        q = math.floor(y * _LOG2E + 0.5)
        r = fma(-q, _LN2_LO, fma(-q, _LN2_HI, y))
        p = 1.0 / 6227020800.0
        p = fma(p, r, 1.0 / 479001600.0)
        p = fma(p, r, 1.0 / 39916800.0)
        p = fma(p, r, 1.0 / 3628800.0)
        p = fma(p, r, 1.0 / 362880.0)
        p = fma(p, r, 1.0 / 40320.0)
        p = fma(p, r, 1.0 / 5040.0)
        p = fma(p, r, 1.0 / 720.0)
        p = fma(p, r, 1.0 / 120.0)
        p = fma(p, r, 1.0 / 24.0)
        p = fma(p, r, 1.0 / 6.0)
        p = fma(p, r, 0.5)
        p = fma(p, r, 1.0)
        p = fma(p, r, 1.0)
        lg[k] = p if y0 > EXP_FLOOR else 0.0
        bits[k] = (np.int64(q) + 1023) << 52  # 2^q, q in [-1021, 0]
    for k in range(n):
        lg[k] *= scale[k]


@njit(cache=True, nogil=True)
def exp_below_array(x, mx):
    """:func:`exp_below` on a copy of ``x`` (float64, 1-d), every element shifted by the
    scalar ``mx``, for tests."""
    out = x.copy()
    bits = np.empty(len(x), np.int64)
    exp_below(out, len(x), np.full(len(x), mx), bits, bits.view(np.float64))
    return out


@njit(cache=True, nogil=True)
def column_trees(col_ptr, cols, d):
    """Per column ``j``, the trees that split on it, ``tree[ptr[j]:ptr[j + 1]]`` (in order),
    and the position ``pos`` of ``j`` in each one's column list ``cols``."""
    ptr = np.zeros(d + 1, np.int64)
    for p in range(cols.shape[0]):
        ptr[cols[p] + 1] += 1
    for j in range(d):
        ptr[j + 1] += ptr[j]
    fill = ptr[:d].copy()
    tree = np.empty(cols.shape[0], np.int64)
    pos = np.empty(cols.shape[0], np.int64)
    for t in range(col_ptr.shape[0] - 1):
        for p in range(col_ptr[t], col_ptr[t + 1]):
            j = cols[p]
            tree[fill[j]] = t
            pos[fill[j]] = p
            fill[j] += 1
    return ptr, tree, pos


@intrinsic
def popcount(typingctx, x):
    """The number of set bits of an integer (LLVM ``ctpop``)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])
    return x(x), codegen


#: nominal columns of at most this many codes (one bitset word) add a crossed leaf's value to
#: every code, 0 outside the leaf (a loop the compiler vectorises), instead of a loop over the
#: bits of its code set
NOMINAL_DENSE = 64


@njit(cache=True, nogil=True)
def add_ordered(ent, n, sh, lmask, value, span, diff):
    """Each crossed leaf ``ent[:n]`` (``chain << sh | leaf``) of one tree adds its ``value``
    over its value codes ``span[leaf] = (lo, end)`` to the chain's difference array
    ``diff [codes + 1, chains]`` (nothing for a leaf with no value code), in list order.
    A function of its own (not inlined): the kernel's loop ran slower inlined."""
    for u in range(n):
        e = np.uint64(ent[u])
        i = e >> sh
        ell = e & lmask
        a = span[ell, 0]
        z = span[ell, 1]
        v = value[ell] if a < z else 0.0
        diff[a, i] += v
        diff[z, i] -= v


@njit(cache=True, nogil=True)
def add_nominal(ent, n, sh, lmask, value, code_word, lg, nc):
    """Each crossed leaf ``ent[:n]`` of one tree adds its ``value`` to the codes of its
    ``code_word`` (a nominal column of at most 64 codes) in the chain's row of
    ``lg [chains, >= nc rounded up to 8]``, and 0 to the others and to the padding up to a
    multiple of 8 codes (which changes no bit; whole vector lanes, no scalar remainder), in
    list order."""
    nc8 = (nc + 7) & ~7
    for u in range(n):
        e = np.uint64(ent[u])
        i = e >> sh
        ell = e & lmask
        v = value[ell]
        cb = code_word[ell]
        lrow = lg[i]
        for k in range(nc8):
            lrow[k] += v if (cb >> np.uint64(k)) & np.uint64(1) else 0.0


@parallel_kernel
def gibbs_kernel(X0, sched, ev, grid, sets, inv_temp, seeds, block):
    """Run one chain per row of ``X0 [c, d]`` under :class:`Schedule` ``sched``, with
    :class:`ChainEvidence` ``ev`` on :class:`CodeGrid` ``grid`` and the energy's
    :class:`~forestgen.families.energy.leaf_sets.LeafSetView` ``sets``; returns the recorded
    states ``[c, n_rec, d]``.

    ``free_cols`` ascending. The leaves each tree's line crosses for column ``j`` are ``prefix &
    suffix``: the AND of the bitsets of the tree's columns before ``j`` (current values, folded
    in as the sweep passes them) and after ``j`` (values at the start of the sweep, unchanged
    until the sweep reaches them; computed once per sweep). A tree's first position has no
    prefix and its last no suffix: the line is then the other one alone, and the suffixes start
    from the last column's bitsets, the prefix from the first's (no table is filled with all
    ones and ANDed). A line that crosses one leaf is skipped (a constant). Chains run in blocks
    of ``block`` (spread over the threads), trees outer and chains inner, every per-chain table
    chains-last so that the ANDs and bit counts run over chains in vector lanes. Per tree, the
    crossed leaves of all chains are first listed, word by word (the chains with bits in the
    word are the set bits of one 64-bit mask, built in one pass over the chains: blocks hold at
    most 64; then four slots are written per chain and word whatever its bits, so that few
    branches depend on the data), then added (a leaf's value to all codes of a nominal column of
    at most ``NOMINAL_DENSE`` codes, 0 outside the leaf): each chain's additions happen in the
    order of its leaves, as in a leaf-by-leaf loop, so every logit has the same bits. The
    logits, their maxima, :func:`exp_below`, the cumulative masses and the drawn codes (the
    number of cumulative masses ``<= u``) run code by code over the chains in vector lanes
    (chains-last: a nominal column's logits are transposed first, an ordered column's are the
    prefix sums of its difference array). Mask rows and crossed-leaf entries index the tables as
    unsigned integers (no negative-index fix-up). Each chain's arithmetic and random stream are
    the same whatever the blocks, so the output is too."""
    n_sweeps, record_from, thin, n_rec = sched.n_sweeps, sched.record_from, sched.thin, \
        sched.n_rec
    free_cols, allowed, arow = ev.free_cols, ev.allowed, ev.arow
    log_q0, off, n_codes, n_values, ordered = grid.log_q0, grid.off, grid.n_codes, \
        grid.n_values, grid.ordered
    code_row, masks, col_ptr, cols = sets.code_row, sets.masks, sets.col_ptr, sets.cols
    leaf_value, span, mi, codes, nw_off = sets.leaf_value, sets.span, sets.mi, sets.codes, \
        sets.nw_off
    c, d = X0.shape
    block = max(1, min(block, 64))  # the listing's chain masks are one word
    T = col_ptr.shape[0] - 1
    W = masks.shape[1]
    sh = 6  # an entry of the crossed-leaf list: chain << sh | leaf
    while (1 << sh) < 64 * W:
        sh += 1
    ush = np.uint64(sh)
    lmask = np.uint64((1 << sh) - 1)
    nnz = cols.shape[0]
    cmax = 1
    for j in range(d):
        cmax = max(cmax, n_codes[j])
    ptr, ctree, cpos = column_trees(col_ptr, cols, d)
    out = np.empty((c, n_rec, d), np.int32)
    nb = (c + block - 1) // block
    for b in prange(nb):
        c0 = b * block
        m = min(c, c0 + block) - c0
        XT = np.ascontiguousarray(X0[c0:c0 + m].T)  # [d, m]: the chains' current codes
        st = seeds[c0:c0 + m].copy()
        same_row = True  # every chain of the block reads the same row of ``allowed``
        for i in range(m):
            same_row = same_row and arow[c0 + i] == arow[c0]
        rows = np.empty(m, np.uint64)
        tot = np.empty(m, np.int64)
        line = np.empty((W, m), np.uint64)
        ent = np.empty((m << sh) + 64, np.int64)  # crossed leaves, + slack for the 4 slots
        diff = np.zeros((cmax + 1, m))  # chains-last tables, one row per code
        lgT = np.zeros((cmax, m))
        lg = np.zeros((m, (cmax + 7) & ~7))  # a nominal column's sums, chains-first
        mx = np.empty(m)
        acc = np.empty(m)
        thr = np.empty(m)
        pick = np.empty(m, np.int64)
        alk = np.empty(m)  # the codes' log-weights under the chains' evidence
        bits = np.empty(m, np.int64)  # exp_below's scratch
        scale = bits.view(np.float64)
        suf = np.empty((nnz, W, m), np.uint64)  # AND of the tree's bitsets after position p
        pre = np.empty((T, W, m), np.uint64)  # AND of the bitsets before position nxt[t]
        nxt = np.empty(T, np.int64)
        r = 0
        for sweep in range(n_sweeps):
            for t in range(T):  # suffixes from the last position down (none at the last)
                s0 = col_ptr[t]
                nxt[t] = s0  # no prefix yet
                last = col_ptr[t + 1] - 1
                p = last
                while p > s0:
                    g = cols[p]
                    for i in range(m):
                        rows[i] = np.uint64(code_row[t, off[g] + XT[g, i]])
                    if p == last:
                        for w in range(W):
                            for i in range(m):
                                suf[p - 1, w, i] = masks[rows[i], w]
                    else:
                        for w in range(W):
                            for i in range(m):
                                suf[p - 1, w, i] = suf[p, w, i] & masks[rows[i], w]
                    p -= 1
            for jj in range(free_cols.shape[0]):
                j = free_cols[jj]
                nc = n_codes[j]
                nv = n_values[j]
                o = off[j]
                oj = ordered[j]
                dense = not oj and nc <= NOMINAL_DENSE
                if oj:  # the value codes' rows of diff, the missing code's row of lgT
                    for k in range(nv):
                        for i in range(m):
                            diff[k, i] = 0.0
                    for k in range(nv, nc):
                        for i in range(m):
                            lgT[k, i] = 0.0
                else:
                    for i in range(m):
                        for k in range(nc):
                            lg[i, k] = 0.0
                for q in range(ptr[j], ptr[j + 1]):
                    t = ctree[q]
                    pj = cpos[q]
                    s0 = col_ptr[t]
                    last = col_ptr[t + 1] - 1
                    for p in range(nxt[t], pj):  # fold the columns passed into the prefix
                        g = cols[p]
                        for i in range(m):
                            rows[i] = np.uint64(code_row[t, off[g] + XT[g, i]])
                        if p == s0:
                            for w in range(W):
                                for i in range(m):
                                    pre[t, w, i] = masks[rows[i], w]
                        else:
                            for w in range(W):
                                for i in range(m):
                                    pre[t, w, i] &= masks[rows[i], w]
                    nxt[t] = pj
                    for i in range(m):
                        tot[i] = 0
                    if s0 < pj < last:
                        for w in range(W):
                            for i in range(m):
                                lb = pre[t, w, i] & suf[pj, w, i]
                                line[w, i] = lb
                                tot[i] += np.int64(popcount(lb))
                    elif pj > s0:  # the last position: no suffix
                        for w in range(W):
                            for i in range(m):
                                lb = pre[t, w, i]
                                line[w, i] = lb
                                tot[i] += np.int64(popcount(lb))
                    elif pj < last:  # the first position: no prefix
                        for w in range(W):
                            for i in range(m):
                                lb = suf[pj, w, i]
                                line[w, i] = lb
                                tot[i] += np.int64(popcount(lb))
                    else:  # a tree of one column: every leaf slot
                        for w in range(W):
                            for i in range(m):
                                line[w, i] = ALL
                                tot[i] += 64
                    n = 0
                    for w in range(W):
                        lw = line[w]
                        cm = np.uint64(0)  # bit i: chain i lists leaves of word w
                        for i in range(m):  # (lines of one leaf list nothing)
                            cm |= np.uint64((lw[i] != 0) & (tot[i] > 1)) << np.uint64(i)
                        while cm != 0:
                            i = np.uint64(trailing_zeros(cm))
                            cm &= cm - np.uint64(1)
                            lb = lw[i]
                            cw = np.int64(popcount(lb))
                            e0 = np.int64((i << ush) + np.uint64(w << 6))
                            for u in range(4):
                                ent[n + u] = e0 + trailing_zeros(lb)
                                lb &= lb - np.uint64(1)
                            for u in range(4, cw):
                                ent[n + u] = e0 + trailing_zeros(lb)
                                lb &= lb - np.uint64(1)
                            n += cw
                    lvt = leaf_value[t]
                    if oj:  # a difference array over the value codes, the missing code apart
                        add_ordered(ent, n, ush, lmask, lvt, span[t, j], diff)
                        if nc > nv:
                            mit = mi[t, j]
                            for u in range(n):
                                e = np.uint64(ent[u])
                                i = e >> ush
                                ell = e & lmask
                                lgT[nv, i] += lvt[ell] * mit[ell]
                    elif dense:  # adding 0 to the codes outside the leaf changes no bit
                        add_nominal(ent, n, ush, lmask, lvt, codes[t, nw_off[j]], lg, nc)
                    else:
                        for u in range(n):
                            e = np.uint64(ent[u])
                            i = e >> ush
                            ell = e & lmask
                            v = lvt[ell]
                            for uu in range(nw_off[j], nw_off[j + 1]):
                                cb = codes[t, uu, ell]
                                k0 = (uu - nw_off[j]) * 64
                                while cb != 0:
                                    lg[i, k0 + trailing_zeros(cb)] += v
                                    cb &= cb - np.uint64(1)
                for i in range(m):
                    mx[i] = -np.inf
                    acc[i] = 0.0
                for k in range(nc):  # the logits and their maxima, code by code
                    q0 = log_q0[o + k]
                    if same_row:
                        a0 = allowed[arow[c0], o + k]
                        for i in range(m):
                            alk[i] = a0
                    else:
                        for i in range(m):
                            alk[i] = allowed[arow[c0 + i], o + k]
                    lrow = lgT[k]
                    if oj and k < nv:  # the prefix sums of the difference arrays
                        drow = diff[k]
                        for i in range(m):
                            acc[i] += drow[i]
                            lrow[i] = 0.0 + acc[i]
                    elif not oj:
                        for i in range(m):
                            lrow[i] = lg[i, k]
                    for i in range(m):
                        v = (lrow[i] + q0) * inv_temp
                        v = v + alk[i]  # (+0.0 for a code the evidence keeps whole)
                        lrow[i] = v
                        mx[i] = max(mx[i], v)
                for i in range(m):
                    acc[i] = 0.0
                for k in range(nc):  # the masses and the cumulative masses, in place
                    lrow = lgT[k]
                    exp_below(lrow, m, mx, bits, scale)
                    for i in range(m):
                        acc[i] += lrow[i]
                        lrow[i] = acc[i]
                for i in range(m):
                    thr[i] = _uniform(st, i) * acc[i]
                    pick[i] = 0
                for k in range(nc):  # the first code whose cumulative mass exceeds u
                    lrow = lgT[k]
                    for i in range(m):
                        pick[i] += 1 if lrow[i] <= thr[i] else 0
                for i in range(m):
                    pk = pick[i]
                    if pk == nc:  # u rounded up to the total: the last code of mass > 0
                        pk = nc - 1
                        while pk > 0 and lgT[pk, i] == lgT[pk - 1, i]:
                            pk -= 1
                    XT[j, i] = pk
            if sweep >= record_from and (sweep - record_from) % thin == 0 and r < n_rec:
                for i in range(m):
                    for j in range(d):
                        out[c0 + i, r, j] = XT[j, i]
                r += 1
    return out


_M32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _hashmix(value, hc):
    """One hash step of ``SeedSequence``'s entropy mixing; ``hc[0]`` is the running hash
    constant (uint64 holding 32-bit words)."""
    value = (value ^ hc[0]) & _M32
    hc[0] = (hc[0] * np.uint64(0x931E8875)) & _M32
    value = (value * hc[0]) & _M32
    return value ^ (value >> np.uint64(16))


@njit(cache=True, nogil=True, inline="always")
def _mix(x, y):
    r = (np.uint64(0xCA01F9DD) * x - np.uint64(0x4973F715) * y) & _M32
    return r ^ (r >> np.uint64(16))


@njit(cache=True, nogil=True)
def spawned_seeds(entropy, n):
    """``[SeedSequence(entropy).spawn(n)[i].generate_state(1, np.uint64)[0] for i in
    range(n)]`` for ``0 <= entropy < 2**63`` and ``n < 2**32``, without building ``n``
    ``SeedSequence`` objects in Python: child ``i``'s entropy words are ``[lo, hi, 0, 0, i]``
    (the run entropy padded to the pool of four words, then its spawn key), mixed into the
    pool and hashed out as two 32-bit words, low word first.
    ``tests/learners/test_nrgboost_components.py`` checks it against NumPy's."""
    out = np.empty(n, np.uint64)
    ent = np.zeros(5, np.uint64)
    ent[0] = np.uint64(entropy) & _M32
    ent[1] = np.uint64(entropy) >> np.uint64(32)
    pool = np.empty(4, np.uint64)
    hc = np.empty(1, np.uint64)
    for i in range(n):
        ent[4] = np.uint64(i)
        hc[0] = np.uint64(0x43B0D7E5)
        for k in range(4):
            pool[k] = _hashmix(ent[k], hc)
        for src in range(4):
            for dst in range(4):
                if src != dst:
                    pool[dst] = _mix(pool[dst], _hashmix(pool[src], hc))
        for dst in range(4):
            pool[dst] = _mix(pool[dst], _hashmix(ent[4], hc))
        hb = np.uint64(0x8B51F9DD)
        words = np.zeros(2, np.uint64)
        for k in range(2):
            v = (pool[k] ^ hb) & _M32
            hb = (hb * np.uint64(0x58F38DED)) & _M32
            v = (v * hb) & _M32
            words[k] = v ^ (v >> np.uint64(16))
        out[i] = words[0] | (words[1] << np.uint64(32))
    return out


def chain_seeds(rng: np.random.Generator, n: int) -> np.ndarray:
    """One independent 64-bit stream seed per chain: ``SeedSequence(e).spawn(n)``, each
    child's first 64-bit state word, for ``e`` drawn from ``rng`` (:func:`spawned_seeds`)."""
    return spawned_seeds(int(rng.integers(0, 2**63 - 1)), int(n))


@register("sampler", "gibbs")
class GibbsSampler(Sampler):
    """Systematic-scan Gibbs chains on an :class:`AdditiveEnergy` (see the module docstring).

    ``temperature`` divides the logits (1 = the model). NRGBoost's training pool, sampling,
    conditionals and imputation all run their chains through :meth:`run`; :meth:`sample` draws
    rows of a fitted NRGBoost by its sampling protocol (chains, burn-in, thinning), which calls
    :meth:`run` on this sampler.
    """

    serves = frozenset({"energy"})

    def __init__(self, *, temperature: float = 1.0):
        self.temperature = temperature

    def sample(self, model, n: int, rng: np.random.Generator, **kwargs) -> np.ndarray:
        """``n`` encoded rows of the fitted energy model ``model`` (its ``sample_encoded``)."""
        return model.sample_encoded(n, rng, **kwargs)

    def run(self, energy: AdditiveEnergy, X0: np.ndarray, *, n_sweeps: int, record_from: int,
            thin: int, n_records: int, rng: np.random.Generator,
            free_cols: np.ndarray | None = None, allowed: np.ndarray | None = None,
            allowed_row: np.ndarray | None = None) -> np.ndarray:
        """Run ``len(X0)`` chains from codes ``X0``; returns ``[chains, n_records, d]`` codes.

        ``allowed [m, sum(n_codes)]`` with ``allowed_row [chains]`` picks each chain's weights
        of the codes: a mask (0 / 1) or shares in ``[0, 1]`` that multiply each code's
        conditional (its tempered one: the log-weight adds to the logits after the
        temperature); default: every code allowed. ``free_cols``: the columns updated
        (default all).
        """
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature!r}")
        grid = energy.grid
        c, d = X0.shape
        if free_cols is None:
            free_cols = np.arange(d)
        if allowed is None:
            allowed = np.ones((1, int(grid.code_offsets[-1])))
            allowed_row = np.zeros(c, np.int64)
        with np.errstate(divide="ignore"):
            log_w = np.log(np.asarray(allowed, np.float64))
        if np.isnan(log_w).any() or (log_w > 0).any():
            raise ValueError("allowed holds weights in [0, 1] (0: a code excluded)")
        free_cols = np.unique(np.asarray(free_cols, np.int64))  # the scan order: ascending
        sets = energy.trees.leaf_sets(grid)
        # a block per thread, at most 64 chains and ~32 MB of suffix bitsets
        block = max(1, min(-(-c // numba.get_num_threads()), 64,
                           (1 << 22) // max(1, len(sets.cols) * sets.words)))
        sched = Schedule(int(n_sweeps), int(record_from), int(thin), int(n_records))
        ev = ChainEvidence(free_cols, np.ascontiguousarray(log_w),
                           np.asarray(allowed_row, np.int64))
        codes = CodeGrid(energy.log_q0, grid.code_offsets, grid.n_codes.astype(np.int64),
                         grid.n_values.astype(np.int64), grid.ordered)
        return gibbs_kernel(np.ascontiguousarray(X0, np.int32), sched, ev, codes,
                            sets.view(energy.trees.value), 1.0 / float(self.temperature),
                            chain_seeds(rng, c), block)


class SamplePool:
    """NRGBoost's amortised model sample, importance-weighted (see the module docstring).

    ``codes [M, d]`` and ``log_weight [M]``: each sample's cached energy under the current model
    minus its energy under the model that drew it — a round adds only the newest tree's values.
    :meth:`weights` are the normalised importance weights the splitter uses as ``Q``.
    ``history`` records per round ``(dropped, effective sample size, refilled)``,
    ``tree_evals`` the refill's Gibbs cost (chain sweeps times trees).

    ``refill_trees=None`` (the paper's refill): every dropped sample is replaced by a fresh
    Gibbs draw, so a round costs about ``p_refresh · size · t`` tree evaluations at ``t``
    trees and a fit of ``T`` rounds is quadratic in ``T``. ``refill_trees=k`` (flat refill):
    every round spends at most the budget the paper's refill spends at ``k`` trees,
    ``B = p_refresh · size · k``: the persistent chains run ``s_t = max(1, round(B / (n_chains
    · t)))`` sweeps each, and only ``min(dropped, n_chains · s_t)`` random samples are
    replaced by their draws — the others stay, with their importance weights, as they are
    valid draws of the current model (a fit is then linear in ``T``). Up to ``k`` trees the
    two schemes are the same.
    """

    def __init__(self, *, size: int = 80_000, p_refresh: float = 0.1, n_chains: int = 16,
                 burn_in: int = 100, min_ess: float = 0.5, persistent: bool = True,
                 refill_trees: int | None = None, sampler: GibbsSampler | None = None):
        self.size = int(size)
        self.refill_trees = None if refill_trees is None else int(refill_trees)
        self.p_refresh = float(p_refresh)
        self.n_chains = int(n_chains)
        self.burn_in = int(burn_in)
        self.min_ess = float(min_ess)
        self.persistent = bool(persistent)
        if self.refill_trees is not None and not (self.persistent and self.refill_trees >= 1):
            raise ValueError("refill_trees needs persistent chains and must be >= 1")
        self.sampler = sampler or GibbsSampler()
        self.codes = np.zeros((0, 0), np.int32)
        self.log_weight = np.zeros(0)
        self.chains: np.ndarray | None = None  # last states of the persistent chains
        self.n_trees = 0  # trees of the model the weights refer to
        self.history: list[tuple[int, float, int]] = []
        self.tree_evals: list[int] = []  # per update: Gibbs chain sweeps x trees

    def weights(self) -> np.ndarray:
        """Normalised importance weights (sum to one)."""
        return np.exp(self.log_weight - logsumexp(self.log_weight))

    def ess(self) -> float:
        """Kish effective sample size of :meth:`weights`."""
        w = self.weights()
        return float(1.0 / np.sum(w * w))

    def start(self, energy: AdditiveEnergy, rng: np.random.Generator) -> None:
        """``size`` exact draws of a one-tree model by rejection from ``q0`` (round 2)."""
        t = energy.trees.n_trees - 1
        vmax = _tree_max(energy, t)
        kept: list[np.ndarray] = []
        n = 0
        while n < self.size:
            C = energy.sample_q0(max(1024, 2 * (self.size - n)), rng)
            acc = rng.random(len(C)) < np.exp(energy.tree_energy(C, t, t + 1) - vmax)
            kept.append(C[acc])
            n += int(acc.sum())
        self.codes = np.concatenate(kept)[: self.size]
        self.log_weight = np.zeros(self.size)
        self.n_trees = t + 1
        self.history.append((0, float(self.size), self.size))

    def update(self, energy: AdditiveEnergy, data_codes: np.ndarray,
               rng: np.random.Generator) -> None:
        """Reweight by the newest tree, drop ``p_refresh`` of the samples, refill them by Gibbs
        (round >= 3); resample if the effective size falls below ``min_ess · size``.

        The refill chains start at training rows with ``burn_in`` sweeps. ``persistent``
        (default) keeps them running across rounds: the next refill continues from their last
        states, which already sample the previous model — one small tree away — so no burn-in
        is repeated (``persistent=False``: restart from training rows every round, as the
        official code does)."""
        t = energy.trees.n_trees - 1
        v = energy.tree_energy(self.codes, t, t + 1)
        lw = self.log_weight + v
        # minus the log Z step, log E_{q_{t-1}}[exp v]: every log-weight stays log q_t(x) /
        # q_drawn(x), so draws of different rounds share one scale and fresh ones weigh 1
        lw -= logsumexp(lw) - logsumexp(self.log_weight)
        drop = rng.random(len(lw)) < self.p_refresh
        ch = self.n_chains
        if self.refill_trees is not None:  # flat refill: at most ch * per fresh draws
            per = max(1, round(self.p_refresh * self.size * self.refill_trees / (ch * (t + 1))))
            gone = np.flatnonzero(drop)
            if len(gone) > ch * per:  # keep a random part of the dropped samples
                drop[rng.choice(gone, len(gone) - ch * per, replace=False)] = False
        surv, lw = self.codes[~drop], lw[~drop]
        need = self.size - len(surv)
        evals = 0
        if need > 0:
            per = -(-need // ch)
            if self.chains is None:
                start, burn = data_codes[rng.integers(0, len(data_codes), ch)], self.burn_in
            else:  # persistent: the chains already sample the previous round's model
                start, burn = self.chains, 0
            rec = self.sampler.run(energy, start, n_sweeps=burn + per, record_from=burn,
                                   thin=1, n_records=per, rng=rng)
            evals = ch * (burn + per) * (t + 1)
            if self.persistent:
                self.chains = rec[:, -1].copy()
            surv = np.concatenate([surv, rec.reshape(-1, rec.shape[2])[:need]])
            lw = np.concatenate([lw, np.zeros(need)])
        self.codes, self.log_weight = surv, lw
        self.n_trees = t + 1
        ess = self.ess()
        if ess < self.min_ess * len(surv):
            keep = _systematic(self.weights(), len(surv), rng)
            self.codes, self.log_weight = surv[keep], np.zeros(len(surv))
        self.history.append((int(drop.sum()), ess, int(max(need, 0))))
        self.tree_evals.append(evals)


    def states(self, energy: AdditiveEnergy, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` pool states resampled by their weights under ``energy`` (trees added since the
        last round are added to the weights here): approximate draws of the final model, used
        as starts of sampling chains."""
        lw = self.log_weight + energy.tree_energy(self.codes, self.n_trees, energy.trees.n_trees)
        w = np.exp(lw - logsumexp(lw))
        return self.codes[_systematic(w, int(n), rng)].copy()


def _systematic(w: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Systematic resampling: ``n`` indices drawn proportionally to ``w``."""
    u = (rng.random() + np.arange(n)) / n
    return np.minimum(np.searchsorted(np.cumsum(w), u, side="right"), len(w) - 1)


def _tree_max(energy: AdditiveEnergy, t: int) -> float:
    tr = energy.trees
    s, e = int(tr.node_offsets[t]), int(tr.node_offsets[t + 1])
    leaf = tr.feature[s:e] < 0
    return float(tr.value[s:e][leaf].max())
