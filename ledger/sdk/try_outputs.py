"""What the running try leaves for its report, kept in its own process's memory (issue 40 part 3, decision 0253).

The values it passes on (XCom), the templates it rendered, the partitions it wrote and its outlets' events are
noted here as task code makes them; the process that ran the try builds its report from them the moment its code
has ended (scheduler/runtime/try_report.py: `build`), with no file beside its log. A process the try started that
notes something (a Bash command, a Spark job, a process task code forked) cannot reach this memory: it appends a
JSON line to the file LEDGER_WRITES_PATH names, which the try's report takes in as it is built (`from_others`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

OTHERS = ".writes.jsonl"  # appended to the try's log path: LEDGER_WRITES_PATH (TaskContext.writes_path)


@dataclass(slots=True)
class Outputs:
    """One try's notes (made by `begin`, in the process that runs the try)."""

    others_path: str | None  # LEDGER_WRITES_PATH: where the try's other processes note what they made
    pid: int = field(default_factory=os.getpid)  # the process that runs the try
    pushed: list[tuple[str, str]] = field(default_factory=list)  # (key, the value's JSON text), in order pushed
    rendered: dict[str, Any] | None = None
    writes: list[dict[str, Any]] = field(default_factory=list)  # partitions written and outlets' events

    def mine(self) -> bool:
        """Is this the try's own process (not one it forked)?"""
        return os.getpid() == self.pid


_current: Outputs | None = None


def begin(others_path: str | None) -> Outputs:
    """A try starts in this process: notes from now on are its own."""
    global _current
    _current = Outputs(others_path)
    return _current


def current() -> Outputs | None:
    return _current


def end() -> Outputs | None:
    """The try's notes, taken (the next try of this process starts with none)."""
    global _current
    taken, _current = _current, None
    return taken


def _to_others(item: dict[str, Any], path: str | None) -> None:
    if path is not None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(item, default=str) + "\n")


def push(key: str, text: str, fallback: str | None) -> None:
    """A value passed on under `key` (its JSON text). In a process the try forked: a line of LEDGER_WRITES_PATH
    (`fallback`)."""
    outputs = _current
    if outputs is not None and outputs.mine():
        outputs.pushed.append((key, text))
    else:
        _to_others({"xcom": key, "value": json.loads(text)}, outputs.others_path if outputs else fallback)


def note(item: dict[str, Any], fallback: str | None) -> None:
    """A partition written or an outlet's event."""
    outputs = _current
    if outputs is not None and outputs.mine():
        outputs.writes.append(json.loads(json.dumps(item, default=str)))
    else:
        _to_others(item, outputs.others_path if outputs else fallback)


def rendered(shown: dict[str, Any]) -> None:
    """The template fields the try rendered (shown as their JSON, unrepresentable values as their repr)."""
    if _current is not None:
        _current.rendered = json.loads(json.dumps(shown, default=repr))
