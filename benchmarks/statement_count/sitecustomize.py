"""Counts the SQL statements of a `ledger scheduler` process, for `scheduler_throughput --statements`.

Python imports this module at start-up when its folder is first on PYTHONPATH (the benchmark puts it there for the
scheduler it starts, and only then). In the process whose command is `ledger scheduler`, every statement SQLite runs
on a connection the process opens through SQLAlchemy is counted by `sqlite3`'s trace callback, installed as each
connection is made (SQLAlchemy's `connect` event): the ORM's, ledger's Hot statements on the DB-API cursor and the
driver's own `BEGIN`/`COMMIT` alike, whatever the tree's code (a tree from before Hot or before its `observe` is
counted the same way as today's). At exit the count is written to $BENCH_STATEMENTS_OUT/<pid>. Other processes
(the workers, the tries, the DAG file processors) are left alone. SQLite only: the benchmark runs on the default.
"""

from __future__ import annotations

import atexit
import os
import sys
from typing import Any

_folder = os.environ.get("BENCH_STATEMENTS_OUT")
if _folder and "scheduler" in sys.argv[1:3]:
    _count = [0]

    def _one(_statement: str) -> None:
        _count[0] += 1

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _trace(dbapi_connection: Any, _record: Any) -> None:
        if hasattr(dbapi_connection, "set_trace_callback"):  # (sqlite3; not psycopg)
            dbapi_connection.set_trace_callback(_one)

    def _write() -> None:
        with open(os.path.join(_folder, str(os.getpid())), "w", encoding="utf-8") as out:
            out.write(str(_count[0]))

    atexit.register(_write)
