"""What every docs generator does with the text it made: write it, or with --check say the file is out of date.

    from generated import write_or_check   # the generators run as `python docs/generate_X.py`: docs/ is on sys.path
"""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(target: Path, text: str, argv: list[str], script: str) -> int:
    """Write `text` to `target`; with `--check` in `argv`, write nothing and return 1 (saying which command makes
    it) when the file differs. `script` is the generator's path from the repository, e.g. docs/generate_X.py."""
    if "--check" not in argv:
        target.write_text(text)
        return 0
    if target.exists() and target.read_text() == text:
        return 0
    print(f"{target} is out of date: run `python {script}`", file=sys.stderr)
    return 1
