"""One try in a real forked child: what runs, what it sees, what it logs, how it ends."""

from __future__ import annotations

import ast
import os
import time
from datetime import timedelta
from pathlib import Path

import pendulum
import pytest

from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import try_outcome, try_plan, try_process, try_report

LOGICAL_DATE = pendulum.datetime(2024, 3, 10, tz="UTC")

DAG_SOURCE = '''
import os
import signal
import sys
import time

import pendulum

from ledger import DAG, BashTask, PythonTask
from ledger import SkipTask

TMP = @TMP@
with open(os.path.join(TMP, "imports.txt"), "a") as f:
    f.write("imported\\n")
print("hello from the module level")


def noop():
    pass


def hello():
    print("hello from python")
    print("and to stderr", file=sys.stderr)


def with_context(context):
    print("context", context.dag_id, context.task_id, context.run_id, context.try_number, context.run_type,
          context.dag_version, context.logical_date.isoformat(), context.data_interval_end.isoformat(),
          sorted(context.conf.items()), context.log_path)


def with_kwargs(a, b=0, **kwargs):
    print("kwargs", a, b, sorted(kwargs), kwargs["context"].task_id)


def boom():
    raise ValueError("boom")


def long_message():
    raise RuntimeError("first line\\nsecond line " + "x" * 1000)


def skip():
    raise SkipTask("nothing to do today")


def nap(seconds):
    time.sleep(seconds)


def exits():
    os._exit(3)


def kills_itself():
    os.kill(os.getpid(), signal.SIGKILL)


def exits_zero():
    sys.exit(0)


def exits_two():
    sys.exit(2)


def returns():
    return {"rows": 3}


COUNT = 0


def counter():
    global COUNT
    COUNT += 1
    print("count", COUNT)


def barrier(mine, other):
    open(os.path.join(TMP, mine), "w").close()
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(TMP, other)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{other} never appeared: the tries did not run at the same time")
        time.sleep(0.01)


with DAG("demo", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("noop", noop)
    PythonTask("hello", hello)
    PythonTask("with_context", with_context)
    PythonTask("with_kwargs", with_kwargs, op_args=[1], op_kwargs={"b": 2})
    PythonTask("boom", boom)
    PythonTask("long_message", long_message)
    PythonTask("skip", skip)
    PythonTask("nap", nap, op_args=[0.3])
    PythonTask("sleepy", nap, op_args=[60])
    PythonTask("exits", exits)
    PythonTask("kills_itself", kills_itself)
    PythonTask("exits_zero", exits_zero)
    PythonTask("exits_two", exits_two)
    PythonTask("returns", returns)
    PythonTask("counter", counter)
    PythonTask("barrier_a", barrier, op_args=["a.started", "b.started"])
    PythonTask("barrier_b", barrier, op_args=["b.started", "a.started"])
    BashTask("bash_ok", "echo hello from bash; echo oops >&2")
    BashTask("bash_fail", "echo failing; exit 1")
    BashTask("bash_skip", "echo nothing to do; exit 99")
    BashTask("bash_env", "env | grep -E '^(LEDGER_|EXTRA=)' | sort; echo cwd=$(pwd)",
             env={"EXTRA": "yes"}, cwd=TMP)
    BashTask("bash_sleep", 'sleep 60 & echo $! > "$PIDFILE"; wait', env={"PIDFILE": os.path.join(TMP, "sleep.pid")})
'''


def write_dag_file(folder: Path, source: str = DAG_SOURCE) -> Path:
    path = folder / "demo_dag.py"
    path.write_text(source.replace("@TMP@", repr(str(folder))))
    return path


def work_item(dag_file: Path, task_id: str, *, ti_id: int = 1, try_number: int = 1, timeout: float | None = None,
              conf: dict[str, object] | None = None, dag_id: str = "demo") -> WorkItem:
    logs = dag_file.parent / "logs"
    return WorkItem(
        ti_id=ti_id, run_id=7, dag_id=dag_id, task_id=task_id, try_number=try_number, fileloc=str(dag_file),
        logical_date=LOGICAL_DATE, data_interval_start=LOGICAL_DATE,
        data_interval_end=LOGICAL_DATE + timedelta(days=1), dag_version="v1abc", run_type="scheduled",
        log_path=str(logs / dag_id / "7" / task_id / f"try_{try_number}.log"), execution_timeout=timeout,
        conf=dict(conf or {}),
    )


