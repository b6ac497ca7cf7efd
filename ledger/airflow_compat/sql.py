"""Airflow's SQL providers in ledger's namespace: `airflow.providers.common.sql` (DbApiHook,
SQLExecuteQueryOperator, fetch_all_handler, fetch_one_handler), `airflow.providers.sqlite` (SqliteHook) and
`airflow.providers.postgres` (PostgresHook, through psycopg 3), and the providers' deprecated PostgresOperator and
SqliteOperator.

A hook reads its connection as Airflow does, by id: ledger's connections (`LEDGER_CONN_<ID>` or `ledger
connections`), then an `AIRFLOW_CONN_<ID>` variable (a URI), so a project's environment works unchanged. A SQLite
connection's host is the database file, as Airflow's SqliteHook reads it (as a URI, an absolute path:
`sqlite:////data/app.db`). The
operator picks its hook by the connection's type; a type ledger carries no hook for is refused in one line naming
the carried ones. What a query returns is passed on as lists (JSON has no tuples), as Airflow's serializer gives
them to the next task.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from typing import Any, ClassVar

from ledger.airflow_compat.connection_lookup import connection
from ledger.airflow_compat.graph import AirflowException
from ledger.airflow_compat.operators import BaseOperator
from ledger.sdk.connections import ConnectionInfo


def fetch_all_handler(cursor: Any) -> list[Any] | None:
    """Airflow's handler: every row of the statement's result (None for a statement without one)."""
    return list(cursor.fetchall()) if cursor.description is not None else None


def fetch_one_handler(cursor: Any) -> Any:
    """Airflow's handler: the first row of the statement's result (None for a statement without one)."""
    return cursor.fetchone() if cursor.description is not None else None


def split_sql(sql: str) -> list[str]:
    """The statements of a script, split at `;` outside quotes (what `split_statements=True` runs one by one)."""
    found: list[str] = []
    current: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in ("'", '"'):
            quote = ch
        elif ch == ";":
            found.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    found.append("".join(current).strip())
    return [s for s in found if s]


class DbApiHook:
    """Airflow's DbApiHook: subclass it with `get_conn()`; `conn_name_attr` names the constructor argument that
    gives the connection id (`sqlite_conn_id`, `postgres_conn_id`)."""

    conn_name_attr: ClassVar[str] = "conn_id"
    default_conn_name: ClassVar[str] = "default_conn_id"
    conn_type: ClassVar[str] = ""
    placeholder: ClassVar[str] = "%s"

    def __init__(self, *args: Any, schema: str | None = None, log_sql: bool = True, **kwargs: Any) -> None:
        given = args[0] if args else kwargs.get(self.conn_name_attr, kwargs.get("conn_id"))
        self.conn_id = str(given or self.default_conn_name)
        setattr(self, self.conn_name_attr, self.conn_id)
        self.schema = schema
        self.log_sql = log_sql

    def get_connection(self, conn_id: str) -> ConnectionInfo:
        return connection(conn_id)

    def get_conn(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define get_conn()")

    def run(self, sql: str | Iterable[str], autocommit: bool = False, parameters: Any = None,
            handler: Callable[[Any], Any] | None = None, split_statements: bool = False,
            return_last: bool = True) -> Any:
        """Run the statement(s) in one transaction (committed at the end, or after each with autocommit); with a
        handler, its result: for a string, of its (last) statement; for a list, one per statement (None for one
        that returns no rows)."""
        statements = (split_sql(sql) if split_statements else [sql]) if isinstance(sql, str) else list(sql)
        if not statements:
            raise ValueError("run() got no SQL statement")
        results = []
        with closing(self.get_conn()) as conn:
            for statement in statements:
                with closing(conn.cursor()) as cursor:
                    if self.log_sql:
                        print(f"Running statement: {statement}, parameters: {parameters}", flush=True)
                    cursor.execute(statement, parameters) if parameters is not None else cursor.execute(statement)
                    if handler is not None:
                        results.append(handler(cursor))
                if autocommit:
                    conn.commit()
            conn.commit()
        if handler is None:
            return None
        # one result for one string (the last statement's when it was split), as Airflow's; a list for a list
        return results[-1] if isinstance(sql, str) and (return_last or not split_statements) else results

    def get_records(self, sql: str, parameters: Any = None) -> Any:
        return self.run(sql, parameters=parameters, handler=fetch_all_handler)

    def get_first(self, sql: str, parameters: Any = None) -> Any:
        return self.run(sql, parameters=parameters, handler=fetch_one_handler)

    def insert_rows(self, table: str, rows: Iterable[Sequence[Any]], target_fields: Sequence[str] | None = None,
                    commit_every: int = 1000, replace: bool = False, **_: Any) -> None:
        """Insert `rows` into `table` (committed every `commit_every` rows and at the end)."""
        with closing(self.get_conn()) as conn, closing(conn.cursor()) as cursor:
            for i, row in enumerate(rows, 1):
                columns = f" ({', '.join(target_fields)})" if target_fields else ""
                marks = ", ".join([self.placeholder] * len(row))
                verb = "REPLACE INTO" if replace else "INSERT INTO"
                cursor.execute(f"{verb} {table}{columns} VALUES ({marks})", tuple(row))
                if commit_every and i % commit_every == 0:
                    conn.commit()
            conn.commit()


class SqliteHook(DbApiHook):
    """Airflow's SqliteHook: the connection's host is the database file."""

    conn_name_attr = "sqlite_conn_id"
    default_conn_name = "sqlite_default"
    conn_type = "sqlite"
    placeholder = "?"

    def get_conn(self) -> sqlite3.Connection:
        info = self.get_connection(self.conn_id)
        path = info.host or ("/" + info.schema if info.schema else "")  # a URI's path is absolute: sqlite:////x.db
        if not path:
            raise AirflowException(f"connection {self.conn_id!r} names no SQLite file (its host is the path)")
        return sqlite3.connect(path)


class PostgresHook(DbApiHook):
    """Airflow's PostgresHook, through psycopg 3 (`database=` or the connection's schema is the database)."""

    conn_name_attr = "postgres_conn_id"
    default_conn_name = "postgres_default"
    conn_type = "postgres"

    def __init__(self, *args: Any, database: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.database = database

    def get_conn(self) -> Any:
        import psycopg

        info = self.get_connection(self.conn_id)
        return psycopg.connect(host=info.host or "localhost", port=info.port or 5432, user=info.login,
                               password=info.password, dbname=self.database or self.schema or info.schema)


HOOKS: dict[str, type[DbApiHook]] = {"sqlite": SqliteHook, "postgres": PostgresHook, "postgresql": PostgresHook}


class SQLExecuteQueryOperator(BaseOperator):
    """Airflow's SQLExecuteQueryOperator: runs `sql` (a string, a `.sql` file beside the DAG file, or a list) on
    the connection `conn_id` with the hook of its type; what `handler` returns is passed on."""

    template_fields: ClassVar[tuple[str, ...]] = ("sql", "parameters", "conn_id")
    template_ext: ClassVar[Sequence[str]] = (".sql", ".json")

    def __init__(self, *, sql: str | list[str], conn_id: str | None = None, autocommit: bool = False,
                 parameters: Mapping[str, Any] | Sequence[Any] | None = None,
                 handler: Callable[[Any], Any] = fetch_all_handler, split_statements: bool | None = None,
                 return_last: bool = True, show_return_value_in_logs: bool = False, database: str | None = None,
                 hook_params: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sql, self.conn_id, self.autocommit, self.parameters = sql, conn_id, autocommit, parameters
        self.handler, self.split_statements, self.return_last = handler, split_statements, return_last
        self.database, self.hook_params = database, dict(hook_params or {})

    def get_db_hook(self) -> DbApiHook:
        if not self.conn_id:
            raise AirflowException(f"task {self.task_id!r}: SQLExecuteQueryOperator needs a conn_id")
        kind = connection(self.conn_id).conn_type or ""
        hook = HOOKS.get(kind)
        if hook is None:
            raise AirflowException(f"connection {self.conn_id!r} is of type {kind!r}, for which ledger carries no "
                                   f"SQL hook; it carries: {', '.join(sorted(set(HOOKS) - {'postgresql'}))}")
        extra = {"database": self.database} if self.database and hook is PostgresHook else {}
        return hook(self.conn_id, **{**extra, **self.hook_params})

    def execute(self, context: Mapping[str, Any]) -> Any:
        result = self.get_db_hook().run(self.sql, autocommit=self.autocommit, parameters=self.parameters,
                                        handler=self.handler if self.do_xcom_push else None,
                                        split_statements=bool(self.split_statements), return_last=self.return_last)
        return _lists(result)


class PostgresOperator(SQLExecuteQueryOperator):
    """The postgres provider's PostgresOperator (deprecated there for SQLExecuteQueryOperator): the same, with
    `postgres_conn_id`."""

    def __init__(self, *, sql: str | list[str], postgres_conn_id: str = "postgres_default",
                 database: str | None = None, **kwargs: Any) -> None:
        super().__init__(sql=sql, conn_id=postgres_conn_id, database=database, **kwargs)


class SqliteOperator(SQLExecuteQueryOperator):
    """The sqlite provider's SqliteOperator (deprecated there for SQLExecuteQueryOperator): the same, with
    `sqlite_conn_id`."""

    def __init__(self, *, sql: str | list[str], sqlite_conn_id: str = "sqlite_default", **kwargs: Any) -> None:
        super().__init__(sql=sql, conn_id=sqlite_conn_id, **kwargs)


def _lists(value: Any) -> Any:
    """Rows (tuples, psycopg's and sqlite3's) as lists, as they pass on."""
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value
