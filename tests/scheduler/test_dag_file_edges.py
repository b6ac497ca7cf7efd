"""DAG files that used to take the parse down with them: a file name that is not UTF-8 is an import error of
that file alone, and what a file prints while it is imported goes to the DAG processor log."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.infra.clock import FixedClock
from ledger.models import ImportError_
from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager, parse_file, processor_log
from ledger.scheduler.parsing.dag_sync import known_hashes, sync_results
from ledger.scheduler.runtime.dagbag import load_file, shown_path

GOOD = textwrap.dedent("""\
    import pendulum
    from ledger import DAG, BashTask
    with DAG("good", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
        BashTask("a", "echo a")
    """)

PRINTS = textwrap.dedent("""\
    import os, sys
    import pendulum
    from ledger import DAG, BashTask
    print("to stdout from a DAG file")
    print("to stderr from a DAG file", file=sys.stderr)
    os.system("echo from a subprocess of a DAG file")
    with DAG("chatty", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
        BashTask("a", "echo a")
    """)


def latin1_file(folder: Path, source: str = GOOD) -> str:
    """A DAG file named `café.py` in Latin-1 (the byte 0xe9): not UTF-8. Returns its path as os.listdir gives it."""
    path = os.path.join(os.fsencode(folder), b"caf\xe9.py")
    with open(path, "wb") as f:
        f.write(source.replace('"good"', '"latin"').encode())
    return os.fsdecode(path)


def test_a_name_that_is_not_utf8_is_shown_with_backslash_escapes() -> None:
    assert shown_path(os.fsdecode(b"/dags/caf\xe9.py")) == "/dags/caf\\xe9.py"
    assert shown_path("/dags/café.py") == "/dags/café.py"


def test_loading_or_parsing_a_file_whose_name_is_not_utf8_is_an_error_naming_it_readably(dags: Path) -> None:
    path = latin1_file(dags)
    loaded = load_file(path, str(dags))
    assert loaded.dags == [] and loaded.fileloc == f"{dags}/caf\\xe9.py"
    assert loaded.error == f"{dags}/caf\\xe9.py: the file name is not valid UTF-8, so ledger cannot record it; " \
                           "rename the file"
    parsed = parse_file(path, str(dags))
    assert (parsed.fileloc, parsed.error, parsed.dags) == (loaded.fileloc, loaded.error, [])
    assert parsed.content_hash  # its content is followed: a rename or an edit is seen


def test_the_manager_stores_the_bad_name_as_an_import_error_and_parses_every_other_file(
        dags: Path, managers: Callable[..., DagFileProcessorManager], session: Any, clock: FixedClock) -> None:
    latin1_file(dags)
    (dags / "good.py").write_text(GOOD)
    manager = managers(dags, parsing_processes=1)
    results = {r.fileloc: r for r in manager.parse_all(timeout=60)}
    shown = f"{dags}/caf\\xe9.py"
    assert set(results) == {shown, str(dags / "good.py")}
    assert [d.dag_id for d in results[str(dags / "good.py")].dags] == ["good"]
    assert results[shown].error is not None and "not valid UTF-8" in results[shown].error
    report = sync_results(session, results.values(), now=clock.now(), actor="test")
    assert report.errors == [shown] and report.registered == ["good"]
    assert [e.fileloc for e in session.query(ImportError_)] == [shown]
    # the next listing finds it under the same name: not parsed again until it changes
    manager.seed(known_hashes(session))
    assert manager.poll() == [] and not manager.busy()


def test_a_helper_file_whose_name_is_not_utf8_fails_the_dag_importing_its_folder_readably(dags: Path) -> None:
    (dags / "common").mkdir()
    (dags / "common" / "__init__.py").write_text("X = 1\n")
    with open(os.path.join(os.fsencode(dags), b"common", b"r\xe9gion.json"), "wb") as f:
        f.write(b"{}")
    (dags / "uses.py").write_text("import common\n" + GOOD)
    result = parse_file(str(dags / "uses.py"), str(dags))
    assert result.error is not None and "common/r\\xe9gion.json" in result.error and "rename it" in result.error
    assert "\n" not in result.error


def test_what_a_dag_file_prints_goes_to_the_processor_log_never_to_the_managers_output(
        dags: Path, managers: Callable[..., DagFileProcessorManager], tmp_path: Path,
        capfd: pytest.CaptureFixture[str]) -> None:
    (dags / "chatty.py").write_text(PRINTS)
    (dags / "good.py").write_text(GOOD)
    log = processor_log(tmp_path / "logs")
    results = managers(dags, log_file=log, parsing_processes=1).parse_all(timeout=60)
    assert sorted(d.dag_id for r in results for d in r.dags) == ["chatty", "good"]
    sys.stdout.flush()
    out, err = capfd.readouterr()
    assert "DAG file" not in out + err
    text = log.read_text()
    entries = text.split("[ledger] ")
    assert len(entries) == 2, text  # one entry, for the file that printed
    head, *lines = entries[1].splitlines()
    assert head.endswith("):") and f"output while importing {dags / 'chatty.py'} (pid " in head
    assert sorted(lines) == ["from a subprocess of a DAG file", "to stderr from a DAG file",
                             "to stdout from a DAG file"]


def test_without_a_log_what_dag_files_print_is_dropped(
        dags: Path, managers: Callable[..., DagFileProcessorManager], capfd: pytest.CaptureFixture[str]) -> None:
    (dags / "chatty.py").write_text(PRINTS)
    assert [r.error for r in managers(dags, parsing_processes=1).parse_all(timeout=60)] == [None]
    out, err = capfd.readouterr()
    assert "DAG file" not in out + err



def test_what_a_dag_file_prints_when_a_worker_imports_it_for_a_try_goes_to_that_try_never_to_the_workers_output(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A worker imports the version's DAG file before it forks the try; the worker's fd 1 and 2 are the scheduler's
    log, so what the import writes there too (os.write, a child process) is kept for the try's log instead."""
    from ledger.scheduler.runtime import try_plan
    from tests.scheduler.test_task_runner import work_item

    try_plan.clear_cache()
    dag_file = tmp_path / "chatty.py"
    dag_file.write_text(PRINTS.replace('os.system(', 'os.write(1, b"to fd 1 from a DAG file\\n"); os.system('))
    plan = try_plan.make_plan(work_item(dag_file, "a", dag_id="chatty"), capture=True)
    try_plan.clear_cache()
    assert plan.error is None, plan.error
    sys.stdout.flush()
    out, err = capfd.readouterr()
    assert "DAG file" not in out + err
    assert plan.output.splitlines() == ["to stdout from a DAG file", "to stderr from a DAG file",
                                        "to fd 1 from a DAG file", "from a subprocess of a DAG file"]
