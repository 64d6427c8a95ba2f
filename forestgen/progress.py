"""A one-line text progress bar on stderr, shared by every learner's ``progress=`` option."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """``RFDE [######    ] 6/10 trees 1.2s``; does nothing unless ``enabled``."""

    def __init__(self, label: str, total: int, enabled: bool, unit: str = "trees",
                 width: int = 30):
        self.label, self.total, self.enabled, self.unit, self.width = (label, total, enabled,
                                                                      unit, width)
        self.done = 0
        self.t0 = time.perf_counter()
        self._draw()

    def _draw(self, end: str = "") -> None:
        if not self.enabled:
            return
        fill = int(self.width * self.done / max(self.total, 1))
        bar = "#" * fill + " " * (self.width - fill)
        print(f"\r{self.label} [{bar}] {self.done}/{self.total} {self.unit} "
              f"{time.perf_counter() - self.t0:.1f}s{end}", end="", file=sys.stderr, flush=True)

    def step(self, k: int = 1) -> None:
        self.done += k
        self._draw()

    def close(self, msg: str = "") -> None:
        self._draw(f" | {msg}\n" if msg else "\n")
