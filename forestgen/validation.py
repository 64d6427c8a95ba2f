"""Parameter checks shared by every learner, and the one seeding scheme.

Every check raises :class:`ParameterError` — both a ``ValueError`` and a ``TypeError``, so
callers may catch either — with a message naming the parameter, e.g.
``n_trees must be an integer >= 1, got True (bool)``. ``bool`` is never accepted as a number.

Seeds (:func:`seed_sequence`): ``random_state`` may be ``None`` (fresh OS entropy), an int
``>= 0``, a :class:`numpy.random.SeedSequence` (used as given: the same object gives the same
result every time), a :class:`numpy.random.Generator` or a legacy
:class:`numpy.random.RandomState` (one 63-bit draw from either seeds the fit, so a shared
generator advances). Every learner derives all of its randomness from this one
``SeedSequence``.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np


class ParameterError(ValueError, TypeError):
    """A parameter of the wrong type or out of range (the message names it)."""


def _got(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _is_int(value: Any) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
        value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, (numbers.Real, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _range_text(low, high, low_open=False, high_open=False) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high}")
    return " and ".join(parts)


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None, *,
              allow_none: bool = False) -> None:
    """``value`` must be an integer (not a bool) in ``[low, high]`` (or ``None`` if allowed)."""
    if value is None and allow_none:
        return
    ok = _is_int(value) and (low is None or value >= low) and (high is None or value <= high)
    if not ok:
        rng = _range_text(low, high)
        raise ParameterError(f"{name} must be an integer{' ' + rng if rng else ''}"
                             f"{' or None' if allow_none else ''}, got {_got(value)}")


def check_real(name: str, value: Any, low: float | None = None, high: float | None = None, *,
               low_open: bool = False, high_open: bool = False,
               allow_none: bool = False) -> None:
    """``value`` must be a real number (not a bool, not NaN) within the given bounds."""
    if value is None and allow_none:
        return
    ok = _is_real(value) and not math.isnan(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        rng = _range_text(low, high, low_open, high_open)
        raise ParameterError(f"{name} must be a number{' ' + rng if rng else ''}"
                             f"{' or None' if allow_none else ''}, got {_got(value)}")


def check_bool(name: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be True or False, got {_got(value)}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> None:
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"{name} must be one of {choices}, got {_got(value)}")


def check_max_features(value: Any, name: str = "max_features") -> None:
    """``"sqrt"``, ``"log2"``, ``"all"``, ``None``, an int ``>= 1`` or a fraction in (0, 1]."""
    if value is None or (isinstance(value, str) and value in ("sqrt", "log2", "all")):
        return
    if _is_int(value) and value >= 1:
        return
    if _is_real(value) and not _is_int(value) and 0.0 < value <= 1.0:
        return
    raise ParameterError(f"{name} must be 'sqrt', 'log2', 'all', None, an integer >= 1 or a "
                         f"fraction in (0, 1], got {_got(value)}")


def check_n_jobs(value: Any, name: str = "n_jobs") -> None:
    """``None`` or an integer: negative counts from the number of cores (-1 = all), 0 and 1
    run serially."""
    check_int(name, value, allow_none=True)


def check_random_state(value: Any, name: str = "random_state") -> None:
    if value is None or isinstance(value, (np.random.Generator, np.random.RandomState,
                                           np.random.SeedSequence)):
        return
    if _is_int(value) and value >= 0:
        return
    raise ParameterError(f"{name} must be None, an integer >= 0, a numpy SeedSequence, "
                         f"Generator or RandomState, got {_got(value)}")


def seed_sequence(random_state: Any, name: str = "random_state") -> np.random.SeedSequence:
    """The root :class:`numpy.random.SeedSequence` of a fit (see the module docstring)."""
    check_random_state(random_state, name)
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.SeedSequence(random_state.entropy, spawn_key=random_state.spawn_key,
                                      pool_size=random_state.pool_size)
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(int(random_state.integers(0, 2**63 - 1)))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(int(random_state.randint(0, 2**63 - 1, dtype=np.int64)))
    return np.random.SeedSequence(int(random_state))


def as_generator(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """A Generator for a query (sampling): a Generator is used as is (and advances), any other
    accepted seed gives ``Generator(PCG64(seed_sequence(random_state)))``."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.Generator(np.random.PCG64(seed_sequence(random_state, name)))