def read_log(item: WorkItem) -> str:
    return Path(item.log_path).read_text()


def process_gone(pid: int, within: float = 5.0) -> bool:
    """True once the process no longer exists (or is a zombie nobody reaped yet)."""
    deadline = time.monotonic() + within
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def wait_for_file(path: Path, within: float = 10.0) -> str:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.01)
    raise AssertionError(f"{path} did not appear within {within} s")


def run_in_child(item: WorkItem, *, prepared: bool = False) -> try_process.RunningTry:
    if prepared:
        try_plan.prepare(item)
    running = try_process.fork_try(item)
    try_plan.forget_prepared()
    outcome = running.wait(timeout=30)
    assert outcome is not None, "the try did not end within 30 s"
    return running


@pytest.fixture
def dag_file(tmp_path: Path) -> Path:
    try_plan.clear_cache()
    return write_dag_file(tmp_path)


def outcome_of(item: WorkItem, *, prepared: bool = False) -> tuple[str, str | None]:
    running = run_in_child(item, prepared=prepared)
    assert running.outcome is not None
    return running.outcome.state, running.outcome.reason


def test_a_python_task_succeeds_and_its_output_goes_to_the_try_log_between_a_header_and_a_footer(
        dag_file: Path) -> None:
    item = work_item(dag_file, "hello")
    assert outcome_of(item) == ("success", None)
    lines = read_log(item).splitlines()
    assert lines[0].startswith("[ledger] ") and "try 1 of dag=demo run=7 task=hello" in lines[0]
    assert "hello from python" in lines
    assert "and to stderr" in lines
    assert lines[-1].startswith("[ledger] ") and "outcome: success" in lines[-1]


def test_the_callable_gets_the_context_only_when_it_has_a_context_parameter(dag_file: Path) -> None:
    item = work_item(dag_file, "with_context", conf={"source": "manual"})
    assert outcome_of(item) == ("success", None)
    assert (f"context demo with_context 7 1 scheduled v1abc 2024-03-10T00:00:00+00:00 2024-03-11T00:00:00+00:00 "
            f"[('source', 'manual')] {item.log_path}") in read_log(item)
    assert outcome_of(work_item(dag_file, "noop", ti_id=2)) == ("success", None)  # no context parameter


def test_a_callable_with_kwargs_gets_its_op_args_op_kwargs_the_context_and_airflows_names(dag_file: Path) -> None:
    item = work_item(dag_file, "with_kwargs")
    assert outcome_of(item) == ("success", None)
    line = next(x for x in read_log(item).splitlines() if x.startswith("kwargs 1 2 "))
    names = set(ast.literal_eval(line.removeprefix("kwargs 1 2 ").rsplit(" ", 1)[0]))
    assert {"context", "ti", "ds", "params", "dag_run", "logical_date", "templates_dict"} <= names  # as Airflow


def test_an_exception_fails_the_try_with_a_one_line_reason_and_the_traceback_in_the_log(dag_file: Path) -> None:
    item = work_item(dag_file, "boom")
    assert outcome_of(item) == ("failed", "ValueError: boom")
    log = read_log(item)
    assert "Traceback (most recent call last)" in log
    assert 'raise ValueError("boom")' in log
    assert "outcome: failed (ValueError: boom)" in log


def test_a_long_exception_message_is_cut_to_300_characters_on_one_line(dag_file: Path) -> None:
    state, reason = outcome_of(work_item(dag_file, "long_message"))
    assert state == "failed"
    assert reason is not None
    assert reason.startswith("RuntimeError: first line second line xxx")
    assert len(reason) == 300 and "\n" not in reason and reason.endswith("...")


def test_raising_skiptask_skips_the_try_with_its_message_as_reason(dag_file: Path) -> None:
    item = work_item(dag_file, "skip")
    assert outcome_of(item) == ("skipped", "nothing to do today")
    assert "outcome: skipped" in read_log(item)


