"""Writes docs/decisions/README.md, the index of the design decisions, from the decision files themselves.

    python docs/generate_decisions_index.py           # rewrite the index
    python docs/generate_decisions_index.py --check   # exit 1 when the index is out of date (tests/test_docs.py)

Each decision is one file, docs/decisions/NNNN-title.md: its first line `# N. Title`, then `Area: ...` (the
index groups by it, areas in the order of their first decision), then `Status: ...` where it has one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from generated import write_or_check

FOLDER = Path(__file__).resolve().parent / "decisions"
INDEX = FOLDER / "README.md"
NAME = re.compile(r"^(\d{4})-[a-z0-9_-]+\.md$")
SUPERSEDED = re.compile(r"^superseded by \[?(\d+)", re.IGNORECASE)

HEAD = """# Design decisions

Decisions that bind the code, where the product definition left room: one file per decision, each saying
what is decided, why, and what was rejected. Numbers never change: a decision replaced by a later one stays,
marked "superseded by N". Measurements belong in [benchmarks.md](../benchmarks.md); how the parts fit
together is in [architecture.md](../architecture.md). A new decision takes the next free number and an
`Area:` line; this index is generated (`python docs/generate_decisions_index.py`).
"""


def read() -> list[tuple[int, str, str, str]]:
    """(number, title, area, file name) of every decision, by number; the title of a superseded one says by
    which."""
    found = []
    for path in sorted(FOLDER.glob("*.md")):
        if path == INDEX:
            continue
        match = NAME.match(path.name)
        if match is None:
            raise SystemExit(f"{path}: a decision file is named NNNN-title.md (lowercase, digits, dashes, underscores)")
        lines = path.read_text().splitlines()
        title = re.match(r"^# (\d+)\. (.+)$", lines[0] if lines else "")
        if title is None or int(title.group(1)) != int(match.group(1)):
            raise SystemExit(f"{path}: the first line must be '# {int(match.group(1))}. Title'")
        area = next((line.removeprefix("Area: ").strip() for line in lines[1:6] if line.startswith("Area: ")),
                    "Other")
        status = next((line.removeprefix("Status: ").strip() for line in lines[1:8] if line.startswith("Status: ")), "")
        replaced = SUPERSEDED.match(status)
        shown = title.group(2) + (f" (superseded by {replaced.group(1)})" if replaced else "")
        found.append((int(match.group(1)), shown, area, path.name))
    numbers = [n for n, *_ in found]
    if len(numbers) != len(set(numbers)):
        raise SystemExit(f"two decision files share a number: {sorted(n for n in numbers if numbers.count(n) > 1)}")
    return sorted(found)


def render(decisions: list[tuple[int, str, str, str]]) -> str:
    areas: dict[str, list[str]] = {}
    for number, title, area, name in decisions:
        areas.setdefault(area, []).append(f"- [{number}. {title}]({name})")
    parts = [HEAD]
    for area, lines in areas.items():
        parts.append(f"## {area}\n\n" + "\n".join(lines) + "\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    return write_or_check(INDEX, render(read()), argv, "docs/generate_decisions_index.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
