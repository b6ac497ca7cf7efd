"""`ledger` starts at once: the top-level command lists every command without importing it, and a command's
module (and the heavy libraries behind it) loads only when that command runs. Checked by what a fresh
interpreter has imported, not by timing (benchmarks/cli_startup.py times it)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import typer

from ledger.cli.app import COMMANDS
from tests.conftest import Cli

HEAVY = ("sqlalchemy", "alembic", "pyspark", "celery", "fastapi", "pendulum", "ledger.sdk", "ledger.store")


def modules_after(*argv: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """The modules a fresh interpreter has imported after running `ledger ARGV` (exit status ignored), in `env`
    (default: this process's environment)."""
    code = ("import sys, json\nfrom ledger.cli.app import run\nsys.argv = ['ledger', *json.loads(sys.argv[1])]\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True,
                          check=True, env=env)
    head, _, listed = done.stderr.rpartition("\nMODULES ")
    return set(json.loads(listed)), done.stdout + head


def test_help_lists_every_command_without_importing_one() -> None:
    loaded, out = modules_after("--help")
    for name, _, _ in COMMANDS:
        assert f" {name} " in out
    assert not {m for m in loaded if m.startswith("ledger.cli.") and m != "ledger.cli.app"}
    assert not {m for m in loaded for heavy in HEAVY if m == heavy or m.startswith(heavy + ".")}


def test_version_loads_nothing_of_the_ledger_but_its_errors() -> None:
    loaded, out = modules_after("version")
    assert out.strip().startswith("ledger ")
    assert not {m for m in loaded for heavy in HEAVY if m == heavy or m.startswith(heavy + ".")}


def test_help_and_version_load_neither_rich_nor_pydantic() -> None:
    """Typer renders help with rich (and a Markdown parser) and builds any command's parameters with pydantic:
    the list of commands and `ledger version` need neither (decision 0297)."""
    for argv in (("--help",), ("version",)):
        loaded, _ = modules_after(*argv)
        assert not {m for m in loaded if m.split(".")[0] in ("rich", "pydantic", "markdown_it")}, argv


def test_runs_show_on_a_sqlite_ledger_reads_through_the_tables_without_the_orm(ready_cli: Cli) -> None:
    """`ledger runs show N` reads a run through SQLAlchemy Core and the tables of ledger/models/tables.py: not
    SQLAlchemy's ORM nor any mapped class, nor pendulum (it reads no clock and parses no date) (decision 0317),
    nor SQLAlchemy's PostgreSQL dialect (the tables get PostgreSQL's options when a PostgreSQL engine is made), nor
    the authoring API and its templates (jinja2) (decision 0307). Its output is the same either way (tests/web
    compare it with the web's, which reads through a Session)."""
    ready_cli.write_dag("d.py", """
        import pendulum
        from ledger import DAG, BashTask

        with DAG("d", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
            BashTask("t", bash_command="true")
    """)
    ready_cli.ok("trigger", "d", "--logical-date", "2024-03-01")
    for argv in (("runs", "show", "1"), ("runs", "show", "1", "--json")):
        loaded, out = modules_after(*argv, env=ready_cli.env)
        assert out.startswith("run 1 of d" if len(argv) == 3 else "{"), out
        assert {"sqlalchemy", "ledger.models.tables", "ledger.store.run_reads"} <= loaded
        unwanted = ("sqlalchemy.orm", "sqlalchemy.dialects.postgresql", "jinja2", "ledger.sdk", "pendulum",
                    "ledger.services.documents", "ledger.store.runs")
        assert not {m for m in loaded for name in unwanted if m == name or m.startswith(name + ".")}, argv
        assert not {m for m in loaded if m.startswith("ledger.models.") and m != "ledger.models.tables"}, argv
        assert ("rich.table" in loaded) == (len(argv) == 3), argv  # the tables of the text output only


def test_a_missing_run_is_one_line_without_the_orm(ready_cli: Cli) -> None:
    """The Core read refuses a run that does not exist as the ORM's did: one line, exit status 1."""
    done = subprocess.run([sys.executable, "-c", "from ledger.cli.app import run; run()", "runs", "show", "7"],
                          capture_output=True, text=True, check=False, env=ready_cli.env)
    assert done.returncode == 1
    assert done.stderr.strip() == "Error: no DAG run '7'; run `ledger timeline DAG` to see a DAG's runs"
    loaded, _ = modules_after("runs", "show", "7", env=ready_cli.env)
    assert "sqlalchemy.orm" not in loaded


def test_help_and_version_do_not_load_importlib_abc() -> None:
    """The finder for the module paths from before the folders (ledger/infra/moved_modules.py) is a plain class:
    importlib.abc would load importlib.resources, zipfile and tempfile into every `ledger` process (decision 0307)."""
    for argv in (("--help",), ("version",)):
        loaded, _ = modules_after(*argv)
        assert "importlib.abc" not in loaded, argv


def test_a_command_loads_only_its_own_module() -> None:
    loaded, _ = modules_after("db", "--help")
    assert "ledger.cli.db" in loaded
    assert not {f"ledger.cli.{name}" for name in ("scheduler", "webserver", "worker", "backfill", "dags")} & loaded


def test_each_listed_line_is_the_first_paragraph_of_the_commands_own_help() -> None:
    from ledger.cli.app import app

    real = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert sorted(name for name, _, _ in COMMANDS) == sorted(real)
    for name, _, line in COMMANDS:
        first = inspect.cleandoc(real[name].help or "").split("\n\n")[0]
        assert " ".join(first.split()) == line, name


def test_an_unknown_command_is_one_usage_line() -> None:
    done = subprocess.run([sys.executable, "-c", "from ledger.cli.app import run; run()", "nope"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == "Error: ledger: No such command 'nope'. (see `ledger --help`)"
