"""The scheduler loop's hottest statements, run on SQLite straight on the DB-API cursor.

SQLAlchemy spends about 20-50 microseconds of Python per executed statement (execution context, parameter
processing, result set-up, events) against about 10 for sqlite3 itself. The scheduler runs ten or so small
statements per loop, so that overhead was a fifth of its CPU per task instance (docs/benchmarks.md). A `Hot`
statement is a Core statement that SQLAlchemy compiles once per parameter shape (which keys a row gives, how
long its IN lists are); each call then binds the row's values with SQLAlchemy's own bind processors (UTC
datetimes, JSON) and runs the SQL on the session's DB-API connection, inside the session's transaction.

Only SQLAlchemy's documented API is used: `ClauseElement.compile`, `SQLCompiler.construct_expanded_state` and
its `ExpandedState` (the final SQL, the order of its parameters, their values), the compiler's documented
attributes, `TypeEngine.bind_processor`, `Dialect.is_disconnect` and `dbapi_exception_translation_map`.

On SQLite the fast path is the only path, tests included: statements run on the cursor do not reach the
engine's `before_cursor_execute` listeners, so Hot reports each one to its own observers instead
(`observe`); a test that counts statements listens to both (tests/statements.py). On PostgreSQL (where the
server round trip dominates and the connection may need invalidating after a fault) the statement goes
through SQLAlchemy as usual, and on SQLite so does a shape Hot cannot bind from the row alone: a column
default or onupdate computed in Python, a literal-execute parameter, an IN list longer than LONGEST_LIST.
A driver error is raised as SQLAlchemy's wrapped error (OperationalError, IntegrityError, ...), so that
callers tell transient faults the same way.

A parameter a row does not give takes the value its `bindparam` was built with, read once per shape (a
`bindparam(callable_=...)` would be called once, not per execution: no Hot statement uses one). A parameter
with no value that the first row leaves out is refused by SQLAlchemy (InvalidRequestError) before anything
runs; the rows of one call give the same keys. Rows come back as plain tuples without result processing: a
Hot SELECT or RETURNING must return only integers and strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert, Update
from sqlalchemy.sql.expression import Executable

from ledger.models.base import UtcDateTime

Observer = Callable[[Connection, str, Any, bool], None]
"""Told of each statement Hot runs on the cursor: (connection, SQL, parameters, executemany), as SQLAlchemy's
`before_cursor_execute` is told (without the cursor and execution context)."""

_OBSERVERS: list[Observer] = []


@contextmanager
def observe(observer: Observer) -> Iterator[None]:
    """Tell `observer` of every statement Hot runs on a DB-API cursor, in this process, inside the block."""
    _OBSERVERS.append(observer)
    try:
        yield
    finally:
        _OBSERVERS.remove(observer)


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
        many = len(values) > 1
        if _OBSERVERS:
            _report(conn, form.sql, values if many else values[0], many)
        try:
            if many:
                cursor.executemany(form.sql, values)
            else:
                cursor.execute(form.sql, values[0])
        except conn.dialect.loaded_dbapi.Error as error:
            raise _wrapped(form, values, error, conn, cursor) from error
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
            if _OBSERVERS:
                _report(conn, form.sql, values, False)
            try:
                cursor.execute(form.sql, values)
                out.extend(cursor.fetchall())
            except conn.dialect.loaded_dbapi.Error as error:
                raise _wrapped(form, [values], error, conn, cursor) from error
        return out

    def _form(self, conn: Connection, row: Mapping[str, Any]) -> _Form | None:
        """The compiled form for the shape of `row` (None: SQLAlchemy runs it): the keys it gives (for an INSERT
        or UPDATE, the columns it names) and how long each list it binds to an IN is, rounded up to a power of
        two (the list is padded with its last item, which changes nothing in IN or NOT IN) so that a
        long-lived job compiles a handful of forms, not one per length."""
        if self._lists is None:
            compiled: Any = self.statement.compile(dialect=conn.dialect)  # type: ignore[attr-defined]
            self._lists = tuple(sorted({bind.key for bind in compiled.post_compile_params}))
        keys = tuple(row)
        lengths = tuple(_padded(len(row[name])) for name in self._lists if name in row)
        shape = (keys, lengths)
        if shape in self._forms:
            return self._forms[shape]
        if any(n > LONGEST_LIST for n in lengths):
            form = None
        else:
            sample: dict[str, Any] = dict.fromkeys(keys)  # placeholders: only the shape matters
            sample.update((name, [None] * n) for name, n in zip([name for name in self._lists if name in row],
                                                                lengths, strict=True))
            form = _compile(self.statement, conn, keys if self._dml else (), sample)
        self._forms[shape] = form
        return form


LONGEST_LIST = 1024


def _padded(n: int) -> int:
    return 0 if n == 0 else 1 << (n - 1).bit_length()


def _compile(statement: Executable, conn: Connection, columns: tuple[str, ...], sample: dict[str, Any]
             ) -> _Form | None:
    """The form for one shape (`sample`: the row's keys, IN lists of their padded lengths); None for what
    binding from the row alone would get wrong, which SQLAlchemy then runs: Python-side column defaults or
    onupdate values (prefetched) and literal-execute parameters."""
    dialect = conn.dialect
    compiled: Any = statement.compile(dialect=dialect, column_keys=list(columns) or None)  # type: ignore[attr-defined]
    if compiled.insert_prefetch or compiled.update_prefetch or compiled.literal_execute_params:
        return None
    state = compiled.construct_expanded_state(sample)  # SQLAlchemy's own expansion; refuses a missing parameter
    origin = {name: (original, i) for original, expanded in state.parameter_expansion.items()
              for i, name in enumerate(expanded)}
    plan: list[tuple[int, str, int, Callable[[Any], Any] | None]] = []  # (position, row key, list index, processor)
    template: list[Any] = []  # the values of the parameters the row does not give, processed once
    for position, name in enumerate(state.positiontup or ()):
        original, index = origin.get(name, (name, -1))
        kind = compiled.binds[original].type
        processor = _sqlite_utc if dialect.name == "sqlite" and isinstance(kind, UtcDateTime) \
            else kind.dialect_impl(dialect).bind_processor(dialect)
        if original in sample:
            plan.append((position, original, index, processor))
            template.append(None)
        else:
            value = state.parameters[name]
            template.append(value if processor is None else processor(value))
    return _Form(state.statement, _binder(template, plan))


def _binder(template: list[Any], plan: list[tuple[int, str, int, Callable[[Any], Any] | None]]
            ) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function from a row to its values in position order: the template, with each planned position set to
    the row's value (an IN list's item, its last one past its end), through its bind processor. A missing key
    raises KeyError. Positions are sorted by what they need, so the loops do no per-item tests."""
    plain = tuple((position, key) for position, key, index, processor in plan if index < 0 and processor is None)
    if len(plain) == len(template) > 1:  # every value is the row's own: C does it all
        return itemgetter(*(key for _position, key in plain))
    processed = tuple((position, key, processor) for position, key, index, processor in plan
                      if index < 0 and processor is not None)
    items = tuple((position, key, index, processor) for position, key, index, processor in plan if index >= 0)

    def bind(row: Mapping[str, Any]) -> tuple[Any, ...]:
        values = template.copy()
        for position, key in plain:
            values[position] = row[key]
        for position, key, processor in processed:
            values[position] = processor(row[key])
        for position, key, index, item_processor in items:
            given = row[key]
            value = given[index] if index < len(given) else given[-1]
            values[position] = value if item_processor is None else item_processor(value)
        return tuple(values)

    return bind


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


def _report(conn: Connection, sql: str, parameters: Any, many: bool) -> None:
    for observer in list(_OBSERVERS):
        observer(conn, sql, parameters, many)


_CONNECTION = "ledger.hot"  # session.info: (the session's Connection, a DB-API cursor on it or None)


def _connection(session: Session) -> tuple[Connection, Any | None]:
    """The Connection of the session's transaction, and a DB-API cursor on it (None on PostgreSQL, where
    statements go through SQLAlchemy); pending ORM changes are flushed first, as the ORM would before a
    statement."""
    session.flush()
    found = session.info.get(_CONNECTION)
    if found is not None and not found[0].closed:  # (a Connection ends with its transaction: never reused)
        return found  # type: ignore[no-any-return]
    conn = session.connection()
    cursor = None
    if conn.dialect.name == "sqlite":
        raw = conn.connection.dbapi_connection
        assert raw is not None
        cursor = raw.cursor()
    session.info[_CONNECTION] = (conn, cursor)
    return conn, cursor


def _wrapped(form: _Form, values: list[tuple[Any, ...]], error: Exception, conn: Connection,
             cursor: Any) -> exc.DBAPIError:
    """The driver's error as SQLAlchemy raises it: the sqlalchemy.exc class named as the PEP 249 class it is
    (OperationalError, IntegrityError, ...; through the dialect's translation map), marked as a lost connection
    where the dialect says it is one."""
    dialect = conn.dialect
    kind: type[exc.DBAPIError] = exc.DBAPIError
    for cls in type(error).__mro__:
        found = getattr(exc, dialect.dbapi_exception_translation_map.get(cls.__name__, cls.__name__), None)
        if isinstance(found, type) and issubclass(found, exc.DBAPIError):
            kind = found
            break
    lost = dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)  # type: ignore[arg-type]
    return kind(form.sql, values if len(values) > 1 else values[0], error, connection_invalidated=lost,
                ismulti=len(values) > 1)
