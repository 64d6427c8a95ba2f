"""Split criteria as Numba gain functions, and their specialisation into the growers.

A criterion scores a candidate split from the per-class masses of its two children:
``gain(left, right) -> float`` with ``left, right`` float64 arrays ``[K]`` (the parent is
``left + right``); larger is better and a split is taken only if its gain exceeds the
grower's threshold. Class-labelled growers pass per-class weights (``K`` classes); the density
grower passes ``[P, V]``: data mass and reference mass (DEF; NRGBoost's model mass ``Q``).

Built-in criteria are dispatched by an integer code inside the cached kernels:

* ``gini`` (Breiman et al. 1984): weighted Gini impurity decrease;
* ``entropy``: weighted Shannon entropy decrease (information gain, nats);
* ``ise``: ``P_L^2/V_L + P_R^2/V_R - P^2/V`` (Ram & Gray 2011; DEF), which is also
  ``2 ×`` NRGBoost's second-order energy gain with ``V`` = model mass ``Q`` (Bravo 2025, eq. 12);
* ``kl``: ``P log(P/V)`` summed over the children minus the parent (DEF's likelihood gain);
* ``energy``: NRGBoost's gain ``½ (P_L^2/Q_L + P_R^2/Q_R - P^2/Q)``.
* ``rank_variance``: weighted variance decrease of the class *index* (classes ordered, as the
  quantile bins of a numeric target: a regression CART on the target's bin ranks; the Chain's
  numeric columns, as synthpop's CART regresses).

A user criterion is any ``@numba.njit`` function with that signature. :func:`specialise`
compiles a grower once per process for it (the grower's source is reused with the user's
function in place of the built-in dispatch), so it runs at kernel speed.
"""

from __future__ import annotations

import types

import numpy as np
from numba import njit
from numba.core.registry import CPUDispatcher

GINI = 0
ENTROPY = 1
ISE = 2
KL = 3
ENERGY = 4
RANK_VARIANCE = 5
USER = -1
BUILTIN = {"gini": GINI, "entropy": ENTROPY, "ise": ISE, "kl": KL, "energy": ENERGY,
           "rank_variance": RANK_VARIANCE}
LABELLED = ("gini", "entropy", "rank_variance")  # built-ins meant for class-labelled trees
DENSITY = ("ise", "kl", "energy")  # built-ins meant for [P, V] density trees


@njit(cache=True, nogil=True, inline="always")
def _impurity_decrease(left, right, code):
    """Weighted Gini / entropy of the parent minus those of the children (no allocation)."""
    WL = 0.0
    WR = 0.0
    for c in range(left.shape[0]):
        WL += left[c]
        WR += right[c]
    W = WL + WR
    if W <= 0.0:
        return 0.0
    if code == GINI:
        sL = 0.0
        sR = 0.0
        sP = 0.0
        for c in range(left.shape[0]):
            p = left[c] + right[c]
            sL += left[c] * left[c]
            sR += right[c] * right[c]
            sP += p * p
        out = W - sP / W
        if WL > 0.0:
            out -= WL - sL / WL
        if WR > 0.0:
            out -= WR - sR / WR
        return out
    out = 0.0
    for c in range(left.shape[0]):
        p = left[c] + right[c]
        if p > 0.0:
            out -= p * np.log(p / W)
        if left[c] > 0.0:
            out += left[c] * np.log(left[c] / WL)
        if right[c] > 0.0:
            out += right[c] * np.log(right[c] / WR)
    return out


@njit(cache=True, nogil=True, inline="always")
def _rank_variance_decrease(left, right):
    """Weighted sum of squared deviations of the class index in the parent minus those in
    the children (0 when a child is empty)."""
    WL = 0.0
    WR = 0.0
    SL = 0.0
    SR = 0.0
    for c in range(left.shape[0]):
        WL += left[c]
        WR += right[c]
        SL += c * left[c]
        SR += c * right[c]
    if WL <= 0.0 or WR <= 0.0:
        return 0.0
    # parent SS - children SS = WL WR / W (mean_L - mean_R)^2
    d = SL / WL - SR / WR
    return WL * WR / (WL + WR) * d * d


@njit(cache=True, nogil=True, inline="always")
def _score(P, V, code):
    if code == KL:
        if P <= 0.0:
            return 0.0
        return P * np.log(P / V)
    if V <= 0.0:
        return np.inf if P > 0.0 else 0.0
    return P * P / V


@njit(cache=True, nogil=True, inline="always")
def density_gain(code, PL, VL, PR, VR):
    """Gain of a ``[P, V]`` criterion (``ise``, ``kl``, ``energy``) from the children's masses
    as scalars: what density growers call for built-ins (no buffers to fill per candidate)."""
    g = _score(PL, VL, code) + _score(PR, VR, code) - _score(PL + PR, VL + VR, code)
    if code == ENERGY:
        return 0.5 * g
    return g


@njit(cache=True, nogil=True)
def criterion_gain(code, left, right):
    """Gain of a split under built-in criterion ``code`` (see the module docstring)."""
    if code == GINI or code == ENTROPY:
        return _impurity_decrease(left, right, code)
    if code == RANK_VARIANCE:
        return _rank_variance_decrease(left, right)
    return density_gain(code, left[0], left[1], right[0], right[1])


def criterion_code(criterion) -> int:
    """Integer code of a built-in criterion name, or ``USER`` for an ``@njit`` function."""
    if isinstance(criterion, str):
        if criterion not in BUILTIN:
            raise ValueError(f"unknown criterion {criterion!r}; built-ins are {sorted(BUILTIN)} "
                             "(or pass an @numba.njit gain(left, right) function)")
        return BUILTIN[criterion]
    if isinstance(criterion, CPUDispatcher):
        return USER
    raise TypeError(f"criterion must be a built-in name or an @numba.njit function "
                    f"gain(left, right) -> float; got {criterion!r}")


_SPECIALISED: dict[tuple, object] = {}


def specialise(kernel, helpers: tuple, gain) -> object:
    """``kernel`` recompiled with the user ``gain`` in place of :func:`criterion_gain`.

    ``helpers`` are the module-level jitted functions between ``kernel`` and the gain call;
    each is rebuilt from its Python source with globals in which ``criterion_gain`` is the
    user's function. A ``(function, name)`` pair binds the rebuilt function under ``name``
    (a grower whose built-in path calls :func:`density_gain` with scalars swaps in a helper
    that fills ``[P, V]`` buffers for the user gain). Compiled once per (kernel, gain) and
    process (not cached to disk: a user function defined in a notebook has no stable file to
    key a cache on).
    """
    key = (kernel, gain)
    hit = _SPECIALISED.get(key)
    if hit is not None:
        return hit

    @njit(nogil=True)
    def user_gain(code, left, right):
        return gain(left, right)

    g = dict(kernel.py_func.__globals__)
    g["criterion_gain"] = user_gain
    for item in (*helpers, kernel):
        fn, name = item if isinstance(item, tuple) else (item, item.py_func.__name__)
        py = fn.py_func
        copy = types.FunctionType(py.__code__, g, py.__name__, py.__defaults__, py.__closure__)
        g[name] = njit(nogil=True)(copy)
    out = g[kernel.py_func.__name__]
    _SPECIALISED[key] = out
    return out
