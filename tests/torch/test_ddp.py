"""Lightning DDP run for real: 2 CPU processes (gloo), synthetic batches from the forest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ddp_synthetic_run as run  # noqa: E402

from forestgen import registry  # noqa: E402
from forestgen.torch import SyntheticDataset  # noqa: E402


def test_two_rank_ddp_fits_once_syncs_metrics_and_draws_disjoint_streams(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(HERE / "ddp_synthetic_run.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    assert all(int(r["world"]) == 2 for r in ranks)
    # one forest fitted in the whole job (prepare_data on rank 0), saved once under the
    # trainer's root directory, memory-mapped by every rank: the same forest everywhere
    assert [int(r["fits"]) for r in ranks] == [1, 0]
    assert len(list((tmp_path / "forestgen").glob("datamodule-*.fgm"))) == 1
    assert all(bool(r["mmap"]) for r in ranks)
    assert str(ranks[0]["forest"]) == str(ranks[1]["forest"])
    # ... trained on its own batches: ceil(6 / 2) per epoch, none shared across ranks/epochs
    per_rank = [list(r["batches"]) for r in ranks]
    assert all(len(b) == run.EPOCHS * run.N_BATCHES // 2 for b in per_rank)
    assert len(set(per_rank[0]) | set(per_rank[1])) == run.EPOCHS * run.N_BATCHES
    # DDP averaged the gradients: both replicas end with the same weights
    np.testing.assert_allclose(ranks[0]["weights"], ranks[1]["weights"], rtol=0, atol=1e-7)
    # the same forest, split and streams in one process (fitted in setup: no trainer here)
    with registry.registered((*run.ENTRY, run.CountingARF)):
        dm = run.datamodule()
        dm.setup("fit")
        assert len(run.FITS) == 1
        assert run.forest_digest(dm.model_) == str(ranks[0]["forest"])
        for r, rec in enumerate(ranks):
            ds = SyntheticDataset(dm.model_, batch_size=run.BATCH, n_batches=run.N_BATCHES,
                                  seed=run.SEED, output="tensor", encoding=dm.encoder_, rank=r,
                                  world_size=2)
            expect = []
            for e in range(run.EPOCHS):
                ds.set_epoch(e)
                expect += [run.digest(torch.as_tensor(b)) for b in ds.batches()]
            assert expect == list(rec["batches"])
        # the metrics computed in validation_step, synced across the two ranks (each saw half the
        # validation rows), equal the single-process values over all of them with the final weights
        assert int(ranks[0]["n_val"]) == 80 and all(r["synced"].shape == (run.EPOCHS, 2)
                                                    for r in ranks)
        lin = torch.nn.Linear(dm.n_features - 1, 1)
        w = torch.as_tensor(ranks[0]["weights"])
        with torch.no_grad():
            lin.weight.copy_(w[:-1].reshape(1, -1))
            lin.bias.copy_(w[-1:])
        ll, mmd = run.metrics(dm)
        for batch in dm.val_dataloader():
            run.update(ll, mmd, lin, batch, dm)
        single = np.array([float(ll.compute()), float(mmd.compute())])
        assert np.isfinite(single).all() and single[1] > 0
        for rec in ranks:
            np.testing.assert_allclose(rec["synced"][-1], single, rtol=1e-6)
