"""The files a try leaves beside its log: its worker says which it left, and the job opens only those."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.runtime import try_files
from scheduler.runtime.try_files import RENDERED, WRITES, XCOM
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_queue_ahead import drain_until_finished
from tests.scheduler.test_task_runner import work_item


def leave_files(log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    (log.parent / (log.name + XCOM)).write_text(json.dumps({"key": "rows", "value": 3}) + "\nnot json\n")
    (log.parent / (log.name + RENDERED)).write_text(json.dumps({"bash_command": "echo 2026-11-25"}))
    (log.parent / (log.name + WRITES)).write_text(json.dumps({"dataset": "sales", "partition": "2026-11-25"}) + "\n")


def test_every_file_is_read_when_nobody_said_which_a_try_left(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    leave_files(log)
    left = try_files.read(str(log))
    assert left.pushed == [("rows", 3)]
    assert left.rendered == {"bash_command": "echo 2026-11-25"}
    assert left.writes == [{"dataset": "sales", "partition": "2026-11-25"}]
    assert try_files.present(str(log)) == (XCOM, RENDERED, WRITES)


def test_only_the_files_the_worker_saw_are_read(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    leave_files(log)
    assert try_files.read(str(log), (XCOM,)) == try_files.TryFiles(pushed=[("rows", 3)])
    assert try_files.read(str(log), ()) is try_files.NOTHING


def test_a_try_that_left_nothing_has_nothing_to_read(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    assert try_files.present(str(log)) == ()
    assert try_files.read(str(log)) == try_files.NOTHING


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_a_worker_says_which_files_each_try_left(make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = make(kind, 2)
    returns, noop = work_item(dag_file, "returns", ti_id=1), work_item(dag_file, "noop", ti_id=2)
    executor.submit(returns)
    executor.submit(noop)
    seen = drain_until_finished(executor, {1, 2})  # type: ignore[arg-type]
    ended = {ti: events[-1] for ti, events in seen.items()}
    assert ended[1].state == "success" and XCOM in (ended[1].files or ())
    assert ended[1].files == try_files.present(returns.log_path)
    assert ended[2].state == "success" and ended[2].files == ()
    assert try_files.read(returns.log_path, ended[1].files).pushed
