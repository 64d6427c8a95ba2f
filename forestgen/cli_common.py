"""What the forestgen command and its sub-command modules share: exit statuses, help
formatting and reading ``--schema`` (so :mod:`forestgen.metrics.cli` need not import
:mod:`forestgen.cli`, which imports it)."""

from __future__ import annotations

import argparse

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES = f"""exit status:
  {EXIT_OK}    success
  {EXIT_INTERNAL}    unexpected internal error (a bug: please report it; --debug shows the
       traceback)
  {EXIT_BAD_INPUT}    bad input: arguments, missing or unreadable files, tables (stray strings in a
       numeric column, an empty table, missing columns), schemas, configs, damaged model files
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"""


class CommandError(ValueError):
    """Bad input found by the command line itself: one line, exit status 2."""


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=28, width=100)


def wrap(text: str, indent: str = "") -> str:
    import textwrap

    return textwrap.fill(" ".join(text.split()), width=92, initial_indent=indent,
                         subsequent_indent=indent + " " * 12 if indent else "")


def read_schema(path: str | None) -> dict | None:
    """The ``--schema`` JSON: SDV-style metadata (the dict ``kinds=`` takes)."""
    if path is None:
        return None
    import json

    try:
        with open(path) as fh:
            meta = json.load(fh)
    except json.JSONDecodeError as e:
        raise CommandError(f"{path}: malformed JSON ({e})") from None
    if not isinstance(meta, dict):
        raise CommandError(f"{path}: a schema must be a JSON object, e.g. {{\"columns\": "
                           f"{{\"day\": {{\"sdtype\": \"datetime\"}}}}}}")
    from forestgen.data.metadata import as_metadata_dict, split_kinds

    meta = as_metadata_dict(meta)
    split_kinds(meta)  # validates every entry, naming the column
    return meta