@pytest.mark.parametrize(("task_id", "state", "reason", "output"), [
    ("bash_ok", "success", None, "hello from bash"),
    ("bash_fail", "failed", "exit code 1", "failing"),
    ("bash_skip", "skipped", "exit code 99", "nothing to do"),
])
def test_a_bash_exit_code_of_0_succeeds_99_skips_and_anything_else_fails(
        dag_file: Path, task_id: str, state: str, reason: str | None, output: str) -> None:
    item = work_item(dag_file, task_id)
    assert outcome_of(item) == (state, reason)
    assert output in read_log(item)


def test_a_bash_task_sees_the_ledger_variables_its_own_env_and_its_cwd(dag_file: Path) -> None:
    item = work_item(dag_file, "bash_env", try_number=3)
    assert outcome_of(item) == ("success", None)
    log = read_log(item)
    for line in ("LEDGER_DAG_ID=demo", "LEDGER_TASK_ID=bash_env", "LEDGER_RUN_ID=7",
                 "LEDGER_LOGICAL_DATE=2024-03-10T00:00:00+00:00",
                 "LEDGER_DATA_INTERVAL_START=2024-03-10T00:00:00+00:00",
                 "LEDGER_DATA_INTERVAL_END=2024-03-11T00:00:00+00:00", "LEDGER_TRY_NUMBER=3",
                 "LEDGER_DAG_VERSION=v1abc", "LEDGER_RUN_TYPE=scheduled", "EXTRA=yes", f"cwd={dag_file.parent}"):
        assert line in log.splitlines(), line


@pytest.mark.parametrize(("task_id", "exit_code"), [
    ("noop", try_outcome.EXIT_SUCCESS), ("boom", try_outcome.EXIT_FAILED), ("skip", try_outcome.EXIT_SKIPPED),
])
def test_the_child_exit_code_alone_tells_success_failure_and_skip(dag_file: Path, task_id: str,
                                                                   exit_code: int) -> None:
    running = run_in_child(work_item(dag_file, task_id))
    assert running.status is not None
    assert os.waitstatus_to_exitcode(running.status) == exit_code
    assert len({try_outcome.EXIT_SUCCESS, try_outcome.EXIT_FAILED, try_outcome.EXIT_SKIPPED}) == 3


@pytest.mark.parametrize(("task_id", "outcome"), [
    ("exits", ("failed", "exit code 3")),
    ("kills_itself", ("failed", "killed by signal SIGKILL")),
    ("exits_zero", ("success", None)),
    ("exits_two", ("failed", "SystemExit: 2")),
])
def test_a_task_that_exits_or_dies_on_its_own_gets_the_matching_outcome(
        dag_file: Path, task_id: str, outcome: tuple[str, str | None]) -> None:
    assert outcome_of(work_item(dag_file, task_id)) == outcome


def test_a_return_value_is_written_to_the_log(dag_file: Path) -> None:
    item = work_item(dag_file, "returns")
    assert outcome_of(item) == ("success", None)
    assert "returned {'rows': 3}" in read_log(item)


def test_a_task_that_no_longer_exists_fails_with_a_clear_reason(dag_file: Path) -> None:
    item = work_item(dag_file, "gone")
    assert outcome_of(item) == ("failed", f"task gone is not in the code of version v1abc ({dag_file})")
    assert f"task gone is not in the code of version v1abc ({dag_file})" in read_log(item)
    assert outcome_of(work_item(dag_file, "noop", dag_id="other")) == (
        "failed", f"DAG other is not defined by the code of version v1abc ({dag_file})")


def test_a_dag_file_that_no_longer_imports_fails_the_try_with_its_error(dag_file: Path) -> None:
    dag_file.write_text(dag_file.read_text() + "\nundefined_name\n")
    for prepared in (False, True):
        state, reason = outcome_of(work_item(dag_file, "noop"), prepared=prepared)
        assert state == "failed"
        assert reason is not None and reason.startswith("cannot load DAG file of version v1abc")
        assert "NameError" in reason


def test_a_task_that_exceeds_its_timeout_is_killed_and_failed(dag_file: Path) -> None:
    item = work_item(dag_file, "sleepy", timeout=0.5)
    running = run_in_child(item)
    assert running.outcome is not None
    assert (running.outcome.state, running.outcome.reason) == ("failed", "timed out after 0.5 s")
    assert process_gone(running.pid)


