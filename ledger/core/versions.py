"""DAG versions read back: the canonical JSON of a structure, its sha256, the spec the scheduler decides from, and
the masking of secrets. Describing a DAG object as that structure is ledger/sdk/describe.py.

The scheduler decides from specs (stored JSON), never from user code: a run's task instances and
its schedule facts come from the version it was created with ("as-was" history).

A task's arguments are part of its structure, except the values of secret-looking keys (ledger.services.secrets.
sensitive: `env={"DB_PASSWORD": ...}`, `op_kwargs={"api_key": ...}`): the structure holds a digest of each
(`secret:sha256:...`, so that changing the secret still makes a new version), and `masked` shows it as ***.
Tries get the real value: they run the task from the version's code, not from its structure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pendulum
from pendulum import DateTime

from ledger.core.mapping import literal_count
from ledger.core.schedule import Schedule, parse_schedule
from ledger.core.secret_names import sensitive
from ledger.core.signal_rules import can_start

EMPTY: Mapping[str, Any] = {}

FORMAT = 1


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hash_structure(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -- secret-looking arguments ----------------------------------------------------------------------------

SECRET_PREFIX = "secret:sha256:"
_DIGESTS = re.compile(r"secret:sha256:[0-9a-f]{64}")
MASK = "***"
Path = tuple[str | int, ...]  # ("definition", field, key, ...) or ("expand", argument, index, ...)


def _json_or_repr(value: Any) -> Any:
    """A task argument as a version records it (as ledger.sdk.dag does): itself when JSON, else its repr."""
    try:
        json.dumps(value, sort_keys=True)
        return value
    except (TypeError, ValueError):
        return repr(value)


def secret_digest(dag_id: str, task_id: str, path: Path, value: Any) -> str:
    """What a version's structure holds in place of a secret: the sha256 of the value with where it is (so that
    one secret used twice, or in two DAGs, gives two unrelated digests)."""
    text = canonical_json(["ledger-secret", dag_id, task_id, list(path), _json_or_repr(value)])
    return SECRET_PREFIX + hash_structure(text)


def _redact(value: Any, path: Path, digest: Callable[[Path, Any], str]) -> tuple[Any, bool]:
    """`value` with the value of every secret-looking key (in dicts, also inside lists and tuples) replaced by
    digest(path, value), and whether there was any."""
    if isinstance(value, Mapping):
        out, changed = {}, False
        for key, item in value.items():
            where = (*path, str(key))
            if isinstance(key, str) and sensitive(key):
                out[key], changed = digest(where, item), True
            else:
                out[key], hit = _redact(item, where, digest)
                changed = changed or hit
        return (out, True) if changed else (value, False)
    if isinstance(value, (list, tuple)):
        items, changed = [], False
        for i, item in enumerate(value):
            new, hit = _redact(item, (*path, i), digest)
            items.append(new)
            changed = changed or hit
        return (type(value)(items) if isinstance(value, tuple) else items, True) if changed else (value, False)
    return value, False


def masked(structure: Mapping[str, Any], compare_to: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A version's structure as shown: every secret-looking argument as *** (a digest, or a clear value from a
    version stored before secrets were digested). With `compare_to` (the version before, for a diff), one
    whose value differs from that version's reads `*** (changed)`."""
    out: dict[str, Any] = json.loads(canonical_json(structure))
    dag_id = str(structure.get("dag_id"))
    before = {t["task_id"]: t for t in compare_to["tasks"]} if compare_to is not None else {}
    for task in out.get("tasks", []):
        task_id, other = task["task_id"], before.get(task["task_id"])

        def mask(path: Path, value: Any, task_id: str = task_id, other: Any = other) -> str:
            if other is None:
                return MASK
            theirs = _at(other, path)
            if theirs is _ABSENT:
                return MASK
            same = _normal(dag_id, task_id, path, value) == _normal(dag_id, task_id, path, theirs)
            return MASK if same else f"{MASK} (changed)"

        if isinstance(task.get("definition"), dict):
            task["definition"] = {name: _hide(_redact(v, ("definition", name), mask)[0])
                                  for name, v in task["definition"].items()}
        for arg, src in task.get("expand", ()):
            if isinstance(src, dict) and "values" in src:
                values = src["values"]
                if sensitive(arg) and isinstance(values, list):
                    src["values"] = [mask(("expand", arg, i), v) for i, v in enumerate(values)]
                else:
                    src["values"] = _hide(_redact(values, ("expand", arg), mask)[0])
    return out


_ABSENT = object()


def _at(task: Mapping[str, Any], path: Path) -> Any:
    """The value at `path` in a stored task description (_ABSENT: none)."""
    if path[0] == "expand":
        found = [src.get("values") for arg, src in task.get("expand", ()) if arg == path[1] and isinstance(src, dict)]
        value, rest = (found[0], path[2:]) if found else (_ABSENT, ())
    else:
        value, rest = task.get("definition", {}), path[1:]
    for step in rest:
        if isinstance(value, dict) and str(step) in value:
            value = value[str(step)]
        elif isinstance(value, list) and isinstance(step, int) and step < len(value):
            value = value[step]
        else:
            return _ABSENT
    return value


def _normal(dag_id: str, task_id: str, path: Path, value: Any) -> str:
    """A stored secret as its digest (a version from before secrets were digested holds it in clear)."""
    if isinstance(value, str) and _DIGESTS.fullmatch(value):
        return value
    return secret_digest(dag_id, task_id, path, value)


