"""Evaluate function rules of signal-driven tasks, in a process of their own (`python -m
ledger.scheduler.signals.signal_functions`): the scheduler never imports DAG files itself.

Reads a JSON list of {fileloc, root, dag_id, task_id, signal} on stdin (root: the code root of the DAG
version's snapshot the file is in), prints one JSON line: a list of
{action, error} in the same order. A rule that raises, or answers something that is not an action,
gives NONE with the error.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

from ledger.core.signal_rules import SignalAction, key_matches, parse_action
from ledger.core.signals import Signal
from ledger.scheduler.runtime.dagbag import load_file


def _answer(call: dict[str, Any], loaded: dict[str, Any]) -> dict[str, Any]:
    fileloc = call["fileloc"]
    if fileloc not in loaded:
        loaded[fileloc] = load_file(fileloc, call.get("root"))
    result = loaded[fileloc]
    if result.error is not None:
        return {"action": SignalAction.NONE.value, "error": result.error}
    dag = next((d for d in result.dags if d.dag_id == call["dag_id"]), None)
    task = dag.tasks.get(call["task_id"]) if dag is not None else None
    if task is None:
        return {"action": SignalAction.NONE.value, "error": f"{call['dag_id']}.{call['task_id']} is not in {fileloc}"}
    raw = call["signal"]
    signal = Signal(id=int(raw["id"]), key=raw["key"], version=int(raw["version"]), value=raw["value"],
                    sender=raw.get("sender", ""), sent_at=datetime.fromisoformat(raw["sent_at"]),
                    meta=raw.get("meta"))
    rules = task.signal_rules
    rule = rules.get(signal.key)
    if rule is None:
        rule = next((r for pattern, r in rules.items() if pattern.endswith("*") and key_matches(pattern, signal.key)
                     and callable(r) and not isinstance(r, str)), None)
    if rule is None or not callable(rule) or isinstance(rule, str):
        return {"action": SignalAction.NONE.value, "error": f"no function rule for {signal.key!r}"}
    try:
        action = parse_action(rule(signal), where=f"task {task.task_id!r}: signal rule")
    except Exception as exc:
        return {"action": SignalAction.NONE.value, "error": f"{type(exc).__name__}: {exc}"}
    return {"action": action.value, "error": None}


def main() -> None:
    calls = json.loads(sys.stdin.read() or "[]")
    loaded: dict[str, Any] = {}
    answers = [_answer(call, loaded) for call in calls]
    sys.stdout.write("\n" + json.dumps(answers) + "\n")


if __name__ == "__main__":
    main()
