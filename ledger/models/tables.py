"""The schema: every table of the ledger database as a SQLAlchemy Core Table, without the ORM.

The mapped classes (one module per table, ledger/models/*.py) map these tables; a command that only reads, such
as `ledger runs show`, selects from them through SQLAlchemy Core and never loads the ORM or maps a class
(decision 0317). A column is declared here once; its class names it again only as a typed attribute.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)


class UtcDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out; stored as UTC on every backend."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} cannot be stored; timestamps must be aware")
        value = value.astimezone(UTC)
        if dialect.name == "sqlite":
            return datetime(
                value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond
            )
        return value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)  # type: ignore[no-any-return]
        return value.astimezone(UTC)  # type: ignore[no-any-return]


LIVE = "state != 'overridden'"
# one *live* run per (dag, date); overridden runs may share the date. PostgreSQL's WHERE is added by
# `with_postgresql_options` when a PostgreSQL engine is made: naming it here would load SQLAlchemy's postgresql
# dialect (to check the option) in every process that imports the models, a SQLite ledger's commands included.
LIVE_DATE = Index("uq_dag_run_live_date", "dag_id", "logical_date", unique=True, sqlite_where=text(LIVE))


def with_postgresql_options() -> None:
    """The tables' PostgreSQL-only options, added once a PostgreSQL engine is made (SQLAlchemy's documented
    writable `dialect_kwargs`; setting it again is a no-op)."""
    LIVE_DATE.dialect_kwargs["postgresql_where"] = text(LIVE)


backfill = Table(  # ledger.models.backfill.Backfill
    "backfill", metadata,
    Column("id", Integer, primary_key=True),
    Column("dag_id", String(250), index=True, nullable=False),
    Column("range_start", UtcDateTime, nullable=False),
    Column("range_end", UtcDateTime, nullable=False),
    Column("reprocess", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("requested_by", String(250), nullable=False),
    Column("backwards", Boolean, default=False, nullable=False),
    Column("submit_only", Boolean, default=False, nullable=False),
    Column("max_active_runs", Integer),
    Column("conf", JSON),
    Column("downstream", Boolean, default=False, nullable=False),  # its rewrites re-run the consumer runs
    Column("created_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
)


callback = Table(  # ledger.models.callback.Callback
    "callback", metadata,
    Column("id", Integer, primary_key=True),
    Column("kind", String(32), nullable=False),  # task_failure, task_success, task_retry, run_failure, ...
    Column("dag_id", String(250), nullable=False),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("task_id", String(250)),
    Column("try_number", Integer),
    Column("dag_version", String(64), nullable=False),
    Column("position", Integer, nullable=False),  # which of the callables given for this kind
    Column("target", String(500), nullable=False),  # what is called, as the version records it
    Column("state", String(16), nullable=False),  # pending, running, ok, error, timeout, lost
    Column("context", JSON, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    Column("job_id", Integer),
    Column("message", Text),
    Index("ix_callback_state", "state"), Index("ix_callback_run_id", "run_id"),
)


code_blob = Table(  # ledger.models.code.CodeBlob
    "code_blob", metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),  # bytes before compression
    Column("data", LargeBinary, nullable=False),
)


code_bundle = Table(  # ledger.models.code.CodeBundle
    "code_bundle", metadata,
    Column("bundle_hash", String(64), primary_key=True),
    Column("manifest", Text, nullable=False),
)


dag = Table(  # ledger.models.dag.Dag
    "dag", metadata,
    Column("dag_id", String(250), primary_key=True),
    Column("fileloc", Text, nullable=False),
    Column("current_version", String(64)),
    Column("schedule", String(250), default="None", nullable=False),
    Column("timezone", String(64), default="UTC", nullable=False),
    Column("is_paused", Boolean, default=False, nullable=False),
    # paused with --stop-queued: its queued runs do not start either (until unpaused)
    Column("hold_queued", Boolean, default=False, server_default=false(), nullable=False),
    Column("is_active", Boolean, default=True, nullable=False),
    Column("last_parsed_at", UtcDateTime),
)


dag_file = Table(  # ledger.models.dag_file.DagFile
    "dag_file", metadata,
    Column("fileloc", Text, primary_key=True),
    Column("content_hash", Text, nullable=False),
    Column("last_parsed_at", UtcDateTime, nullable=False),
    # the other files of the DAGs folder it imported (JSON list of paths): a change to one re-parses it
    Column("depends_on", JSON(none_as_null=True), nullable=True),
)


dag_run = Table(  # ledger.models.dag_run.DagRun
    "dag_run", metadata,
    Column("id", Integer, primary_key=True),
    Column("dag_id", String(250), nullable=False),
    Column("logical_date", UtcDateTime, nullable=False),
    Column("data_interval_start", UtcDateTime, nullable=False),
    Column("data_interval_end", UtcDateTime, nullable=False),
    Column("run_type", String(16), nullable=False),
    Column("state", String(16), nullable=False),
    Column("previous_run_id", Integer, ForeignKey("dag_run.id")),
    Column("overridden_by", Integer, ForeignKey("dag_run.id")),
    Column("version_hash", String(64), nullable=False),
    Column("schedule", String(250), default="None", nullable=False),
    Column("backfill_id", Integer, ForeignKey("backfill.id")),
    Column("lock_holder", Integer),
    Column("conf", JSON),
    Column("deadline_missed_at", UtcDateTime),  # when its DAG's deadline passed
    Column("created_at", UtcDateTime, nullable=False),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    Column("overridden_at", UtcDateTime),
    LIVE_DATE,
    Index("ix_dag_run_dag_id_logical_date", "dag_id", "logical_date"),
    Index("ix_dag_run_state", "state"),
    Index("ix_dag_run_backfill_id", "backfill_id"),
)


dag_version = Table(  # ledger.models.dag_version.DagVersion
    "dag_version", metadata,
    Column("id", Integer, primary_key=True),
    Column("dag_id", String(250), ForeignKey("dag.dag_id"), index=True, nullable=False),
    Column("version_hash", String(64), nullable=False),
    Column("structure", Text, nullable=False),
    # the DAG file's text when this version was registered (None for DAGs not loaded from a file)
    Column("source_code", Text, nullable=True),
    # the version's code (ledger/infra/code.py): the DAG file's path in the DAGs folder and its blob, the bundle of
    # the helper modules it imports, and the key of the whole snapshot. All None for versions registered
    # before code was captured: those run from `source_code` alone.
    Column("code_entry", Text, nullable=True),
    Column("code_entry_sha256", String(64), nullable=True),
    Column("code_bundle", String(64), nullable=True),
    Column("code_snapshot", String(64), nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    UniqueConstraint("dag_id", "version_hash"),
)


dataset_event = Table(  # ledger.models.dataset.DatasetEvent
    "dataset_event", metadata,
    Column("id", Integer, primary_key=True),
    Column("dataset", String(500), nullable=False),
    Column("partition", String(100)),
    Column("alias", String(500)),
    Column("extra", JSON),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("dag_id", String(250), nullable=False),
    Column("task_id", String(250), nullable=False),
    Column("try_number", Integer, nullable=False),
    Column("downstream", Boolean, default=False, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_dataset_event_dataset_partition", "dataset", "partition"),
    Index("ix_dataset_event_dataset_id", "dataset", "id"),  # a dataset's newest first, no sort
    Index("ix_dataset_event_run_id", "run_id"),
)


dataset_consumed = Table(  # ledger.models.dataset.DatasetConsumed
    "dataset_consumed", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("dag_id", String(250), index=True, nullable=False),
    Column("event_id", Integer, ForeignKey("dataset_event.id"), nullable=False),
    Column("cause", Boolean, default=False, nullable=False),
    Index("ix_dataset_consumed_run_id", "run_id"), Index("ix_dataset_consumed_event_id", "event_id"),
)


dataset_tally = Table(  # ledger.models.dataset.DatasetTally
    "dataset_tally", metadata,
    Column("dataset", String(500), primary_key=True),
    Column("source", String(10), primary_key=True),
    Column("rows", Integer, nullable=False),
    Column("partitions", Integer, nullable=False),
    Column("newest_id", Integer, nullable=False),
)


database_identity = Table(  # one row, made by migration 0015; read by ledger/store/identity.py (no mapped class)
    "database_identity", metadata,
    Column("identity", String(32), primary_key=True),  # random: in the task ids of this database's tries
    Column("legacy_through", Integer, nullable=False),  # task instances up to this id keep the task ids of before
)


event = Table(  # ledger.models.event.Event
    "event", metadata,
    Column("id", Integer, primary_key=True),
    Column("at", UtcDateTime, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("actor", String(250), nullable=False),
    Column("dag_id", String(250)),
    Column("run_id", Integer),
    Column("details", JSON, nullable=False),
    Column("seq", Integer),
    Column("prev_hash", String(64)),
    Column("covers", JSON, nullable=True),
    Column("hash", String(64)),
    Index("ix_event_dag_id", "dag_id"), Index("ix_event_run_id", "run_id"),
)


event_chain = Table(  # ledger.models.event.EventChain
    "event_chain", metadata,
    Column("chain", String(250), primary_key=True),
    Column("head_id", Integer),
    Column("head_hash", String(64), nullable=False),
    Column("length", Integer, nullable=False),
)


import_error = Table(  # ledger.models.import_error.ImportError_
    "import_error", metadata,
    Column("id", Integer, primary_key=True),
    Column("fileloc", Text, unique=True, nullable=False),
    Column("error", Text, nullable=False),
    Column("at", UtcDateTime, nullable=False),
)


job = Table(  # ledger.models.job.Job
    "job", metadata,
    Column("id", Integer, primary_key=True),
    Column("job_type", String(30), nullable=False),
    Column("state", String(16), nullable=False),
    Column("hostname", String(250), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", UtcDateTime, nullable=False),
    Column("latest_heartbeat", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
)


lineage_write = Table(  # ledger.models.lineage.LineageWrite
    "lineage_write", metadata,
    Column("id", Integer, primary_key=True),
    Column("dataset", String(500), nullable=False),
    Column("partition", String(500), nullable=False),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("dag_id", String(250), nullable=False),
    Column("task_id", String(250), nullable=False),
    Column("try_number", Integer, nullable=False),
    Column("dag_version", String(64), nullable=False),
    Column("try_state", String(20), nullable=False),
    Column("rows", Integer),
    Column("path", Text),
    Column("written_at", UtcDateTime, nullable=False),
    Column("recorded_at", UtcDateTime, nullable=False),
    Index("ix_lineage_write_dataset_partition", "dataset", "partition"),
    Index("ix_lineage_write_dataset_id", "dataset", "id"),  # a dataset's newest first, no sort
    Index("ix_lineage_write_run_id", "run_id"),
)


pool = Table(  # ledger.models.pool.Pool
    "pool", metadata,
    Column("name", String(250), primary_key=True),
    Column("slots", Integer, nullable=False),
    Column("description", Text, default="", nullable=False),
)


variable = Table(  # ledger.models.secret.Variable
    "variable", metadata,
    Column("key", String(250), primary_key=True),
    Column("value_encrypted", Text, nullable=False),
    Column("description", Text, default="", nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)


connection = Table(  # ledger.models.secret.Connection
    "connection", metadata,
    Column("conn_id", String(250), primary_key=True),
    Column("conn_type", String(100), nullable=False),
    Column("host", String(500)),
    Column("port", Integer),
    Column("login", String(500)),
    Column("schema", String(500)),
    Column("password_encrypted", Text),
    Column("extra_encrypted", Text),
    Column("description", Text, default="", nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)


signal = Table(  # ledger.models.signal.SignalRecord
    "signal", metadata,
    Column("id", Integer, primary_key=True),
    Column("key", String(200), nullable=False),
    Column("version", Integer, nullable=False),
    Column("value", Text, nullable=False),
    Column("sender", String(250), nullable=False),
    Column("sent_at", UtcDateTime, nullable=False),
    Column("meta", JSON(none_as_null=True), nullable=True),
    # the unique constraint's index (key, version) serves every lookup by key and version range
    UniqueConstraint("key", "version"),
)


signal_key = Table(  # ledger.models.signal.SignalKey
    "signal_key", metadata,
    Column("key", String(200), primary_key=True),
    Column("version", Integer, nullable=False),
)


signal_cursor = Table(  # ledger.models.signal.SignalCursor
    "signal_cursor", metadata,
    Column("listener", String(250), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)


task_instance = Table(  # ledger.models.task_instance.TaskInstance
    "task_instance", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("dag_id", String(250), nullable=False),
    Column("task_id", String(250), nullable=False),
    # a mapped task's instance number (0..N-1; ledger/core/mapping.py); -1: not mapped, or not expanded yet
    Column("map_index", Integer, default=-1, server_default=text("-1"), nullable=False),
    Column("state", String(20), nullable=False),
    Column("try_number", Integer, default=0, nullable=False),
    Column("max_tries", Integer, default=0, nullable=False),
    Column("priority_weight", Integer, default=1, nullable=False),
    Column("pool", String(250), default="default_pool", nullable=False),
    # the slots of its pool it takes while queued or running (Airflow's pool_slots; decision 0364)
    Column("pool_slots", Integer, default=1, server_default=text("1"), nullable=False),
    Column("queued_at", UtcDateTime),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    Column("next_try_at", UtcDateTime),
    Column("job_id", Integer),
    Column("pid", Integer),
    Column("hostname", String(250)),
    # signal-driven tasks (ledger/core/signal_rules.py): a START/RESTART arrived and it may start
    Column("signal_armed", Boolean, default=False, server_default=false(), nullable=False),
    # a STOP or RESTART for its running try, for the job that runs it; and the signal that asked
    Column("signal_request", String(10)),
    Column("signal_id", Integer),
    # the DAG version its next tries run when it is not its run's: a partial clear on the latest version (decision
    # 0271) leaves the run on its version and gives this task instance the latest; None: its run's version
    Column("dag_version", String(64), nullable=True),
    UniqueConstraint("run_id", "task_id", "map_index"),
    Index("ix_task_instance_state", "state"),
    Index("ix_task_instance_signal_request", "signal_request"),
)


task_try = Table(  # ledger.models.task_instance.TaskTry
    "task_try", metadata,
    Column("id", Integer, primary_key=True),
    Column("task_instance_id", Integer, ForeignKey("task_instance.id"), nullable=False),
    Column("try_number", Integer, nullable=False),
    Column("state", String(20), nullable=False),
    Column("job_id", Integer),
    Column("pid", Integer),
    Column("hostname", String(250)),
    Column("started_at", UtcDateTime),
    Column("ended_at", UtcDateTime),
    # the DAG version whose code this try ran (its run's version when it was queued)
    Column("dag_version", String(64), nullable=True),
    # the try's templated fields as rendered (Jinja), by field name
    Column("rendered", JSON, nullable=True),
    UniqueConstraint("task_instance_id", "try_number"),
)


try_log = Table(  # ledger.models.try_log.TryLog
    "try_log", metadata,
    Column("task_instance_id", Integer, ForeignKey("task_instance.id"), primary_key=True),
    Column("try_number", Integer, primary_key=True),
    Column("host", String(250)),  # the worker that ran it
    Column("text", Text, nullable=False),
)


web_user = Table(  # ledger.models.user.WebUser
    "web_user", metadata,
    Column("id", Integer, primary_key=True),
    Column("username", String(100), unique=True, nullable=False),
    Column("password_hash", String(250), nullable=False),
    Column("role", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)


api_token = Table(  # ledger.models.user.ApiToken
    "api_token", metadata,
    Column("id", Integer, primary_key=True),
    Column("user_id", Integer, ForeignKey("web_user.id", ondelete="CASCADE"), index=True, nullable=False),
    Column("name", String(100), nullable=False),
    Column("token_sha256", String(64), unique=True, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)


ended_session = Table(  # a web session signed out before its cookie expired (ledger/store/users.py; no mapped class)
    "ended_session", metadata,
    Column("digest", String(64), primary_key=True),  # SHA-256 of the session cookie
    Column("expires_at", UtcDateTime, nullable=False, index=True),  # when the cookie would have expired anyway
)


xcom = Table(  # ledger.models.xcom.XCom
    "xcom", metadata,
    Column("id", Integer, primary_key=True),
    Column("run_id", Integer, ForeignKey("dag_run.id"), nullable=False),
    Column("task_id", String(250), nullable=False),
    Column("map_index", Integer, default=-1, server_default=text("-1"), nullable=False),  # -1: not mapped
    Column("try_number", Integer, nullable=False),
    Column("key", String(250), nullable=False),
    Column("value", JSON, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_xcom_run_id", "run_id"),
)
