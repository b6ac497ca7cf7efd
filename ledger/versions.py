"""DAG versions: a canonical JSON description of a DAG's structure, its sha256, and the spec read back.

The scheduler decides from specs (stored JSON), never from user code: a run's task instances and
its schedule facts come from the version it was created with ("as-was" history).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pendulum
from pendulum import DateTime

from ledger.code import python_digest
from ledger.dag import describe_callbacks
from ledger.mapping import literal_count
from ledger.schedule import Schedule, parse_schedule
from ledger.signal_rules import can_start

if TYPE_CHECKING:
    from ledger.dag import DAG

EMPTY: Mapping[str, Any] = {}

FORMAT = 1


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hash_structure(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_digest(source_code: str) -> str:
    """sha256 of a Python file's syntax tree (see ledger.code.python_digest)."""
    return python_digest(source_code)


def structure_of(dag: DAG) -> dict[str, Any]:
    """Everything that defines the DAG: tasks with kind and arguments, edges, schedule and settings, and
    (for a DAG loaded from a file) the digest of its code: the file's syntax tree and, when it imports
    helper modules of the DAGs folder, theirs (ledger/code.py), so that changing a helper makes a new
    version of every DAG that imports it."""
    if dag.code is not None:
        code = dag.code.version_digest()
    elif dag.source_code is not None:
        code = {"code_sha256": code_digest(dag.source_code)}
    else:
        code = {}
    return {
        **code,
        "format": FORMAT,
        "dag_id": dag.dag_id,
        "schedule": dag.schedule.describe(),
        "timezone": dag.timezone,
        "start_date": dag.start_date.isoformat(),
        "end_date": dag.end_date.isoformat() if dag.end_date else None,
        "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs,
        "max_active_tasks": dag.max_active_tasks,
        # only when given, so that other DAGs keep their version hashes
        **({"ignored_args": dag.ignored_args} if getattr(dag, "ignored_args", None) else {}),
        **({"dagrun_timeout": dag.dagrun_timeout.total_seconds()} if dag.dagrun_timeout is not None else {}),
        **({"deadline": dag.deadline.total_seconds()} if dag.deadline is not None else {}),
        **({"callbacks": describe_callbacks(dag.callbacks)} if dag.callbacks else {}),
        **({"params": {name: p.describe() for name, p in sorted(dag.params.items())}} if dag.params else {}),
        "tasks": [
            {"task_id": t.task_id, "kind": t.kind, "upstream": sorted(t.upstream_ids), **t.settings(),
             "definition": t.definition()}
            for t in (dag.tasks[tid] for tid in sorted(dag.tasks))
        ],
    }


def version_of(dag: DAG) -> tuple[str, str]:
    """(version hash, canonical JSON text) of a DAG."""
    text = canonical_json(structure_of(dag))
    return hash_structure(text), text


@dataclass(frozen=True, slots=True)
class TaskSpec:
    task_id: str
    kind: str
    upstream: tuple[str, ...]
    retries: int
    retry_delay: float
    depends_on_past: bool
    wait_for_downstream: bool
    trigger_rule: str
    pool: str
    priority_weight: int
    execution_timeout: float | None
    signals: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # key pattern -> JSON rule
    retry_exponential_backoff: bool = False
    max_retry_delay: float | None = None
    callbacks: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)  # kind -> recorded callables
    # a mapped task (ledger/mapping.py): (argument, {"literal": n, "values": [...]} or {"xcom_from": task, "key":
    # key}) in expand() order; empty for a task that is not mapped
    expand: tuple[tuple[str, Mapping[str, Any]], ...] = ()

    @property
    def mapped(self) -> bool:
        return bool(self.expand)

    @property
    def literal_count(self) -> int | None:
        """How many instances a task mapped over literal lists has (None: not mapped, or mapped over another
        task's value, known only once that has run)."""
        return literal_count(self.expand)

    def delay_after(self, try_number: int) -> float:
        """Seconds before the retry that follows failed try `try_number` (1 for the first): retry_delay, or with
        retry_exponential_backoff retry_delay * 2^(try_number - 1), at most max_retry_delay (as in Airflow,
        without its jitter: the due time is recorded, and should be what happens)."""
        delay = self.retry_delay * (2 ** max(0, try_number - 1) if self.retry_exponential_backoff else 1)
        return min(delay, self.max_retry_delay) if self.max_retry_delay is not None else delay

    @property
    def starts_on_signal(self) -> bool:
        """Started by signals only (not when its dependencies are met): see ledger/signal_rules.py."""
        return bool(self.signals) and can_start(self.signals.values())


