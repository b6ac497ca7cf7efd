"""The scheduler loop's hottest statements, run on SQLite straight on the DB-API cursor.

SQLAlchemy spends about 20-50 microseconds of Python per executed statement (execution context, parameter
processing, result set-up, events) against about 10 for sqlite3 itself. The scheduler runs ten or so small
statements per loop, so that overhead was a fifth of its CPU per task instance (docs/benchmarks.md). A `Hot`
statement is a Core statement that SQLAlchemy compiles once per parameter shape; each call then binds the
parameters with the same bind processors SQLAlchemy would use (UTC datetimes, JSON) and runs the SQL on the
session's DB-API connection, inside the session's transaction.

The fast path is taken only on SQLite, and only while nothing listens to the engine's statement events
(`before_cursor_execute`: tests and tools that count or log statements then see every one; this is looked
at once per transaction, at its first Hot statement, so a listener added in the middle of a transaction
counts from the next one). Otherwise, and
on PostgreSQL (where the server round trip dominates and the connection may need invalidating after a
fault), the statement goes through SQLAlchemy as usual. A driver error is raised as SQLAlchemy's wrapped
error (OperationalError, IntegrityError, ...), so that callers tell transient faults the same way.

Rows come back as plain tuples without result processing: a Hot SELECT or RETURNING must return only
integers and strings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.expression import Executable

from ledger.models.base import UtcDateTime

_REQUIRED = object()  # the default of a parameter that each row must give


@dataclass(frozen=True, slots=True)
class _Form:
    """The SQL for one shape of parameters, and how to build its values from a parameter row."""

    sql: str
    bind: Callable[[Mapping[str, Any]], tuple[Any, ...]]  # a parameter row -> the values, in position order


class Hot:
    """A Core statement run on the DB-API cursor on SQLite (see the module's docstring)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._forms: dict[tuple[Any, ...], _Form | None] = {}  # None: a shape SQLAlchemy must run (_compile)
        self._dml = isinstance(statement, (Insert, Update))
        self._lists: tuple[str, ...] | None = None  # the names of its IN-list parameters, once compiled

    def run(self, session: Session, rows: Sequence[Mapping[str, Any]]) -> int:
        """Execute once per row (executemany); the number of rows it changed, over all parameter rows (what a
        guarded state write compares with the rows it meant to change)."""
        if not rows:
            return 0
        conn, cursor = _connection(session)
        form = self._form(conn, rows[0]) if cursor is not None else None
        if form is None or cursor is None:
            return int(conn.execute(self.statement, list(rows)).rowcount)
        values = [form.bind(row) for row in rows]
        try:
            if len(values) == 1:
                cursor.execute(form.sql, values[0])
            else:
                cursor.executemany(form.sql, values)
        except conn.dialect.loaded_dbapi.Error as exc:
            raise _wrapped(form, values, exc, conn, cursor) from exc
        return int(cursor.rowcount)

    def rows(self, session: Session, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Execute once with `params`; the rows it returns, as tuples (integers and strings only)."""
        return self.rows_of_each(session, [params or {}])

    def rows_of_each(self, session: Session, params: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        """Execute once per parameter row; every row returned, as tuples (integers and strings only). Through
        SQLAlchemy, that is one call (an INSERT .. RETURNING of several rows is batched)."""
        if not params:
            return []
        conn, cursor = _connection(session)
        forms = [self._form(conn, row) for row in params] if cursor is not None else [None]
        if cursor is None or any(form is None for form in forms):
            many = len(params) > 1
            return [tuple(row) for row in conn.execute(self.statement, list(params) if many else dict(params[0]))]
        out: list[tuple[Any, ...]] = []
        for form, row in zip(forms, params, strict=True):
            assert form is not None
            values = form.bind(row)
            try:
                cursor.execute(form.sql, values)
                out.extend(cursor.fetchall())
            except conn.dialect.loaded_dbapi.Error as exc:
                raise _wrapped(form, [values], exc, conn, cursor) from exc
        return out

    def _form(self, conn: Connection, row: Mapping[str, Any]) -> _Form | None:
        """The compiled form for the shape of `row` (None: SQLAlchemy runs it): which columns an INSERT or UPDATE
        names, how long each list bound to an IN is, rounded up to a power of two (the list is padded with its
        last item, which changes nothing in IN or NOT IN) so that a long-lived job compiles a handful of forms,
        not one per length. A list longer than LONGEST_LIST goes through SQLAlchemy."""
        if self._lists is None:
            binds = self.statement.compile(dialect=conn.dialect).binds  # type: ignore[attr-defined]
            self._lists = tuple(sorted({b.key for b in binds.values() if b.expanding and b.required}))
        columns = tuple(row) if self._dml else ()
        lengths = tuple(_padded(len(row[name])) for name in self._lists)
        key = (columns, lengths)
        if key in self._forms:
            return self._forms[key]
        if any(n > LONGEST_LIST for n in lengths):
            return None
        form = self._forms[key] = _compile(self.statement, conn, columns, dict(zip(self._lists, lengths,
                                                                                     strict=True)))
        return form


LONGEST_LIST = 1024


def _padded(n: int) -> int:
    return 0 if n == 0 else 1 << (n - 1).bit_length()


def _item(values: Sequence[Any], index: int) -> Any:
    """Item `index` of an IN list padded to its form's length with its last item."""
    return values[index] if index < len(values) else values[-1]


def _compile(statement: Executable, conn: Connection, columns: tuple[str, ...],
             lengths: dict[str, int]) -> _Form | None:
    """The form for one shape; None for what binding from the row alone would get wrong, which SQLAlchemy then
    runs: Python-side column defaults or onupdate values (prefetched), callable or literal-execute parameters."""
    dialect = conn.dialect
    compiled = statement.compile(dialect=dialect, column_keys=list(columns) or None)  # type: ignore[attr-defined]
    binds = compiled.binds
    if getattr(compiled, "insert_prefetch", None) or getattr(compiled, "update_prefetch", None) \
            or any(b.callable is not None or b.literal_execute for b in binds.values()):
        return None
    if not any(b.expanding for b in binds.values()):
        sql, names = compiled.string, list(compiled.positiontup or [])
        where = {name: (name, -1) for name in names}
    else:  # IN lists: expanded for these lengths (SQLAlchemy's own expansion, with placeholder values)
        sample: dict[str, Any] = {b.key: None for b in binds.values() if b.required}
        sample.update((name, [None] * n) for name, n in lengths.items())
        state = compiled.construct_expanded_state(sample)
        sql, names = state.statement, list(state.positiontup or [])
        where = {name: (name, -1) for name in names}
        for original, expanded in state.parameter_expansion.items():
            for i, name in enumerate(expanded):
                where[name] = (original, i)
    positions = []
    for name in names:
        original, index = where[name]
        bind = binds[original]
        default = _REQUIRED if bind.required else None if original in lengths else bind.effective_value
        processor = _sqlite_utc if dialect.name == "sqlite" and isinstance(bind.type, UtcDateTime) \
            else bind.type.dialect_impl(dialect).bind_processor(dialect)
        positions.append((original, index, default, processor))
    return _Form(sql, _binder(positions))


def _binder(positions: list[tuple[str, int, Any, Callable[[Any], Any] | None]]
            ) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function that builds a row's values in one expression (the loop over positions in Python cost more than
    the statement): `row[name]` for a required parameter (a missing one raises KeyError), `row.get(name, default)`
    otherwise, an IN list's item by index, each through its bind processor."""
    names: dict[str, Any] = {}
    parts = []
    for i, (name, index, default, processor) in enumerate(positions):
        if default is _REQUIRED:
            value = f"row[{name!r}]"
        else:
            names[f"d{i}"] = default
            value = f"row.get({name!r}, d{i})"
        if index >= 0:
            names["item"] = _item
            value = f"item({value}, {index})"
        if processor is not None:
            names[f"p{i}"] = processor
            value = f"p{i}({value})"
        parts.append(value)
    return eval(f"lambda row: ({''.join(part + ', ' for part in parts)})", names)  # type: ignore[no-any-return]


def _sqlite_utc(value: datetime | None) -> str | None:
    """UtcDateTime's bind processing on SQLite in one step: UTC, as SQLAlchemy's SQLite DATETIME text (see the
    test that compares the two)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r} cannot be stored; timestamps must be aware")
    if value.tzinfo is not UTC and value.utcoffset():  # (a zero offset in another tzinfo: already UTC)
        value = value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]  # without its "+00:00"


_CONNECTION = "ledger.hot"  # session.info: (the session's Connection, a DB-API cursor on it or None)


def _connection(session: Session) -> tuple[Connection, Any | None]:
    """The Connection of the session's transaction, and a DB-API cursor on it (None where statements go through
    SQLAlchemy); pending ORM changes are flushed first, as the ORM would before a statement."""
    session.flush()
    found = session.info.get(_CONNECTION)
    if found is not None and not found[0].closed:  # (a Connection ends with its transaction: never reused)
        return found  # type: ignore[no-any-return]
    conn = session.connection()
    cursor = None
    # asked once per transaction: a listener added to the engine in the middle of one applies from the next
    if conn.dialect.name == "sqlite" and not conn.dispatch.before_cursor_execute:
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor()
    session.info[_CONNECTION] = (conn, cursor)
    return conn, cursor


def _wrapped(form: _Form, values: list[tuple[Any, ...]], exc: Exception, conn: Connection,
             cursor: Any) -> BaseException:
    """The driver's error as SQLAlchemy raises it (OperationalError, IntegrityError, ...), marked as a lost
    connection where the dialect says it is one."""
    lost = conn.dialect.is_disconnect(exc, conn.connection.dbapi_connection, cursor)  # type: ignore[arg-type]
    return DBAPIError.instance(form.sql, values if len(values) > 1 else values[0], exc,
                               conn.dialect.loaded_dbapi.Error, dialect=conn.dialect, ismulti=len(values) > 1,
                               connection_invalidated=lost)
