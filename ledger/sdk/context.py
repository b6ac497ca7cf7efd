"""What a running task knows about itself: the facts of its run, as an object and as env variables."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


def _iso(value: datetime) -> str:
    return value.isoformat()


@dataclass(frozen=True)
class TaskContext:
    dag_id: str
    task_id: str
    run_id: str
    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    try_number: int
    dag_version: str
    run_type: str
    conf: dict[str, Any] = field(default_factory=dict)
    log_path: str | None = None
    signal: dict[str, Any] | None = None  # the signal that started this try (id, key, version, value, ...)
    code_dir: str | None = None  # the folder of the version's code this try runs (LEDGER_CODE_DIR)
    params: dict[str, Any] = field(default_factory=dict)  # the DAG's params, with the run's conf over them
    xcom_values: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> key -> value, this run
    templates_dict: dict[str, Any] = field(default_factory=dict)  # a PythonTask's templates_dict, rendered
    prev_interval: tuple[str, str] | None = None  # the previous run's data interval (ISO), if any
    # the prior successful run's data interval and start and end times (ISO; ledger/store/prior_runs.py), if any
    prev_success: tuple[str, str, str | None, str | None] | None = None
    map_index: int = -1  # instance i of a mapped task (`{{ ti.map_index }}`, LEDGER_MAP_INDEX); -1: not mapped
    # Airflow's `triggering_dataset_events` of a dataset-triggered run: dataset -> the events it consumed, each a
    # dict (partition, extra, source_dag_id, source_run_id, source_task_id, timestamp)
    triggering_dataset_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # the events of the task's inlets the try was given, by inlet (`dataset:KEY`, `alias:NAME`): see inlet_events
    inlet_dataset_events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # how many tries the task instance may have in all (the ledger's max_tries: its retries plus one); None: unknown
    tries_allowed: int | None = None
    start_date: datetime | None = None  # when this try's task began in its process (set as it begins)
    run_started: str | None = None  # when the run started (ISO), if it has
    operator: str | None = None  # the class name of the task (Airflow's ti.operator)

    # Airflow's TaskInstance attributes, as far as a running try knows them
    @property
    def execution_date(self) -> datetime:
        """Airflow's deprecated name of the logical date."""
        return self.logical_date

    @property
    def max_tries(self) -> int | None:
        """Airflow's max_tries: the last try number that may still be retried (the tries allowed less one)."""
        return None if self.tries_allowed is None else self.tries_allowed - 1

    @property
    def end_date(self) -> None:
        """None: the try has not ended while its task runs (as in Airflow before it ends)."""
        return None

    @property
    def duration(self) -> None:
        """None: the try has not ended while its task runs (as in Airflow before it ends)."""
        return None

    @property
    def hostname(self) -> str:
        """The host this try runs on."""
        return socket.gethostname()

    @property
    def log_url(self) -> str | None:
        """The web view's page of this try's log (LEDGER_WEB_BASE_URL; unset: None)."""
        return log_url(int(self.run_id) if self.run_id.isdigit() else None, self.task_id, self.map_index,
                       self.try_number)

    def xcom_push(self, key: str, value: Any) -> None:
        """Pass `value` on under `key` (JSON, at most 64 KiB: else XComError, and the try fails)."""
        from ledger.sdk.xcom import encode

        if not isinstance(key, str) or not key:
            raise ValueError("xcom_push needs a non-empty string key")
        from ledger.sdk import try_outputs

        text = encode(key, value)
        self.xcom_values.setdefault(self.task_id, {})[key] = value
        if self.log_path is not None:  # (kept for the try's report: ledger/sdk/try_outputs.py)
            try_outputs.push(key, text, self.writes_path)

    def xcom_pull(self, task_ids: str | list[str] | None = None, key: str = "return_value", *,
                  dag_id: str | None = None, include_prior_dates: bool = False, map_indexes: Any = None,
                  default: Any = None) -> Any:
        """The value `task_ids` passed on under `key` in this run (`default`, None unless given, when it passed
        none); a list of task ids gives a list of values. Without task_ids: this task's own. A mapped task's value
        is the list of its instances' values; `map_indexes` (an index or a list of them) picks from it, as
        Airflow's does. `dag_id` must be this run's DAG, and `include_prior_dates=True` is refused: a try pulls the
        values of its own run only, and a pull that quietly found nothing in earlier runs would read as "no value"
        (the watermark idiom would start from scratch on every run)."""
        if dag_id is not None and dag_id != self.dag_id:
            raise ValueError(f"xcom_pull: a try pulls the values of its own run only, not of DAG {dag_id!r}")
        if include_prior_dates:
            raise ValueError("xcom_pull: include_prior_dates=True is not supported: a try pulls the values of its own "
                             "run only; keep a value that outlives runs in a Variable or in the data itself "
                             "(docs/from-airflow.md)")
        if isinstance(task_ids, (list, tuple)):
            return [_pick(self.xcom_values.get(t, {}).get(key, default), map_indexes) for t in task_ids]
        return _pick(self.xcom_values.get(task_ids or self.task_id, {}).get(key, default), map_indexes)

    @property
    def writes_path(self) -> str | None:
        """Where the processes this try starts (a Bash command, a Spark job) record what they made: a JSON-lines
        file beside its log that the try's report takes in (ledger/sdk/try_outputs.py)."""
        from ledger.sdk.try_outputs import OTHERS

        return None if self.log_path is None else self.log_path + OTHERS

    def record_write(self, dataset: str, partition: str, *, rows: int | None = None,
                     path: str | None = None) -> None:
        """Record that this try wrote `partition` of `dataset` (lineage: `ledger lineage DATASET`).

        The scheduler stores the record with the run, task, try and DAG version when the try ends.
        """
        if not dataset or not partition:
            raise ValueError("record_write needs a dataset and a partition")
        if self.writes_path is None:
            return
        from ledger.sdk import try_outputs

        try_outputs.note({"dataset": dataset, "partition": partition, "rows": rows, "path": path,
                          "at": datetime.now(UTC).isoformat()}, self.writes_path)

    @property
    def outlet_events(self) -> OutletEvents:
        """Airflow's `outlet_events`: `context.outlet_events[dataset].extra = {...}` gives this try's event of an
        outlet its extra; `context.outlet_events[alias].add(Dataset(uri), extra=...)` adds an event of that dataset
        to an alias. Recorded with the try's outcome, when it succeeds."""
        return OutletEvents(self.writes_path)

    @property
    def inlet_events(self) -> Any:
        """Airflow's `inlet_events`: `context.inlet_events[dataset]` is the list of events of that inlet the try
        reads, oldest first (ledger.sdk.datasets.InletEvents)."""
        from ledger.sdk.datasets import InletEvents

        return InletEvents(self.inlet_dataset_events)

    def send_signal(self, key: str, value: str, *, meta: dict[str, Any] | None = None) -> Any:
        """Send a signal (see `ledger signal send`) from this try; returns the stored Signal.

        With this try as the sender, through the client of task code (ledger/sdk/ledger_client.py): to the
        database where the try has it, to ledger's webserver on a Celery worker."""
        from ledger.infra.worker_client import try_actor
        from ledger.sdk.signal_sender import send_from_task

        sender = try_actor(self.dag_id, self.task_id, self.run_id, self.try_number)
        return send_from_task(key, value, sender=sender, meta=meta)

    def env(self) -> dict[str, str]:
        """The LEDGER_* environment variables of the try's process, whatever the task's kind (Python, Bash,
        Spark: see `environment`), dates ISO-8601 in UTC; a BashTask's command inherits them. Airflow's
        AIRFLOW_CTX_* names of the same facts are there too (scripts a DAG calls read them, as under Airflow)."""
        logical = _iso(self.logical_date)
        return {
            "AIRFLOW_CTX_DAG_ID": self.dag_id,
            "AIRFLOW_CTX_TASK_ID": self.task_id,
            "AIRFLOW_CTX_EXECUTION_DATE": logical,
            "AIRFLOW_CTX_LOGICAL_DATE": logical,
            "AIRFLOW_CTX_TRY_NUMBER": str(self.try_number),
            "AIRFLOW_CTX_DAG_RUN_ID": self.run_id,
            "LEDGER_DAG_ID": self.dag_id,
            "LEDGER_TASK_ID": self.task_id,
            "LEDGER_RUN_ID": self.run_id,
            "LEDGER_LOGICAL_DATE": logical,
            "LEDGER_DATA_INTERVAL_START": _iso(self.data_interval_start),
            "LEDGER_DATA_INTERVAL_END": _iso(self.data_interval_end),
            "LEDGER_TRY_NUMBER": str(self.try_number),
            "LEDGER_DAG_VERSION": self.dag_version,
            "LEDGER_RUN_TYPE": self.run_type,
            **({"LEDGER_MAP_INDEX": str(self.map_index)} if self.map_index >= 0 else {}),
            **({"LEDGER_WRITES_PATH": self.writes_path} if self.writes_path else {}),
            **({"LEDGER_CODE_DIR": self.code_dir} if self.code_dir else {}),
            **({"LEDGER_SIGNAL_KEY": str(self.signal["key"]), "LEDGER_SIGNAL_VALUE": str(self.signal["value"]),
                "LEDGER_SIGNAL_VERSION": str(self.signal["version"])} if self.signal else {}),
        }