@dataclass(frozen=True, slots=True)
class DagSpec:
    dag_id: str
    version_hash: str
    schedule: Schedule
    timezone: str
    start_date: DateTime
    end_date: DateTime | None
    catchup: bool
    max_active_runs: int
    max_active_tasks: int
    tasks: dict[str, TaskSpec]
    dagrun_timeout: float | None = None  # seconds a run may run before it is failed
    deadline: float | None = None  # seconds after the interval's end by which a run should have finished
    callbacks: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)  # kind -> recorded callables
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> default, type, enum

    def and_downstream(self, task_ids: Iterable[str]) -> set[str]:
        """The tasks and everything downstream of them."""
        down = self.downstream()
        chosen = set(task_ids)
        stack = list(chosen)
        while stack:
            for d in down[stack.pop()]:
                if d not in chosen:
                    chosen.add(d)
                    stack.append(d)
        return chosen

    def downstream(self) -> dict[str, list[str]]:
        down: dict[str, list[str]] = {tid: [] for tid in self.tasks}
        for t in self.tasks.values():
            for up in t.upstream:
                down[up].append(t.task_id)
        return down


def schedule_from_description(desc: dict[str, Any], *, timezone: str, start_date: DateTime) -> Schedule:
    kind = desc.get("type")
    value: str | timedelta | None
    if kind == "cron":
        value = str(desc["expression"])
    elif kind == "timedelta":
        value = timedelta(seconds=float(desc["seconds"]))
    elif kind == "once":
        value = "@once"
    else:
        value = None
    return parse_schedule(value, timezone=timezone, start_date=start_date)


def spec_from_json(version_hash: str, text: str) -> DagSpec:
    data = json.loads(text)
    start = pendulum.parse(data["start_date"])
    end = pendulum.parse(data["end_date"]) if data.get("end_date") else None
    assert isinstance(start, DateTime) and (end is None or isinstance(end, DateTime))
    tasks = {
        t["task_id"]: TaskSpec(
            task_id=t["task_id"], kind=t["kind"], upstream=tuple(t["upstream"]), retries=t["retries"],
            retry_delay=t["retry_delay"], depends_on_past=t["depends_on_past"],
            wait_for_downstream=t["wait_for_downstream"], trigger_rule=t["trigger_rule"], pool=t["pool"],
            priority_weight=t["priority_weight"], execution_timeout=t["execution_timeout"],
            signals=t.get("signals", {}), retry_exponential_backoff=t.get("retry_exponential_backoff", False),
            max_retry_delay=t.get("max_retry_delay"), callbacks=t.get("callbacks", EMPTY),
            expand=tuple((arg, src) for arg, src in t.get("expand", ())),
        )
        for t in data["tasks"]
    }
    return DagSpec(
        dag_id=data["dag_id"], version_hash=version_hash,
        schedule=schedule_from_description(data["schedule"], timezone=data["timezone"], start_date=start),
        timezone=data["timezone"], start_date=start, end_date=end, catchup=data["catchup"],
        max_active_runs=data["max_active_runs"], max_active_tasks=data["max_active_tasks"], tasks=tasks,
        dagrun_timeout=data.get("dagrun_timeout"), deadline=data.get("deadline"),
        callbacks=data.get("callbacks", EMPTY), params=data.get("params", EMPTY),
    )
