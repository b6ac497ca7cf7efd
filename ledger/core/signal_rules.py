"""Signal-driven tasks: which signals a task listens to, and what it does on each (pure, no I/O).

A task declares `signals={key: rule}`. A key is an exact signal key, or a prefix ending in `*`
(`ledger.task.etl.*` matches every task-state signal of the DAG `etl`). A rule is one of

* an action name: `"START"`, `"RESTART"`, `"STOP"` or `"NONE"` (or a `SignalAction`);
* a map from the signal's value to an action, with `"*"` for any other value:
  `{"stop": "STOP", "*": "START"}`;
* a Python function of the signal returning an action (or its name): `def rule(signal) -> SignalAction`.

What the actions do (the scheduler applies them to the task instance in each active run of the DAG):

* START: runs the task: a task waiting for a signal may start (once its upstream allows), a finished one
  gets a new try; a queued or running one is left alone.
* RESTART: ends a running try (its state: stopped) and starts a new one; otherwise as START.
* STOP: ends a running try, and the task instance ends `stopped`; one that has not started yet ends
  `stopped` without running.
* NONE: nothing.

A task *starts on signals* when one of its rules can answer START or RESTART (a function rule counts):
it does not start when its dependencies are met, only when a signal says so. A task whose rules can
only STOP starts as usual and can be stopped (a streaming task that runs until told to end). When
everything else in a run has finished, a task still waiting for a signal is skipped and the run ends.

The DAG version stores rules as JSON: `{"action": "START"}`, `{"values": {...}}`, or for a function
`{"function": "<dag file>.name", "source_sha256": ...}` (its code is part of the version, like a
task's callable); a function rule is evaluated by importing the DAG file, outside the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any

from ledger.core.errors import DagDefinitionError


class SignalAction(StrEnum):
    NONE = "NONE"
    START = "START"
    RESTART = "RESTART"
    STOP = "STOP"


STARTING = frozenset({SignalAction.START, SignalAction.RESTART})


def parse_action(value: object, *, where: str) -> SignalAction:
    if isinstance(value, SignalAction):
        return value
    if isinstance(value, str) and value.strip().upper() in SignalAction.__members__:
        return SignalAction[value.strip().upper()]
    raise DagDefinitionError(f"{where}: {value!r} is not a signal action (START, RESTART, STOP or NONE)")


def rule_to_json(key: str, rule: object, *, where: str,
                 describe_callable: Callable[[Callable[..., Any]], dict[str, Any]]) -> dict[str, Any]:
    """The JSON form of one authoring rule (checked); `describe_callable` names and hashes a function."""
    if not isinstance(key, str) or not key or (key.endswith("*") and len(key) == 1):
        raise DagDefinitionError(f"{where}: signal keys must be non-empty strings (a prefix ending in '*' "
                                 f"needs at least one character before it), not {key!r}")
    if callable(rule) and not isinstance(rule, SignalAction | str):
        described = describe_callable(rule)
        return {"function": described["callable"], "source_sha256": described["source_sha256"]}
    if isinstance(rule, Mapping):
        if not rule:
            raise DagDefinitionError(f"{where}: the value map of signal {key!r} is empty")
        values = {}
        for value, action in rule.items():
            if not isinstance(value, str):
                raise DagDefinitionError(f"{where}: signal {key!r}: values to match must be strings, not {value!r}")
            values[value] = parse_action(action, where=f"{where}: signal {key!r}").value
        return {"values": values}
    return {"action": parse_action(rule, where=f"{where}: signal {key!r}").value}


def key_matches(pattern: str, key: str) -> bool:
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


def matching_rules(rules: Mapping[str, Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """The rules of a task that apply to a signal key: an exact key wins over prefixes, else every prefix."""
    if key in rules:
        return [rules[key]]
    return [rule for pattern, rule in rules.items() if pattern.endswith("*") and key_matches(pattern, key)]


def evaluate(rule: Mapping[str, Any], value: str) -> SignalAction | None:
    """The action of a JSON rule for a signal value; None for a function rule (it needs the DAG's code)."""
    if "action" in rule:
        return SignalAction(rule["action"])
    if "values" in rule:
        values: Mapping[str, str] = rule["values"]
        found = values.get(value, values.get("*"))
        return SignalAction(found) if found is not None else SignalAction.NONE
    return None


def can_start(rules: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any of these JSON rules may answer START or RESTART (a function rule may)."""
    for rule in rules:
        if "function" in rule:
            return True
        if "action" in rule and SignalAction(rule["action"]) in STARTING:
            return True
        if "values" in rule and any(SignalAction(a) in STARTING for a in rule["values"].values()):
            return True
    return False
