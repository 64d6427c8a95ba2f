"""Forests beyond one machine, on Dask (``pip install forestgen[dask]``).

* :func:`fit_arf` — an ARF (Watson et al. 2023) whose trees grow on Dask workers. The rows of a
  Dask DataFrame are split into ``n_blocks`` blocks of whole partitions; each tree grows on the
  real and synthetic rows of one block, where that block's partitions are held, and the
  adversarial rounds are coordinated by one scalar: the out-of-bag accuracy, reduced from
  per-block (correct, classified) counts. The table is never gathered.
* :func:`leaf_statistics`, :func:`refit_leaves` — leaf parameters as a map-reduce of mergeable
  sufficient statistics (:class:`~forestgen.leaves.stats.ForestStats`: coverage counts,
  moments, level counts, missing counts) over the partitions of a Dask DataFrame; refitting on
  new rows is "honest" re-estimation.
* :func:`log_prob` — scores a Dask DataFrame partition by partition.
* :func:`sample_to_parquet` — ``n`` synthetic rows written as a partitioned Parquet dataset;
  part ``i`` is drawn from its own counter-based seed ``seed_child(root, i)``, so the files
  are bit-identical for any number of workers.

Every function runs on the current Dask scheduler: a ``distributed.Client`` if one is active
(``LocalCluster`` on a laptop, or a real cluster's scheduler address), else Dask's local
threads. Results do not depend on the number of workers.
"""

from __future__ import annotations

try:
    import dask  # noqa: F401
    import dask.dataframe  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise ImportError("forestgen.distributed needs Dask: pip install 'forestgen[dask]'") from e

from forestgen.distributed.arf import fit_arf
from forestgen.distributed.encoding import fit_encoder
from forestgen.distributed.io import log_prob, sample_to_parquet
from forestgen.distributed.stats import leaf_statistics, refit_leaves

__all__ = ["fit_arf", "fit_encoder", "leaf_statistics", "log_prob", "refit_leaves",
           "sample_to_parquet"]
