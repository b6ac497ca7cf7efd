"""Counts the SQL statements of a `ledger scheduler` process, for `scheduler_throughput --statements`.

Python imports this module at start-up when its folder is first on PYTHONPATH (the benchmark puts it there for the
scheduler it starts, and only then). In the process whose command is `ledger scheduler`, every statement SQLAlchemy
sends to a cursor (its `before_cursor_execute` event) and every statement ledger's Hot runs on the DB-API cursor
(ledger/store/hot.py's `observe`) is counted; at exit the count is written to $BENCH_STATEMENTS_OUT/<pid>. Other
processes (the workers, the tries, the DAG file processors) are left alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import Any

_folder = os.environ.get("BENCH_STATEMENTS_OUT")
if _folder and "scheduler" in sys.argv[1:3]:
    _count = [0]

    def _one(*_args: Any) -> None:
        _count[0] += 1

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _one)
    _kept = contextlib.ExitStack()  # observed for the life of the process
    try:
        from ledger.store import hot
    except ImportError:  # (a tree from before Hot: SQLAlchemy runs every statement)
        pass
    else:
        _kept.enter_context(hot.observe(_one))

    def _write() -> None:
        with open(os.path.join(_folder, str(os.getpid())), "w", encoding="utf-8") as out:
            out.write(str(_count[0]))

    atexit.register(_write)
