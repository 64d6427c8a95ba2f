"""Numba kernels taking many loose arguments: every function under ``forestgen/`` decorated
with ``njit`` / ``jit`` / ``parallel_kernel`` (any call or attribute form) and its argument
count, those with at least ``--min`` (default 12) listed, largest first.

    python benchmarks/numba_args.py [CHECKOUT] [--min 12]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

DECORATORS = {"njit", "jit", "parallel_kernel", "vectorize", "guvectorize"}


def _name(dec: ast.expr) -> str:
    node = dec.func if isinstance(dec, ast.Call) else dec
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def kernels(root: Path):
    for path in sorted((root / "forestgen").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and any(
                    _name(d) in DECORATORS for d in node.decorator_list):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                yield str(path.relative_to(root)), node.name, n


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0] if args else Path(__file__).resolve().parents[1])
    low = int(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 12
    found = sorted((k for k in kernels(root) if k[2] >= low), key=lambda k: -k[2])
    total = sum(1 for _ in kernels(root))
    print(f"{len(found)} of {total} Numba kernels take {low} or more arguments")
    for path, name, n in found:
        print(f"{n:4d}  {path}::{name}")


if __name__ == "__main__":
    main()
