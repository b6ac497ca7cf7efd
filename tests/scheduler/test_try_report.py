"""A try's report is built where it ran, from what the try left beside its log (then removed there), and it is
what every executor hands the job: picklable for the local worker's pipe, JSON for Celery's result, versioned."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from scheduler.runtime.try_report import RENDERED, SUFFIXES, WRITES, XCOM, ReportRefused, TryReport, collect
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_queue_ahead import drain_until_finished
from tests.scheduler.test_task_runner import work_item


def leave_files(log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    (log.parent / (log.name + XCOM)).write_text(json.dumps({"key": "rows", "value": 3}) + "\nnot json\n")
    (log.parent / (log.name + RENDERED)).write_text(json.dumps({"bash_command": "echo 2026-11-25"}))
    (log.parent / (log.name + WRITES)).write_text(json.dumps({"dataset": "sales", "partition": "2026-11-25"}) + "\n"
                                                  + json.dumps({"outlet": "sales", "extra": {"rows": 3}}) + "\n")


def test_the_report_holds_what_the_try_left_and_the_files_are_gone(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    leave_files(log)
    report = collect(str(log), "success", None, 1.5)
    assert report.pushed == (("rows", 3),)
    assert report.rendered == {"bash_command": "echo 2026-11-25"}
    assert report.writes == ({"dataset": "sales", "partition": "2026-11-25"},)
    assert report.outlets == ({"outlet": "sales", "extra": {"rows": 3}},)
    assert (report.state, report.at, report.log_path) == ("success", 1.5, str(log))
    assert not any(Path(str(log) + suffix).exists() for suffix in SUFFIXES)


def test_a_try_that_left_nothing_reports_only_how_it_ended(tmp_path: Path) -> None:
    report = collect(str(tmp_path / "try_1.log"), "failed", "exit code 1", 2.0)
    assert report == TryReport("failed", "exit code 1", 2.0, str(tmp_path / "try_1.log"))
    assert not report.left_anything


def test_a_report_survives_the_pipe_and_the_json_of_celerys_result(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    leave_files(log)
    report = collect(str(log), "success", None, 1.5, host="worker-a").with_log("hello\n")
    assert pickle.loads(pickle.dumps(report)) == report
    assert TryReport.from_json(json.loads(json.dumps(report.as_json()))) == report


@pytest.mark.parametrize("sent", [{"version": 99, "state": "success"}, {"state": "success"}, "success", None])
def test_a_report_of_another_version_is_refused_with_one_line(sent: object) -> None:
    with pytest.raises(ReportRefused, match="this release reads version 1"):
        TryReport.from_json(sent)


@pytest.mark.parametrize("kind", ["local", "local_reuse", "sequential"])
def test_every_local_executor_hands_back_the_report_built_by_its_worker(make: MakeExecutor, dag_file: Path,
                                                                         kind: str) -> None:
    executor = make(kind, 2 if kind != "sequential" else 1)
    returns, noop = work_item(dag_file, "returns", ti_id=1), work_item(dag_file, "noop", ti_id=2)
    executor.submit(returns)
    seen = drain_until_finished(executor, {1})  # type: ignore[arg-type]
    executor.submit(noop)
    seen.update(drain_until_finished(executor, {2}))  # type: ignore[arg-type]
    ended = {ti: events[-1] for ti, events in seen.items()}
    assert ended[1].state == "success" and ended[1].report is not None and ended[1].report.pushed
    assert ended[1].report.state == "success" and ended[1].report.log_path == returns.log_path
    assert not Path(returns.log_path + XCOM).exists()  # the worker removed it: the job opens no file
    assert ended[2].report is not None and not ended[2].report.left_anything


def test_a_celery_result_whose_report_this_release_cannot_read_is_a_lost_try_that_says_why() -> None:
    from scheduler.executors.celery import _report_in

    sent = {"state": "success", "at": 3.0, "host": "w1", "report": {"version": 2, "state": "success"}}
    report = _report_in(sent)
    assert report is not None and report.state == "lost" and report.host == "w1"
    assert "report was refused: a try report of version 2; this release reads version 1" in (report.reason or "")
    kept = collect("", "success", None, 3.0, host="w1")
    assert _report_in({"report": kept.as_json()}) == kept and _report_in({"state": "success"}) is None