def test_a_timed_out_bash_task_leaves_no_process_behind(dag_file: Path) -> None:
    item = work_item(dag_file, "bash_sleep", timeout=1.0)
    assert outcome_of(item) == ("failed", "timed out after 1.0 s")
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    assert process_gone(sleep_pid), "the bash task's `sleep 60` survived the timeout"


def test_each_try_has_its_own_log_file_in_a_created_directory(dag_file: Path) -> None:
    first, second = work_item(dag_file, "hello"), work_item(dag_file, "hello", try_number=2)
    assert not Path(first.log_path).parent.exists()
    outcome_of(first)
    outcome_of(second)
    assert Path(first.log_path).name == "try_1.log" and Path(second.log_path).name == "try_2.log"
    assert "try 1 of" in read_log(first) and "try 2 of" not in read_log(first)
    assert "try 2 of" in read_log(second)


def test_a_dag_file_is_imported_once_per_modification(dag_file: Path) -> None:
    first = try_plan.load_dag_file(str(dag_file))
    assert first.error is None
    assert try_plan.load_dag_file(str(dag_file)) is first
    stat = dag_file.stat()
    os.utime(dag_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    again = try_plan.load_dag_file(str(dag_file))
    assert again is not first and again.error is None
    assert (dag_file.parent / "imports.txt").read_text().count("imported") == 2


def test_prepared_tries_run_the_module_loaded_before_the_fork_without_importing_again(dag_file: Path) -> None:
    items = [work_item(dag_file, "hello", ti_id=i, try_number=i + 1) for i in range(3)]
    for item in items:
        assert outcome_of(item, prepared=True) == ("success", None)
    assert (dag_file.parent / "imports.txt").read_text().count("imported") == 1
    # what the import printed lands in the log of the try that caused the import, not in later ones
    assert "hello from the module level" in read_log(items[0])
    assert "hello from the module level" not in read_log(items[2])


def test_a_dag_file_that_hangs_on_import_fails_the_try_after_the_import_timeout(tmp_path: Path) -> None:
    try_plan.clear_cache()
    slow = write_dag_file(tmp_path, "import time\ntime.sleep(30)\n" + DAG_SOURCE)
    item = work_item(slow, "noop")
    plan = try_plan.prepare(item, import_timeout=0.3)
    assert plan.error is not None and "import timed out after 0.3 s" in plan.error
    running = try_process.fork_try(item)
    try_plan.forget_prepared()
    outcome = running.wait(timeout=10)
    assert outcome is not None and outcome.state == "failed"
    assert outcome.reason is not None and "import timed out" in outcome.reason


def test_one_line_folds_whitespace() -> None:
    assert try_outcome.one_line("a\n  b\tc") == "a b c"


def test_tries_are_watched_by_polling_where_pidfds_are_missing(dag_file: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError("pidfd_open is not supported")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    assert outcome_of(work_item(dag_file, "noop")) == ("success", None)
    assert outcome_of(work_item(dag_file, "boom")) == ("failed", "ValueError: boom")
    assert outcome_of(work_item(dag_file, "sleepy", timeout=0.3)) == ("failed", "timed out after 0.3 s")


def test_a_try_that_could_not_leave_its_report_fails_saying_why_and_one_that_left_it_writes_nothing_to_its_pipe(
        dag_file: Path) -> None:
    """The report is the one path of a try's end (decision 0298); the result pipe carries a state only when no report
    could be left (here: a folder where the report file goes, as a full disk refuses it)."""
    left, refused = work_item(dag_file, "noop", ti_id=1), work_item(dag_file, "noop", ti_id=2, try_number=2)
    running = run_in_child(left)
    assert running.report is not None and running.outcome is not None
    assert (running.outcome.state, running.report.state) == ("success", "success")
    assert try_process.decode_message(running._buffer) is None  # (nothing came down its pipe)
    Path(refused.log_path).parent.mkdir(parents=True, exist_ok=True)
    Path(refused.log_path + try_report.REPORT).mkdir()
    state, reason = outcome_of(refused)
    assert state == "failed" and (reason or "").startswith("its report could not be left for its worker: ")
