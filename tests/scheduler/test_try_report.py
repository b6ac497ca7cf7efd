"""A try's report is built by the try's own process from what its code made (kept in its memory, no file beside its
log), the moment its code has ended, and it is what every executor hands the job: picklable for the local worker's
pipe, JSON for Celery's result, versioned."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from ledger.scheduler.runtime import try_report
from ledger.scheduler.runtime.try_report import REPORT, WRITES, ReportFile, ReportRefused, TryReport, build, left_behind
from ledger.sdk import try_outputs
from ledger.sdk.context import TaskContext
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_queue_ahead import drain_until_finished
from tests.scheduler.test_task_runner import work_item


def a_try_that_made_things(log: Path) -> None:
    """A try of this process whose code passed a value on, rendered a template, wrote a partition and gave its
    outlet's event an extra; a process it started (a Bash command) noted a write through LEDGER_WRITES_PATH."""
    log.parent.mkdir(parents=True, exist_ok=True)
    try_outputs.begin(str(log) + WRITES)
    context = TaskContext("d", "t", "run_1", *([None] * 3), 1, "v", "scheduled", log_path=str(log))  # type: ignore[arg-type]
    context.xcom_push("rows", 3)
    try_outputs.rendered({"bash_command": "echo 2026-11-25"})
    context.record_write("sales", "2026-11-25")
    context.outlet_events["sales"].extra = {"rows": 3}
    (log.parent / (log.name + WRITES)).write_text(json.dumps({"dataset": "costs", "partition": "2026-11-25"}) + "\n")