def _hide(value: Any) -> Any:
    """Digests inside text (an argument recorded as its repr) as ***."""
    if isinstance(value, str):
        return _DIGESTS.sub(MASK, value)
    if isinstance(value, dict):
        return {k: _hide(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(v) for v in value]
    return value


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
    # a mapped task (ledger/core/mapping.py): (argument, {"literal": n, "values": [...]} or {"xcom_from": task, "key":
    # key}) in expand() order; empty for a task that is not mapped
    expand: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    # control flow (ledger/core/flow.py): "branch" or "short_circuit" for a task whose choice skips others; a setup or
    # teardown task; a teardown whose failure fails the run (on_failure_fail_dagrun)
    flow: str | None = None
    setup: bool = False
    teardown: bool = False
    fail_dagrun: bool = False
    # a sensor (ledger/sdk/sensors.py): its mode, poke interval, timeout and soft_fail, as its version records them
    sensor: Mapping[str, Any] | None = None
    # an ExternalTaskMarker (ledger/sdk/external_task.py): the external DAG, task and date its clear reaches
    marker: Mapping[str, Any] | None = None
    mapped_group: str | None = None  # in a mapped task group: its instance i follows its group siblings' i
    outlets: tuple[Mapping[str, Any], ...] = ()  # the datasets and aliases it writes (ledger/sdk/datasets.py)
    inlets: tuple[Mapping[str, Any], ...] = ()  # the datasets and aliases it reads (context.inlet_events)
    queue: str = "default"  # the Celery queue its tries go to (ledger.sdk.dag.DEFAULT_QUEUE)
    # at most this many of its task instances queued or running at once: over all the DAG's runs (Airflow's
    # max_active_tis_per_dag), and within one run (max_active_tis_per_dagrun: a mapped task's instances); None: no limit
    max_active_tis_per_dag: int | None = None
    max_active_tis_per_dagrun: int | None = None
    pool_slots: int = 1  # the slots of its pool each of its instances takes while queued or running

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
        """Started by signals only (not when its dependencies are met): see ledger/core/signal_rules.py."""
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
    # scheduled on datasets: {"condition": JSON condition, "on_upstream_rewrite": "mark" | "rerun"}
    datasets: Mapping[str, Any] | None = None
    # the tasks with a max_active_tis_per_dag or max_active_tis_per_dagrun: task id -> (per DAG, per run), None where
    # not declared (empty for most DAGs: the loop looks no further)
    task_limits: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def and_downstream(self, task_ids: Iterable[str]) -> set[str]:
        """The tasks and everything downstream of them."""
        return reachable(self.downstream(), task_ids)

    def downstream(self) -> dict[str, list[str]]:
        down: dict[str, list[str]] = {tid: [] for tid in self.tasks}
        for t in self.tasks.values():
            for up in t.upstream:
                down[up].append(t.task_id)
        return down


def reachable(edges: Mapping[str, Iterable[str]], start: Iterable[str]) -> set[str]:
    """`start` and every node reachable from it along `edges` (node -> its successors)."""
    chosen = set(start)
    stack = list(chosen)
    while stack:
        for d in edges[stack.pop()]:
            if d not in chosen:
                chosen.add(d)
                stack.append(d)
    return chosen


# reads a custom timetable's description back (ledger.sdk.timetables.from_description), None for the others
Timetables = Callable[..., Schedule | None]


def schedule_from_description(desc: dict[str, Any], *, timezone: str, start_date: DateTime,
                              timetables: Timetables) -> Schedule:
    """The schedule a version describes. A custom timetable is user code: `timetables` reads it back (the
    callers pass ledger.sdk.timetables.from_description; the rule here stays free of it)."""
    timetable = timetables(desc, timezone=timezone, start_date=start_date)
    if timetable is not None:
        return timetable
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


def spec_from_json(version_hash: str, text: str, *, timetables: Timetables) -> DagSpec:
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
            expand=tuple((arg, src) for arg, src in t.get("expand", ())), mapped_group=t.get("mapped_group"),
            flow=t.get("flow"), setup=t.get("setup", False), teardown=t.get("teardown", False),
            fail_dagrun=t.get("on_failure_fail_dagrun", False), sensor=t.get("sensor"),
            marker=t.get("definition") if t["kind"] == "external_task_marker" else None,
            outlets=tuple(t.get("outlets", ())), inlets=tuple(t.get("inlets", ())), queue=t.get("queue", "default"),
            max_active_tis_per_dag=t.get("max_active_tis_per_dag"),
            max_active_tis_per_dagrun=t.get("max_active_tis_per_dagrun"), pool_slots=t.get("pool_slots", 1),
        )
        for t in data["tasks"]
    }
    limits = {tid: (t.max_active_tis_per_dag, t.max_active_tis_per_dagrun) for tid, t in tasks.items()
              if t.max_active_tis_per_dag is not None or t.max_active_tis_per_dagrun is not None}
    return DagSpec(
        dag_id=data["dag_id"], version_hash=version_hash,
        schedule=schedule_from_description(data["schedule"], timezone=data["timezone"], start_date=start,
                                          timetables=timetables),
        timezone=data["timezone"], start_date=start, end_date=end, catchup=data["catchup"],
        max_active_runs=data["max_active_runs"], max_active_tasks=data["max_active_tasks"], tasks=tasks,
        dagrun_timeout=data.get("dagrun_timeout"), deadline=data.get("deadline"),
        callbacks=data.get("callbacks", EMPTY), params=data.get("params", EMPTY), datasets=data.get("datasets"),
        task_limits=limits,
    )
