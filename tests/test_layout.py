"""The house rule "all SQL in `ledger/store`", checked by parsing the source: outside `ledger/store`,
`ledger/store/db.py` (engines, sessions, the SQLite/PostgreSQL session set-up), `ledger/models` (tables), the
migrations, the tests and the benchmarks, no module builds SQL statements or runs them on a session.

What counts as building or running SQL:
- importing `select`, `update`, `insert`, `delete`, `text` or `func` (or another piece of a statement: `and_`,
  `or_`, `bindparam`, `case`, `exists`...) from sqlalchemy or a sub-module such as `sqlalchemy.dialects.postgresql`,
  or reaching them as attributes of an imported `sqlalchemy`;
- calling `.execute(`, `.query(`, `.scalars(` or `.scalar(` on a session or a connection;
- calling `.get(`, `.add(`, `.add_all(`, `.delete(` or `.merge(` on a session (ORM loads and writes).

Opening and ending transactions (`session.begin()`, `.flush()`, `.close()`) is the caller's job and allowed.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Where SQL is allowed: the store, the engine/session set-up, the tables, the schema history, and code that
# only checks the rest.
ALLOWED = ("ledger/store/", "ledger/store/db.py", "ledger/models/", "migrations/", "tests/", "benchmarks/")
SKIPPED_DIRS = {".venv", ".git", "build", "dist", "node_modules", "__pycache__", "artifacts"}

SQL_BUILDERS = {"select", "update", "insert", "delete", "text", "func",
                "and_", "or_", "not_", "bindparam", "case", "exists", "literal", "literal_column", "cast", "union",
                "union_all", "tuple_"}
RUNS_SQL = {"execute", "query", "scalars", "scalar"}
SESSION_ORM = {"get", "add", "add_all", "delete", "merge"}

# Explicit exceptions, each (path, what is flagged) -> why it cannot move into ledger/store. None is needed
# today: even the doorbell's LISTEN on its raw psycopg connection is ledger.store.signals.listen.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _receiver(node: ast.expr) -> str:
    """A dotted name for a call's receiver (`session`, `env.session`, `session.connection()`), or '' when the
    receiver is not a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _receiver(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if isinstance(node, ast.Call):
        inner = _receiver(node.func)
        return f"{inner}()" if inner else ""
    return ""


def _is_session(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].removesuffix("()")
    return last in {"session", "s", "sess", "db_session"} or last.endswith("_session")


def _is_connection(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].removesuffix("()")
    return last in {"conn", "connection", "connect", "begin", "engine", "bind"} or last.endswith("_conn")


def sql_in(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place in `source` that builds SQL or runs it on a session or a connection."""
    return list(_sql_in(source))


@functools.cache  # two checks below read every module: each parsed once
def _sql_in(source: str) -> tuple[tuple[int, str], ...]:
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []
    sqlalchemy_aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
            found.extend((node.lineno, f"from {node.module} import {a.name}") for a in node.names
                         if a.name in SQL_BUILDERS)
        elif isinstance(node, ast.Import):
            sqlalchemy_aliases.update(a.asname or a.name for a in node.names if a.name.split(".")[0] == "sqlalchemy")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in sqlalchemy_aliases and node.attr in SQL_BUILDERS):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, receiver = node.func.attr, _receiver(node.func.value)
        if method in RUNS_SQL:
            if isinstance(node.func.value, ast.Call) and node.func.value.func is not None \
                    and isinstance(node.func.value.func, ast.Attribute) and node.func.value.func.attr in RUNS_SQL:
                continue  # `.scalar()` on the result of an `.execute(...)` already flagged
            if _is_session(receiver) or _is_connection(receiver):
                found.append((node.lineno, f"{receiver}.{method}"))
        elif method in SESSION_ORM and _is_session(receiver):
            found.append((node.lineno, f"{receiver}.{method}"))
    return tuple(sorted(found))


def checked_modules() -> list[Path]:
    modules = []
    for folder, dirs, files in os.walk(ROOT):  # not into the skipped folders (a virtualenv is thousands of files)
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".")]
        for name in files:
            path = Path(folder, name)
            if name.endswith(".py") and not name.startswith(".") \
                    and not path.relative_to(ROOT).as_posix().startswith(ALLOWED):
                modules.append(path)
    return sorted(modules)


def test_no_module_outside_the_store_builds_or_runs_sql() -> None:
    offences = []
    for path in checked_modules():
        rel = path.relative_to(ROOT).as_posix()
        for line, what in sql_in(path.read_text()):
            if (rel, what) not in EXCEPTIONS:
                offences.append(f"{rel}:{line}: {what}")
    assert not offences, "SQL outside ledger/store (move it into a ledger/store module):\n" + "\n".join(offences)


def test_every_exception_is_still_needed() -> None:
    used = {(path.relative_to(ROOT).as_posix(), what) for path in checked_modules()
            for _, what in sql_in(path.read_text())}
    assert set(EXCEPTIONS) <= used, f"exceptions no longer needed: {sorted(set(EXCEPTIONS) - used)}"


def test_the_layout_check_covers_the_packages() -> None:
    checked = {p.relative_to(ROOT).parts[0] for p in checked_modules()}
    assert {"ledger", "scheduler", "backfill", "cli"} <= checked


@pytest.mark.parametrize("source, expected", [
    pytest.param("from sqlalchemy import select, Engine\n", [(1, "from sqlalchemy import select")], id="import"),
    pytest.param("from sqlalchemy import and_\nfrom sqlalchemy.orm import Session\n",
                 [(1, "from sqlalchemy import and_")], id="statement-piece"),
    pytest.param("from sqlalchemy.dialects.postgresql import insert\n",
                 [(1, "from sqlalchemy.dialects.postgresql import insert")], id="dialect-import"),
    pytest.param("import sqlalchemy as sa\nq = sa.func.max(1)\n", [(2, "sa.func")], id="module-attribute"),
    pytest.param("def f(session):\n    return session.scalars(q)\n", [(2, "session.scalars")], id="scalars"),
    pytest.param("def f(session):\n    return session.connection().execute(q).scalar()\n",
                 [(2, "session.connection().execute")], id="connection-execute"),
    pytest.param("def f(env):\n    return env.session.get(Dag, 'x')\n", [(2, "env.session.get")], id="orm-get"),
    pytest.param("def f(session, row):\n    session.add(row)\n", [(2, "session.add")], id="orm-add"),
    pytest.param("def f(d, s):\n    return d.get('k'), s.flush(), set().add(1)\n", [], id="not-sql"),
    pytest.param("import select\nselect.select([], [], [], 1)\n", [], id="the-select-module"),
])
def test_the_check_finds_sql_and_only_sql(source: str, expected: list[tuple[int, str]]) -> None:
    assert sql_in(source) == expected