def log_url(run_id: int | None, task_id: str, map_index: int, try_number: int) -> str | None:
    """The address of a try's log page in the web view, under LEDGER_WEB_BASE_URL (Airflow's [webserver] base_url):
    None when it is unset, or for a run the ledger does not hold (`ledger dags test`'s, id 0)."""
    from urllib.parse import quote

    from ledger.core.mapping import label
    from ledger.infra.settings import value

    base = value("LEDGER_WEB_BASE_URL")
    if not base or not run_id:
        return None
    return (f"{str(base).rstrip('/')}/runs/{run_id}/tasks/{quote(label(task_id, map_index), safe='')}"
            f"/tries/{try_number}/log")


def push_return(task: Any, context: TaskContext, value: Any) -> None:
    """Pass on what a task's code returned: under `return_value`, and with the task's `multiple_outputs` (Airflow's
    `@task(multiple_outputs=True)`) each key of a returned dict under its own name as well."""
    from ledger.sdk.xcom import RETURN_KEY

    if getattr(task, "multiple_outputs", False) and isinstance(value, dict):
        for key, item in value.items():
            context.xcom_push(str(key), item)
    context.xcom_push(RETURN_KEY, value)


_current: tuple[TaskContext, Any] | None = None  # the try this process runs now: (its context, its task)


