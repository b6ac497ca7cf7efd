"""The SQL statements a piece of code runs, for tests that count them: those SQLAlchemy executes (its
`before_cursor_execute` event) and those Hot runs on the DB-API cursor (ledger/store/hot.py's `observe`), so
that the code under test runs as it does in production."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, event

from ledger.store import hot


@contextmanager
def statements_on(target: Engine | Connection) -> Iterator[list[str]]:
    """Inside the block, the list of statements run on `target` (an engine, or one connection), in order,
    whitespace collapsed."""
    seen: list[str] = []

    def sqlalchemys(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split()))

    def hots(conn: Connection, statement: str, _parameters: Any, _many: bool) -> None:
        if conn is target or conn.engine is target:
            seen.append(" ".join(statement.split()))

    event.listen(target, "before_cursor_execute", sqlalchemys)
    try:
        with hot.observe(hots):
            yield seen
    finally:
        event.remove(target, "before_cursor_execute", sqlalchemys)
