"""An SDV-style single-table synthesizer for forestgen learners.

:class:`ForestSynthesizer` has the interface SDV users know (``fit``, ``sample(num_rows)``,
``sample_remaining_columns``, ``get_metadata``, ``get_parameters``, ``save`` / ``load``) and
takes SDV metadata: an ``sdv.metadata.Metadata`` object (e.g. from
``Metadata.detect_from_dataframes``), its dict or its JSON file's content. SDV itself is needed
only by :meth:`ForestSynthesizer.get_metadata` (which returns an SDV ``Metadata``).

What the metadata declares is enforced as ``kinds=`` enforces it
(:mod:`forestgen.data.metadata`); beyond that, as SDV's synthesizers do:

- key columns (sdtype ``id``) are not modelled: each sample gets new unique keys (integers
  counting from 0, or the text ``"id_0"``, ``"id_1"``... for a text key);
- text dates with a ``datetime_format`` are parsed with it for fitting and sampled dates are
  written back in it;
- PII and ``unknown`` sdtypes are modelled as categorical columns (SDV would fake them).

The file :meth:`ForestSynthesizer.save` writes is a zip holding the learner's model file
(arrays and JSON, no pickle) and the synthesizer's JSON; loading it runs no code.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api import types as pdt

from forestgen.adapters._peer import require
from forestgen.data.metadata import KEY_SDTYPES, as_metadata_dict

__all__ = ["ForestSynthesizer"]

_MODEL_ENTRY = "model.forestgen"
_STATE_ENTRY = "synthesizer.json"
FORMAT = "forestgen-sdv-synthesizer/1"


class ForestSynthesizer:
    """SDV single-table synthesizer interface around a forestgen learner.

    Parameters
    ----------
    metadata:
        SDV metadata of one table: an ``sdv.metadata.Metadata`` (or ``SingleTableMetadata``)
        object, its ``to_dict()`` or SDV's multi-table dict with one table.
    learner:
        A learner's registry name (``"arf"``, ``"rfde"``, ...), class or unfitted instance;
        default :data:`forestgen.config.DEFAULT_LEARNER`.
    **learner_params:
        Parameters of the learner when ``learner`` is a name or a class (e.g.
        ``n_trees=30, random_state=0``).
    """

    def __init__(self, metadata: Any, learner: Any = None, **learner_params: Any) -> None:
        raw = metadata if isinstance(metadata, dict) else getattr(metadata, "to_dict",
                                                                    lambda: metadata)()
        tables = raw.get("tables") if isinstance(raw, dict) else None
        self._table = next(iter(tables)) if isinstance(tables, dict) and tables else "table"
        self._metadata = as_metadata_dict(metadata)
        if not isinstance(self._metadata.get("columns"), dict):
            raise ValueError("metadata has no 'columns'; pass SDV metadata of one table")
        self._learner = self._make_learner(learner, learner_params)
        self._learner_params = dict(learner_params)
        self.fitted = False

    @staticmethod
    def _make_learner(learner: Any, params: dict) -> Any:
        from forestgen import registry
        from forestgen.config import DEFAULT_LEARNER

        if learner is None or isinstance(learner, str):
            return registry.get("learner", learner or DEFAULT_LEARNER)(**params)
        if isinstance(learner, type):
            return learner(**params)
        if params:
            raise TypeError("learner_params given together with a learner instance")
        return learner

    # ------------------------------------------------------------------ metadata
    def _columns(self) -> dict:
        return self._metadata["columns"]

    def _keys(self) -> list:
        return [c for c, e in self._columns().items() if e.get("sdtype") in KEY_SDTYPES]

    def _kinds(self) -> dict:
        """The metadata without its keys, as ``kinds=`` takes it."""
        cols = {c: e for c, e in self._columns().items() if e.get("sdtype") not in KEY_SDTYPES}
        return {"columns": cols, "METADATA_SPEC_VERSION": "SINGLE_TABLE_V1"}

    def get_metadata(self):
        """The metadata as an ``sdv.metadata.Metadata`` (needs SDV)."""
        sdv_metadata = require("sdv.metadata", "sdv", "ForestSynthesizer.get_metadata")
        table = {k: v for k, v in self._metadata.items() if k != "METADATA_SPEC_VERSION"}
        return sdv_metadata.Metadata.load_from_dict(
            {"tables": {self._table_name(): table}, "relationships": [],
             "METADATA_SPEC_VERSION": "V1"})

    def get_metadata_dict(self) -> dict:
        """The single-table metadata dict this synthesizer works from (no SDV needed)."""
        return json.loads(json.dumps(self._metadata, default=str))

    def _table_name(self) -> str:
        return str(self._table)

    def get_parameters(self) -> dict:
        """The learner's name and parameters (SDV: the synthesizer's parameters)."""
        from forestgen import registry

        return {"learner": registry.name_of("learner", self._learner),
                **self._learner.get_params()}

    @property
    def learner(self) -> Any:
        """The forestgen learner (fitted after :meth:`fit`): every forestgen query is there."""
        return self._learner

    # ------------------------------------------------------------------ fit / sample
    def fit(self, data: pd.DataFrame) -> ForestSynthesizer:
        """Fit the learner on ``data`` (the table the metadata describes)."""
        cols = self._columns()
        missing = [c for c in cols if c not in data.columns]
        extra = [c for c in data.columns if c not in cols]
        if missing or extra:
            raise ValueError(f"data and metadata disagree: columns {missing} are in the "
                             f"metadata only, {extra} in the data only")
        self._order = list(data.columns)
        self._key_dtypes = {c: str(data[c].dtype) for c in self._keys()}
        self._formats = {}
        table = data.drop(columns=self._keys())
        for c, e in cols.items():
            if e.get("sdtype") == "datetime" and not pdt.is_datetime64_any_dtype(table[c]):
                fmt = e.get("datetime_format")
                self._formats[c] = fmt
                table[c] = pd.to_datetime(table[c], format=fmt)
        self._learner.fit(table, kinds=self._kinds())
        self.fitted = True
        return self

    def _check_fitted(self) -> None:
        if not self.fitted:
            raise ValueError("this ForestSynthesizer is not fitted yet; call fit(data) first")

    def sample(self, num_rows: int, batch_size: int | None = None,
               output_file_path: str | Path | None = None) -> pd.DataFrame:
        """``num_rows`` synthetic rows in the columns, order and types of the fitted data
        (new keys, dates in their text format). ``output_file_path``: also write them to a CSV
        file. ``batch_size`` is accepted for SDV compatibility; forestgen draws in blocks of
        its own."""
        self._check_fitted()
        rows = self._learner.sample(int(num_rows), random_state=self._rng())
        return self._finish(rows, output_file_path)

    def sample_remaining_columns(self, known_columns: pd.DataFrame,
                                 output_file_path: str | Path | None = None) -> pd.DataFrame:
        """One row per row of ``known_columns``, drawn from the model conditioned on its
        values (exact conditional sampling; forestgen's per-row evidence)."""
        self._check_fitted()
        known = known_columns.drop(columns=[c for c in self._keys()
                                            if c in known_columns.columns])
        for c, fmt in self._formats.items():
            if c in known.columns:
                known[c] = pd.to_datetime(known[c], format=fmt)
        rows = self._learner.sample(conditions=known.reset_index(drop=True),
                                    random_state=self._rng())
        return self._finish(rows, output_file_path)

    def _rng(self) -> np.random.Generator:
        if not hasattr(self, "_generator"):
            self._generator = np.random.default_rng(getattr(self._learner, "random_state", None))
        return self._generator

    def reset_sampling(self) -> None:
        """Sample from the start again: the same rows as after :meth:`fit` or :meth:`load`."""
        self.__dict__.pop("_generator", None)

    def _finish(self, rows: pd.DataFrame, path: str | Path | None) -> pd.DataFrame:
        rows = rows.copy()
        n = len(rows)
        for c, dtype in self._key_dtypes.items():
            if pdt.is_numeric_dtype(dtype):
                rows[c] = pd.array(np.arange(n), dtype=dtype)
            else:
                rows[c] = [f"id_{i}" for i in range(n)]
        for c, fmt in self._formats.items():
            rows[c] = rows[c].dt.strftime(fmt) if fmt else rows[c].astype(str)
        rows = rows[self._order]
        if path is not None:
            rows.to_csv(path, index=False)
        return rows

    # ------------------------------------------------------------------ persistence
    def save(self, filepath: str | Path) -> Path:
        """Write the fitted synthesizer to ``filepath`` (a zip: the learner's model file and
        this synthesizer's JSON; no pickle)."""
        self._check_fitted()
        filepath = Path(filepath)
        with tempfile.TemporaryDirectory() as tmp:
            model_path = self._learner.save(Path(tmp) / _MODEL_ENTRY)
            state = {"format": FORMAT, "metadata": self.get_metadata_dict(),
                     "table": self._table, "order": self._order,
                     "key_dtypes": self._key_dtypes,
                     "formats": self._formats}
            part = filepath.with_name(f".{filepath.name}.partial")
            try:
                with zipfile.ZipFile(part, "w") as z:
                    z.write(model_path, _MODEL_ENTRY)
                    z.writestr(_STATE_ENTRY, json.dumps(state))
                part.replace(filepath)
            except BaseException:
                part.unlink(missing_ok=True)
                raise
        return filepath

    @classmethod
    def load(cls, filepath: str | Path) -> ForestSynthesizer:
        """Read a synthesizer written by :meth:`save`."""
        from forestgen.base import GenerativeForest

        try:
            with zipfile.ZipFile(filepath) as z:
                state = json.loads(z.read(_STATE_ENTRY))
                model_bytes = z.read(_MODEL_ENTRY)
        except (zipfile.BadZipFile, KeyError, json.JSONDecodeError) as e:
            raise ValueError(f"{filepath}: not a ForestSynthesizer file ({e})") from None
        if state.get("format") != FORMAT:
            raise ValueError(f"{filepath}: unknown format {state.get('format')!r}")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / _MODEL_ENTRY
            path.write_bytes(model_bytes)
            learner = GenerativeForest.load(path, mmap=False)
        self = cls.__new__(cls)
        self._metadata = state["metadata"]
        self._table = state.get("table", "table")
        self._learner = learner
        self._learner_params = {}
        self._order = state["order"]
        self._key_dtypes = state["key_dtypes"]
        self._formats = state["formats"]
        self.fitted = True
        return self

    def __repr__(self) -> str:
        return f"ForestSynthesizer({type(self._learner).__name__}, fitted={self.fitted})"
