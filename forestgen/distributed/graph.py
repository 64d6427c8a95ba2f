"""Small helpers for building Dask graphs: a fixed-order pairwise reduction, and sharing one
large object (a model, a forest) with many tasks."""

from __future__ import annotations

from typing import Any

import dask


def tree_reduce(items: list, merge) -> Any:
    """Pairwise reduction of delayed ``items`` with ``merge``, in a fixed order (the result
    depends only on the items, never on the workers)."""
    if not items:
        raise ValueError("nothing to reduce: the table has no partitions")
    items = list(items)
    while len(items) > 1:
        items = [dask.delayed(merge)(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def share(obj: Any) -> Any:
    """``obj`` as an argument for many tasks: scattered once to the cluster when a
    ``distributed`` client is current (the graph stays small), else a delayed constant."""
    try:
        from distributed import get_client

        client = get_client()
    except (ImportError, ValueError):
        return dask.delayed(obj, pure=True)
    return client.scatter(obj, hash=False)
