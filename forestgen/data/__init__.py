"""Mixed-type data layer: column schema, table encoder and bundled data sets."""

from forestgen.data.datasets import list_datasets, load_adult
from forestgen.data.encoder import TableEncoder, infer_kind
from forestgen.data.schema import ColumnKind, ColumnSpec, Schema

__all__ = [
    "ColumnKind",
    "ColumnSpec",
    "Schema",
    "TableEncoder",
    "infer_kind",
    "list_datasets",
    "load_adult",
]