def set_current(context: TaskContext | None, task: Any = None) -> None:
    """Record the try this process is running (the task runner calls it just before the task's code)."""
    global _current
    _current = None if context is None else (context, task)


def current() -> tuple[TaskContext, Any] | None:
    """The running try's (context, task), for code that is not handed them (Airflow's get_current_context)."""
    return _current


class OutletEvents:
    """`context.outlet_events[...]`: an accessor per outlet or alias, given its object or its name."""

    def __init__(self, path: str | None) -> None:
        self._path = path

    def __getitem__(self, key: Any) -> OutletEvent:
        from ledger.sdk.datasets import Dataset, DatasetAlias

        if isinstance(key, Dataset):
            return OutletEvent(self._path, key.key, None)
        if isinstance(key, DatasetAlias):
            return OutletEvent(self._path, None, key.name)
        # a name: a dataset's key for `.extra`, an alias's name for `.add()` (as Airflow reads a string key)
        return OutletEvent(self._path, str(key), str(key))

    def for_asset(self, *, name: str | None = None, uri: str | None = None) -> OutletEvent:
        """Airflow 3's `outlet_events.for_asset(name=..., uri=...)`."""
        from ledger.sdk.datasets import asset_key

        return OutletEvent(self._path, asset_key(name, uri), None)

    def for_asset_alias(self, *, name: str) -> OutletEvent:
        """Airflow 3's `outlet_events.for_asset_alias(name=...)`."""
        return OutletEvent(self._path, None, name)


class _Extra(dict[str, Any]):
    """An outlet event's extra that is written each time it is changed in place (`outlet_events[ds].extra["k"] =
    v`, `.extra.update(...)`), as Airflow keeps such changes."""

    def __init__(self, save: Any) -> None:
        super().__init__()
        self._save = save

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._save(dict(self))

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._save(dict(self))

    def setdefault(self, key: str, default: Any = None) -> Any:
        found = super().setdefault(key, default)
        self._save(dict(self))
        return found


