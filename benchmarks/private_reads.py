"""Count the places where forestgen code reaches into another object's or module's private
names (issue 31: "no module reaching into another's private attributes").

Counted, in every module under ``forestgen/``:

- ``x._name`` (a single leading underscore, not a dunder) where ``x`` is not ``self``, ``cls``
  or ``super()`` and not another library's module imported by the file (``sys._getframe``);
  a private *module* of the package (``forestgen.metrics._prep``) is not a private name;
- ``getattr(x, "_name", ...)`` / ``hasattr`` / ``setattr`` with such an ``x``;
- ``from forestgen.a.b import _name``: a private name of another module.

A private name the module defines itself (a method of its own class read on another instance,
``other._grow``; a marker attribute it sets, ``fn._flag = True``) is its own business and is
left out unless ``--all`` is given.

    python benchmarks/private_reads.py [CHECKOUT] [--all]   # one line a place, then the count
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
ROOT = Path(ARGS[0] if ARGS else Path(__file__).resolve().parents[1]) / "forestgen"
#: ``--all``: count a private name the module itself defines too (another instance of its own
#: class, a marker it sets on a function); by default only names owned by another module count
OWN_TOO = "--all" in sys.argv


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _base_name(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def places(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    modules = {}  # alias -> module, for the non-forestgen modules the file imports
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                modules[a.asname or a.name.split(".")[0]] = a.name
    outside = {k for k, v in modules.items() if not v.startswith("forestgen")}
    # private names this module defines: its functions and methods, the attributes it sets on
    # self / cls, and markers it sets on its own functions (``inner._flag = True``)
    funcs = {n.name for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    own = set(funcs)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and (
                        t.value.id in ("self", "cls") or t.value.id in funcs):
                    own.add(t.attr)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if OWN_TOO is False and node.attr in own:
                continue
            v = node.value
            if isinstance(v, ast.Name) and v.id in ("self", "cls"):
                continue
            if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
                continue
            base = _base_name(v)
            if base is not None and base.split(".")[0] in outside:
                continue  # another library's module (sys._getframe)
            out.append((node.lineno, f"{ast.unparse(node)}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2:
            obj, name = node.args[0], node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) and \
                    _private(name.value) and not (isinstance(obj, ast.Name)
                                                  and obj.id in ("self", "cls")) and \
                    (OWN_TOO or name.value not in own):
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("forestgen"):
            for a in node.names:
                if _private(a.name):
                    out.append((node.lineno, f"from {node.module} import {a.name}"))
    return sorted(out)


def main() -> int:
    total = 0
    for path in sorted(ROOT.rglob("*.py")):
        for line, what in places(path):
            print(f"{path.relative_to(ROOT.parent)}:{line}: {what}")
            total += 1
    print(f"{total} places")
    return 0


if __name__ == "__main__":
    sys.exit(main())
