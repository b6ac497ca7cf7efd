"""Dynamic task mapping, as Airflow's `.expand()`: the rules, pure (no database, no clock).

A mapped task runs as N task instances, map_index 0..N-1, one per value of the list it is expanded over (several
expanded arguments: one per combination, the last argument varying fastest, as itertools.product). The list is
either a literal in the DAG file (the instances are made with the run) or the value an upstream task passed on
(the task waits as one unexpanded instance, map_index -1, until that upstream has finished; then it gets its
instances, or is skipped for an empty list, or fails for a value that is not a list or is too long).

An instance is named `task[i]` in listings (`label`); a task that is not mapped keeps map_index -1 and its id.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core.errors import ConfigError

NOT_MAPPED = -1
DEFAULT_MAX_MAP_LENGTH = 1024


def max_map_length(env: Mapping[str, str] | None = None) -> int:
    """The most instances one mapped task may have (LEDGER_MAX_MAP_LENGTH; Airflow's max_map_length).
    The scheduler reads it once, with its settings (ledger/infra/scheduler_settings.py); DAG files check
    literal lists here."""
    raw = (os.environ if env is None else env).get("LEDGER_MAX_MAP_LENGTH", str(DEFAULT_MAX_MAP_LENGTH))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"LEDGER_MAX_MAP_LENGTH={raw!r} is not a valid number of instances (a positive integer)")
    return value


def label(task_id: str, map_index: int) -> str:
    """How a task instance is named: `transform[2]` for a mapped instance, the task id otherwise."""
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


def split_label(key: str) -> tuple[str, int]:
    """(task id, map index) of a label (task ids cannot hold '[': see ledger/sdk/dag.py)."""
    if key.endswith("]") and "[" in key:
        task_id, _, index = key[:-1].rpartition("[")
        if index.isdigit():
            return task_id, int(index)
    return key, NOT_MAPPED


@dataclass(frozen=True, slots=True)
class Expansion:
    """What expanding a task over its values gives: `count` instances, or none and the state it takes instead
    (skipped for an empty list, failed for a bad value) with the reason."""

    count: int
    state: str | None = None  # None: expanded; "skipped" or "failed"
    reason: str | None = None


def describe_value(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:80]}{'...' if len(text) > 80 else ''}"


def expand(values: Sequence[tuple[str, Any]], *, source: str, max_length: int) -> Expansion:
    """How many instances a task mapped over `values` ((argument, value) pairs, in expand() order) gets. `source`
    names where the values came from, for the reason."""
    for arg, value in values:
        if not isinstance(value, list):
            return Expansion(0, "failed", f"cannot expand {arg!r} over {source}: it is not a list but a "
                                          f"{describe_value(value)}")
    count = math.prod(len(value) for _arg, value in values)
    if count == 0:
        empty = ", ".join(arg for arg, value in values if not value)
        return Expansion(0, "skipped", f"{source} gave an empty list for {empty}: nothing to map over")
    if count > max_length:
        return Expansion(0, "failed", f"expanding over {source} would make {count} instances, more than the "
                                      f"{max_length} allowed (LEDGER_MAX_MAP_LENGTH)")
    return Expansion(count)


def expand_task(sources: Sequence[tuple[str, Mapping[str, Any]]], passed: Mapping[str, Mapping[str, Any]], *,
                max_length: int) -> Expansion:
    """How many instances a mapped task gets (its version's `expand`), given what the run's tasks passed on
    (`passed`: task id -> key -> value, as tries pull them)."""
    values: list[tuple[str, Any]] = []
    for arg, src in sources:
        try:
            values.append((arg, _items(src, passed)))
        except LookupError as exc:
            return Expansion(0, "failed", f"cannot expand {KWARGS_TEXT if arg == KWARGS else repr(arg)}: {exc}")
    return expand([(KWARGS_TEXT if arg == KWARGS else arg, v) for arg, v in values], source=source_text(sources),
                  max_length=max_length)


KWARGS = "**"  # the argument of expand_kwargs(): each item is a dict of arguments
KWARGS_TEXT = "expand_kwargs()"


def _items(src: Mapping[str, Any], passed: Mapping[str, Mapping[str, Any]]) -> Any:
    """The list an expand() source stands for, as far as its length goes (items of literals, map() and zip() are
    placeholders: only the try computes them); a value that is not a list as it is; LookupError when a task
    passed no value."""
    if "literal" in src:
        return [None] * int(src["literal"])
    if "map" in src:
        return _items(src["of"], passed)
    if "zip" in src:
        lists = [_items(member, passed) for member in src["zip"]]
        for items in lists:
            if not isinstance(items, list):
                return items
        lengths = [len(items) for items in lists]
        return [None] * (max(lengths) if "fillvalue" in src else min(lengths))
    found = passed.get(str(src["xcom_from"]), {})
    if src["key"] not in found:
        raise LookupError(f"task {src['xcom_from']!r} passed no value {src['key']!r} in this run")
    return found[src["key"]]


def source_tasks(src: Mapping[str, Any]) -> set[str]:
    """The tasks whose values an expand() source reads (through map() and zip())."""
    if "xcom_from" in src:
        return {str(src["xcom_from"])}
    if "map" in src:
        return source_tasks(src["of"])
    if "zip" in src:
        return {t for member in src["zip"] for t in source_tasks(member)}
    return set()


def instance_args(values: Sequence[tuple[str, Sequence[Any]]], map_index: int) -> dict[str, Any]:
    """The arguments of instance `map_index`: one value of each list, the last list varying fastest."""
    out: dict[str, Any] = {}
    rest = map_index
    for arg, value in reversed(values):
        rest, i = divmod(rest, len(value))
        out[arg] = value[i]
    if rest:
        raise IndexError(f"map index {map_index} is out of range")
    return dict(reversed(list(out.items())))


def literal_count(sources: Sequence[tuple[str, Mapping[str, Any]]]) -> int | None:
    """The instance count of a task mapped over literal lists only (a version's `expand`), or None when it is
    mapped over an upstream's value (known only once that has run)."""
    if not sources or any("literal" not in src for _arg, src in sources):
        return None
    return math.prod(int(src["literal"]) for _arg, src in sources)


def source_text(sources: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """Where a mapped task's values come from, for events and listings: 'a literal list' or 'task 'x''."""
    names = sorted({t for _arg, src in sources for t in source_tasks(src)})
    if not names:
        return "a literal list"
    return ", ".join(f"the value of task {n!r}" for n in names)


def choose_instance(task_id: str, run_id: int, indexes: Sequence[int], wanted: int | None) -> int:
    """Which task instance a command about `task_id` of a run means (`indexes`: the map indexes the run has of
    it; `wanted`: --map-index). LookupError, with the one line to show, when there is none or it is ambiguous."""
    if not indexes:
        raise LookupError(f"run {run_id} has no task {task_id!r}")
    mapped = [i for i in indexes if i >= 0]
    if wanted is None:
        if not mapped:
            return NOT_MAPPED
        raise LookupError(f"task {task_id!r} of run {run_id} is mapped ({len(mapped)} instance(s): "
                          f"{map_indexes(mapped)}); choose one with --map-index")
    if wanted not in mapped:
        has = f"instances {map_indexes(mapped)}" if mapped else "no mapped instances"
        raise LookupError(f"task {task_id!r} of run {run_id} has no instance {wanted} ({has})")
    return wanted


def map_indexes(rows: Sequence[int]) -> str:
    """A short text of which map indexes exist, for error messages: '0-2' or '-1' (not expanded)."""
    found = sorted(rows)
    if not found:
        return "none"
    if found == list(range(found[0], found[-1] + 1)) and len(found) > 1:
        return f"{found[0]}-{found[-1]}"
    return ", ".join(str(i) for i in found)
