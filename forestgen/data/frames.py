"""Tables as pandas DataFrames: what the encoder and the queries accept as input.

:func:`as_frame` views a DataFrame, a polars / pyarrow table, a Series or dict (one row), a
dict of columns, an ndarray or a torch tensor as a DataFrame; :func:`check_duplicates` refuses
column labels a model could not save and find again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from forestgen.data.schema import to_python_scalar

__all__ = ["as_frame", "check_duplicates", "is_tensor", "take_rows"]


def is_tensor(X: Any) -> bool:
    """Whether ``X`` is a torch tensor (checked without importing torch)."""
    return type(X).__module__.split(".")[0] == "torch" and hasattr(X, "detach")


def _array_to_frame(arr: np.ndarray) -> pd.DataFrame:
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {arr.shape}")
    if arr.dtype == object:
        cols = {j: pd.Series(arr[:, j], dtype=object).infer_objects() for j in range(arr.shape[1])}
        return pd.DataFrame(cols, index=pd.RangeIndex(arr.shape[0]))
    return pd.DataFrame(arr)


def as_frame(X: Any) -> tuple[pd.DataFrame, str]:
    """A pandas DataFrame view of the input: a DataFrame; a polars / pyarrow table (through its
    ``to_pandas``); a Series or a dict of scalars (one row); a dict of columns; an ndarray or a
    torch tensor (columns numbered 0..d-1)."""
    if isinstance(X, pd.DataFrame):
        return X, "dataframe"
    if is_tensor(X):
        return _array_to_frame(X.detach().cpu().numpy()), "tensor"
    if isinstance(X, np.ndarray):
        return _array_to_frame(X), "ndarray"
    if isinstance(X, pd.Series):
        return X.to_frame().T.infer_objects(), "dataframe"
    if isinstance(X, dict):
        if all(np.ndim(v) == 0 for v in X.values()):
            return pd.DataFrame([X]), "dataframe"
        return pd.DataFrame(X), "dataframe"
    if type(X).__module__.split(".")[0] == "polars" and hasattr(X, "get_column"):
        # column by column through NumPy: no pyarrow needed
        return pd.DataFrame({c: X.get_column(c).to_numpy() for c in X.columns}), "dataframe"
    if type(X).__module__.split(".")[0] == "pyarrow" and hasattr(X, "to_pandas"):
        return X.to_pandas(), "dataframe"
    raise TypeError(f"expected a pandas/polars DataFrame, a Series or dict (one row), an "
                    f"ndarray or a torch.Tensor, got {type(X).__module__}.{type(X).__name__}")


def check_duplicates(df: pd.DataFrame) -> None:
    """Refuse duplicate, MultiIndex or unsupported column labels, naming the label."""
    dup = df.columns[df.columns.duplicated()]
    if len(dup):
        raise ValueError(f"duplicate column name {dup[0]!r}")
    if isinstance(df.columns, pd.MultiIndex):
        raise ValueError("MultiIndex column labels are not supported (they cannot be saved "
                         "and found again); flatten them first, e.g. df.columns = "
                         "['_'.join(map(str, c)) for c in df.columns]")
    for label in df.columns:
        v = to_python_scalar(label)
        if not isinstance(v, (str, int, float)) or (isinstance(v, float) and math.isnan(v)):
            raise ValueError(f"column label {label!r} ({type(label).__name__}) is not supported: "
                             f"labels must be str, int, bool or a non-NaN float so the model "
                             f"can be saved and queried by name; rename the column")


def take_rows(X: Any, idx: np.ndarray) -> Any:
    """Rows ``idx`` of a table in its own form: a DataFrame (positions), encoded rows
    (:class:`~forestgen.base.EncodedTable`), a torch tensor, else as a NumPy array."""
    if isinstance(X, pd.DataFrame):
        return X.iloc[idx]
    if hasattr(X, "encoder") and hasattr(X, "take"):  # rows already encoded (EncodedTable)
        return X.take(idx)
    if is_tensor(X):
        return X[idx]
    return np.asarray(X)[idx]