def seed_child(root: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """The child of ``root`` at spawn key ``key`` (counter-based: the seed of item ``key`` does
    not depend on how many other items are drawn, or where). ``seed_child(root, i)`` is what
    the ``i``-th ``root.spawn`` gives a fresh ``root``."""
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(key),
                                  pool_size=root.pool_size)


# ---------------------------------------------------------------------- table input
class InputWarning(RuntimeWarning):
    """A query handled input it could not use as given — a column absent from the rows, a
    level the model never saw, a value of the wrong type read as another — and says so: one
    warning per call, naming every column concerned."""


def note_text(note: tuple) -> str:
    """One note of :meth:`TableEncoder.transform(..., notes=) <forestgen.data.TableEncoder>`
    as text."""
    kind, name = note[0], note[1]
    if kind == "absent":
        return f"column {name!r} is absent from the input and is marginalised (integrated out)"
    if kind == "unseen":
        _, _, count, example, known = note
        shown = known if len(known) <= 10 else [*known[:10], "..."]
        return (f"column {name!r}: level {example!r} was not seen at fit time ({count} "
                f"value(s); known levels: {shown})")
    if kind == "text":
        _, _, count, example, value = note
        return (f"column {name!r}: {count} value(s) given as text (e.g. {example!r}) were read "
                f"as the level {value!r}")
    raise ValueError(f"unknown note {note!r}")  # pragma: no cover


def warn_input(notes: list | None, who: str, unseen: str = "") -> None:
    """Emit one :class:`InputWarning` for the ``notes`` a query collected (none: nothing),
    attributed to the first caller outside forestgen; ``unseen``: what the query did with
    unseen levels, appended to their notes."""
    if not notes:
        return
    seen: list = []
    for n in notes:
        if n not in seen:
            seen.append(n)
    text = [note_text(n) + (f"; {unseen}" if unseen and n[0] == "unseen" else "")
            for n in seen]
    warnings.warn(f"{who}: " + "; ".join(text), InputWarning, stacklevel=_outside_level())


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _outside_level() -> int:
    """``stacklevel`` (for a ``warnings.warn`` called by this function's caller) of the first
    frame outside the forestgen package."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


#: an inferred text column whose values are numbers but for at most this share is refused:
#: the rest are typos or missing-value markers ('abc', '?', 'n/a') in a numeric column
NUMERIC_TEXT_SHARE = 0.05


def check_text_in_numbers(series: Any, name: Any) -> None:
    """Refuse, naming the column, an object / string column holding numbers (or numeric text)
    and a few values that are not (at most ``NUMERIC_TEXT_SHARE`` of its observed values):
    a numeric column with a stray string would otherwise be modelled as categorical."""
    import pandas as pd
    from pandas.api import types as pdt

    if not (pdt.is_object_dtype(series.dtype) or pdt.is_string_dtype(series.dtype)) or \
            isinstance(series.dtype, pd.CategoricalDtype):
        return
    obs = series.dropna()
    if obs.empty:
        return
    if pdt.infer_dtype(obs, skipna=False) == "string":
        # all text: test each distinct value once and weigh it by its count
        codes, uniq = pd.factorize(obs, sort=False)
        values = np.asarray(uniq, dtype=object)
        counts = np.bincount(codes, minlength=values.size)
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").notna().to_numpy()
    else:  # mixed objects: True and 1 hash alike, so no grouping
        values = obs.astype(object).to_numpy()
        counts = np.ones(values.size, dtype=np.int64)
        is_bool = np.array([isinstance(v, (bool, np.bool_)) for v in values])
        num = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").notna().to_numpy()
        num = num & ~is_bool
    bad = ~num
    n_bad = int(counts[bad].sum())
    if num.any() and 0 < n_bad <= NUMERIC_TEXT_SHARE * counts.sum():
        example = values[bad][0]
        raise ValueError(
            f"column {name!r} holds numbers and {n_bad} value(s) that are not (e.g. "
            f"{example!r}); make them missing (pd.to_numeric(df[{name!r}], errors='coerce'), "
            f"or na_values= when reading a CSV) or declare the column "
            f"kinds={{{name!r}: 'categorical'}} if it is nominal")