class OutletEvent:
    def __init__(self, path: str | None, outlet: str | None, alias: str | None) -> None:
        self._path, self._outlet, self._alias = path, outlet, alias
        self._extra: dict[str, Any] = _Extra(self._save_extra) if outlet is not None else {}

    def _save_extra(self, extra: dict[str, Any]) -> None:
        self._write({"outlet": self._outlet, "extra": extra})

    @property
    def extra(self) -> dict[str, Any]:
        """The extra of this try's event of the outlet: set it, or change it in place; each change is kept."""
        return self._extra

    @extra.setter
    def extra(self, value: dict[str, Any]) -> None:
        if self._outlet is None:
            raise ValueError("an alias has no extra of its own: use outlet_events[alias].add(dataset, extra=...)")
        self._extra = _Extra(self._save_extra)
        self._extra.update(value)

    def add(self, dataset: Any, extra: dict[str, Any] | None = None) -> None:
        """Add an event of `dataset` (a Dataset or Asset) to this alias."""
        if self._alias is None:
            raise ValueError("add() is for an alias: outlet_events[DatasetAlias(name)].add(dataset)")
        self._write({"outlet": getattr(dataset, "key", str(dataset)), "alias": self._alias, "extra": extra or {}})

    def _write(self, item: dict[str, Any]) -> None:
        from ledger.sdk import try_outputs

        if self._path is not None:
            try_outputs.note(item, self._path)


# every variable TaskContext.env() may set (the optional ones only when they apply)
TRY_ENV_KEYS = ("AIRFLOW_CTX_DAG_ID", "AIRFLOW_CTX_TASK_ID", "AIRFLOW_CTX_EXECUTION_DATE", "AIRFLOW_CTX_LOGICAL_DATE",
                "AIRFLOW_CTX_TRY_NUMBER", "AIRFLOW_CTX_DAG_RUN_ID",
                "LEDGER_DAG_ID", "LEDGER_TASK_ID", "LEDGER_RUN_ID", "LEDGER_LOGICAL_DATE", "LEDGER_DATA_INTERVAL_START",
                "LEDGER_DATA_INTERVAL_END", "LEDGER_TRY_NUMBER", "LEDGER_DAG_VERSION", "LEDGER_RUN_TYPE",
                "LEDGER_MAP_INDEX", "LEDGER_WRITES_PATH", "LEDGER_CODE_DIR", "LEDGER_SIGNAL_KEY",
                "LEDGER_SIGNAL_VALUE", "LEDGER_SIGNAL_VERSION")


@contextlib.contextmanager
def environment(context: TaskContext | None, environ: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """While the block runs, `environ` (os.environ) holds the try's LEDGER_* variables (context.env()) and none
    of the others of TRY_ENV_KEYS (a variable that does not apply to this try is not inherited); after it, each
    is as it was. A try's process runs its task inside it: a Python callable reads os.environ["LEDGER_RUN_ID"],
    a Bash command $LEDGER_RUN_ID, a Spark task the same; a worker process that runs several tries in turn
    (Spark, LEDGER_REUSE_WORKERS) gets its environment back between them. None: nothing changes."""
    target = os.environ if environ is None else environ
    if context is None:
        yield
        return
    saved: dict[str, str | None] = {}
    set_environment(context, target, saved)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value


def set_environment(context: TaskContext, environ: MutableMapping[str, str] | None = None,
                    saved: dict[str, str | None] | None = None) -> None:
    """`environ` (os.environ) holds the try's LEDGER_* variables and none of the others of TRY_ENV_KEYS, for
    good: a forked try's process, which exits after its try, has nothing to put back. `saved` gets what each
    variable it changed was (None: unset), for `environment` to put back. A variable that already holds its value is
    not written again (a LocalExecutor worker sets them before each fork: most stay the same from try to try)."""
    target = os.environ if environ is None else environ
    wanted = context.env()
    for key in TRY_ENV_KEYS:
        if key not in wanted and key in target:
            value = target.pop(key)
            if saved is not None:
                saved[key] = value
    for key, value in wanted.items():
        was = target.get(key)
        if saved is not None:
            saved[key] = was
        if was != value:
            target[key] = value


def _pick(value: Any, map_indexes: Any) -> Any:
    """A mapped task's value (the list of its instances' values) narrowed to `map_indexes`: one index gives that
    instance's value (None past the end), a list of indexes the list of theirs; None leaves it whole."""
    if map_indexes is None or not isinstance(value, list):
        return value
    if isinstance(map_indexes, int):
        return value[map_indexes] if 0 <= map_indexes < len(value) else None
    return [value[i] if 0 <= i < len(value) else None for i in map_indexes]