def test_the_report_holds_what_the_try_made_and_nothing_is_left_beside_its_log(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    a_try_that_made_things(log)
    report = build("success", None, 1.5, str(log))
    assert report.pushed == (("rows", 3),)
    assert report.rendered == {"bash_command": "echo 2026-11-25"}
    assert [(w["dataset"], w["partition"]) for w in report.writes] == [("sales", "2026-11-25"), ("costs", "2026-11-25")]
    assert report.outlets == ({"outlet": "sales", "extra": {"rows": 3}},)
    assert (report.state, report.at, report.log_path) == ("success", 1.5, str(log))
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # (the log itself was never written here)
    assert try_outputs.current() is None  # taken: the next try starts with nothing


def test_a_try_that_made_nothing_reports_only_how_it_ended(tmp_path: Path) -> None:
    try_outputs.begin(None)
    report = build("failed", "exit code 1", 2.0, str(tmp_path / "try_1.log"))
    assert report == TryReport("failed", "exit code 1", 2.0, str(tmp_path / "try_1.log"))
    assert not report.left_anything


def test_a_report_file_is_read_once_and_a_try_that_left_none_leaves_nothing_behind(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    a_try_that_made_things(log)
    made = build("success", None, 1.5, str(log))
    ReportFile(str(log)).leave(made)
    assert ReportFile(str(log)).take() == made and ReportFile(str(log)).take() is None
    (tmp_path / ("try_1.log" + WRITES)).write_text("{}\n")
    (tmp_path / ("try_1.log" + REPORT)).write_text("{}")
    assert left_behind(str(log), "lost", "killed", 2.0).left_anything is False
    assert list(tmp_path.iterdir()) == []


def test_a_report_survives_the_pipe_and_the_json_of_celerys_result(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    a_try_that_made_things(log)
    report = build("success", None, 1.5, str(log), host="worker-a").with_log("hello\n")
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
    assert not Path(returns.log_path + REPORT).exists()  # the worker took it: the job opens no file
    assert ended[2].report is not None and not ended[2].report.left_anything


def test_a_celery_result_whose_report_this_release_cannot_read_is_a_lost_try_that_says_why() -> None:
    from ledger.scheduler.executors.celery import _report_in

    sent = {"state": "success", "at": 3.0, "host": "w1", "report": {"version": 2, "state": "success"}}
    report = _report_in(sent)
    assert report is not None and report.state == "lost" and report.host == "w1"
    assert "report was refused: a try report of version 2; this release reads version 1" in (report.reason or "")
    kept = left_behind("", "success", None, 3.0, host="w1")
    assert _report_in({"report": kept.as_json()}) == kept and _report_in({"state": "success"}) is None


def test_a_durable_report_is_there_for_every_process_of_the_host_while_the_disk_still_takes_it(tmp_path: Path) -> None:
    """The outbox file is renamed into place before it is fsynced: a worker killed while a busy disk takes the fsync
    leaves the report to its guard and its next incarnation (the soak's run 8). The test holds the fsync itself."""
    import os
    import time

    from ledger.scheduler.runtime.try_report import write_whole

    held_read, held_write = os.pipe()
    path = tmp_path / "outbox" / "ledger-1-1.json"
    pid = os.fork()
    if pid == 0:  # the try's process: its fsyncs wait until the test lets them go
        os.close(held_write)
        os.fsync = lambda fd: os.read(held_read, 1) and None  # type: ignore[assignment]
        write_whole(str(path), b'{"state": "success"}', durable=True)
        os._exit(0)
    os.close(held_read)
    try:
        deadline = time.monotonic() + 30
        while not path.exists():  # (the writer blocks in its first fsync meanwhile)
            assert time.monotonic() < deadline, "the report did not appear while its fsync was held"
            time.sleep(0.01)
        assert path.read_bytes() == b'{"state": "success"}'
    finally:
        os.write(held_write, b"xx")
        os.close(held_write)
        assert os.waitpid(pid, 0)[1] == 0


@pytest.mark.parametrize("kind", ["local", "sequential"])
def test_a_dead_jobs_try_is_adopted_by_a_local_executor_only_if_it_left_its_whole_report(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    """Decision 0298: the next job finds the report a try left as its code ended (its process died with its job
    afterwards) and records the try by it, once; a try that left none, or only the beginning of one, is lost."""
    executor = make(kind, 1)
    ended, unended, torn = (work_item(dag_file, "returns", ti_id=i, try_number=i) for i in (1, 2, 3))
    Path(ended.log_path).parent.mkdir(parents=True, exist_ok=True)
    ReportFile(ended.log_path).leave(TryReport("success", None, 5.0, ended.log_path, pushed=(("return_value", 7),)))
    Path(torn.log_path + REPORT).write_text('{"version": 1, "sta')  # (a host that crashed in its write)
    found = executor.find([(ended, True), (unended, True), (torn, False)])
    assert set(found) == {1}
    assert Path(ended.log_path + REPORT).exists() and not Path(ended.log_path).exists()  # looking changes nothing
    assert executor.in_flight() == set()
    executor.follow(found)  # (the job adopted it)
    assert executor.in_flight() == {1}
    (event,) = executor.drain()
    assert (event.ti_id, event.try_number, event.kind, event.state, event.at) == (1, 1, "finished", "success", 5.0)
    assert event.report is not None and event.report.pushed == (("return_value", 7),)
    assert executor.in_flight() == set() and executor.drain() == []
    assert not Path(ended.log_path + REPORT).exists()  # taken: a later job does not record it again
    assert executor.find([(ended, True)]) == {}
    assert Path(ended.log_path).read_text().endswith(
        "outcome: success, as the report it left when its code ended says (its worker or job died before it exited)\n")


@pytest.mark.parametrize("report", [
    TryReport("success", None, 1795995395.6266797, "/home/ledger/logs/d/7/t/try_1.log"),
    TryReport("skipped", None, 0.0, ""),
    TryReport("failed", None, 1e20, "/logs/a b/try_2.log"),
])
def test_a_report_of_nothing_but_its_end_is_the_text_json_writes_and_needs_no_json_module(
        report: TryReport, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = json.dumps(report.as_json()).encode()

    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("the json module was used")

    monkeypatch.setattr(try_report.json, "dumps", refuse)
    assert try_report.dumps(report) == expected


@pytest.mark.parametrize("report", [
    TryReport("success", None, 1.0, '/logs/"quoted"/try_1.log'),
    TryReport("success", None, 1.0, "/logs/\u00e9t\u00e9/try_1.log"),
    TryReport("success", None, 1.0, "/logs/back\\slash/try_1.log"),
    TryReport("failed", "exit code 1", 1.0, "/logs/try_1.log"),
    TryReport("success", None, 1.0, "/logs/try_1.log", pushed=(("return_value", 7),)),
    TryReport("success", None, float("nan"), "/logs/try_1.log"),
])
def test_any_other_report_is_written_by_the_json_module(report: TryReport) -> None:
    assert try_report.dumps(report) == json.dumps(report.as_json()).encode()


@pytest.mark.parametrize("report", [
    TryReport("success", None, 1795995395.6266797, "/home/ledger/logs/d/7/t/try_1.log"),
    TryReport("skipped", None, 0.0, "/logs/try_1.log"),
    TryReport("failed", None, 1e20, "/logs/a b/try_2.log"),
])
def test_a_report_file_of_nothing_but_its_end_is_taken_back_without_the_json_module(
        report: TryReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "try_1.log"
    report = TryReport(report.state, None, report.at, str(log))
    ReportFile(str(log)).leave(report)
    text = (tmp_path / ("try_1.log" + REPORT)).read_text()
    assert TryReport.from_json(json.loads(text)) == report

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the json module was used")

    monkeypatch.setattr(try_report.json, "loads", refuse)
    assert ReportFile(str(log)).take() == report
    assert not (tmp_path / ("try_1.log" + REPORT)).exists()


@pytest.mark.parametrize("report", [
    TryReport("success", None, 1.0, '/logs/"quoted"/try_1.log'),
    TryReport("success", None, 1.0, "/logs/\u00e9t\u00e9/try_1.log"),
    TryReport("failed", "exit code 1", 1.0, "/logs/try_1.log"),
    TryReport("success", None, 1.0, "/logs/try_1.log", pushed=(("return_value", 7),)),
    TryReport("success", None, 2.5, "/logs/another_try.log"),  # (its text names another log than the file's)
])
def test_any_other_report_file_is_taken_back_as_json_reads_it(report: TryReport, tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    (tmp_path / ("try_1.log" + REPORT)).write_bytes(try_report.dumps(report))
    assert try_report.from_bare(try_report.dumps(report).decode(), str(log)) is None
    assert ReportFile(str(log)).take() == report


@pytest.mark.parametrize("at", ["1_0", "nan", "NaN", " 1.0", "1.0e", "01.5"])
def test_a_text_that_only_looks_like_a_bare_report_is_read_as_json_reads_it(at: str, tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    text = try_report.dumps(TryReport("success", None, 1.5, str(log))).decode().replace("1.5", at)
    (tmp_path / ("try_1.log" + REPORT)).write_text(text)
    assert try_report.from_bare(text, str(log)) is None
    try:
        expected: TryReport | None = TryReport.from_json(json.loads(text))
    except ValueError:
        expected = None
    taken = ReportFile(str(log)).take()
    assert repr(taken) == repr(expected)  # (repr: NaN is not equal to itself)
