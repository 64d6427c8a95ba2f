"""Shared helpers for the benchmark scripts: data paths, machine info, timing, Markdown output.

Benchmarks are plain scripts (``python benchmarks/<name>.py --help``); each writes one Markdown
file to ``benchmarks/results/``. Real data lives in ``shared/data`` next to the repository
(``/work/shared/data`` here); a benchmark that needs missing data says so and exits with status 0.
"""

from __future__ import annotations

import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
RESULTS = REPO / "benchmarks" / "results"


def _loadavg() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


_LOAD_AT_IMPORT = _loadavg()


def data_path(*parts: str) -> Path:
    """Path under ``shared/data``; exits (status 0, message on stderr) if it does not exist."""
    p = DATA.joinpath(*parts)
    if not p.exists():
        print(f"benchmark data not found: {p} (skipping)", file=sys.stderr)
        raise SystemExit(0)
    return p


def load_adult_csv(split: str = "train") -> Any:
    """UCI adult from ``shared/data/adult/adult.<split>.csv`` with '?' kept as its own level
    (as in the SDGym copy the ARF paper used, and the format arfpy can read: no NaN)."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(data_path("adult", f"adult.{split}.csv"), keep_default_na=False,
                     skipinitialspace=True)
    for c in df.columns:
        if df[c].dtype.kind in "iu":
            df[c] = df[c].astype(np.int64)
    return df


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    """Machine and software versions, recorded in every results file."""
    import numba
    import numpy
    import pandas
    import sklearn

    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "forestgen"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        if dirty:
            commit += " (+ uncommitted changes in forestgen/)"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    mem = "n/a"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    return {
        "date (UTC)": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "memory": mem,
        "load average 1/5/15 min (start of run)": _LOAD_AT_IMPORT,
        "load average 1/5/15 min (end of run)": _loadavg(),
        "python": platform.python_version(),
        "numpy / numba / pandas / sklearn": (f"{numpy.__version__} / {numba.__version__} / "
                                             f"{pandas.__version__} / {sklearn.__version__}"),
        "forestgen commit": commit,
    }


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``(result, seconds)`` of one call."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float]]:
    """Median wall time over ``repeats`` calls, and all the times."""
    times = [timed(fn)[1] for _ in range(max(1, repeats))]
    return statistics.median(times), times


def fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        if x != x:  # NaN
            return "n/a"
        return f"{x:.{digits}f}"
    return str(x)


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 3) -> str:
    """A GitHub-flavoured Markdown table; floats formatted with ``digits`` decimals."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for r in rows:
        out.append("| " + " | ".join(fmt(v, digits) for v in r) + " |")
    return "\n".join(out)


def write_result(name: str, title: str, sections: Sequence[str], command: str | None = None,
                 ) -> Path:
    """Write ``benchmarks/results/<name>.md`` with a machine block, the command and sections."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    cmd = command or "python " + shlex.join([os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    lines = [f"# {title}", "", f"Command: `{cmd}`", ""]
    lines += [md_table(["machine", "value"], list(info.items())), ""]
    for s in sections:
        lines += [s.rstrip(), ""]
    path = RESULTS / f"{name}.md"
    path.write_text("\n".join(lines))
    print(f"wrote {path}", file=sys.stderr)
    return path
