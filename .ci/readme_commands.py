"""Print the README's numbered set-up commands (``# 1. ...`` / ``# 2. ...``), one per line.

CI runs exactly these lines, so the README and CI cannot drift apart.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def readme_commands(readme: str) -> list[str]:
    """The command line following each ``# N.`` comment in the README's first bash block."""
    block = re.search(r"```bash\n(.*?)```", readme, flags=re.S)
    if block is None:
        raise ValueError("README.md has no ```bash block")
    lines = block.group(1).splitlines()
    cmds = []
    for i, line in enumerate(lines):
        if re.match(r"#\s*\d+\.", line.strip()):
            nxt = next((x.strip() for x in lines[i + 1:] if x.strip()), "")
            if not nxt or nxt.startswith("#"):
                raise ValueError(f"README comment {line.strip()!r} is not followed by a command")
            cmds.append(nxt)
    if len(cmds) < 2:
        raise ValueError(f"expected the README's two numbered commands, found {len(cmds)}")
    return cmds


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
    print("\n".join(readme_commands((root / "README.md").read_text(encoding="utf-8"))))
