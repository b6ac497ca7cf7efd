"""LocalExecutor and SequentialExecutor with real processes: outcomes, logs, timeouts, dead workers, shutdown."""

from __future__ import annotations

import json
import multiprocessing.connection
import os
import select
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.scheduler.executors import local as local_executor
from ledger.scheduler.executors import make_executor
from ledger.scheduler.executors.base import Executor, TaskEvent, WorkItem
from ledger.scheduler.executors.local import LocalExecutor
from ledger.scheduler.executors.sequential import SequentialExecutor
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_task_runner import (
    process_gone,
    read_log,
    wait_for_file,
    work_item,
)

REPO = Path(__file__).resolve().parents[2]

def run_all(executor: Executor, items: list[WorkItem], within: float = 30.0) -> dict[int, list[TaskEvent]]:
    """Submit every item as slots open, until each has finished; the events per ti id, in order."""
    pending = list(items)
    events: dict[int, list[TaskEvent]] = {item.ti_id: [] for item in items}
    finished = 0
    deadline = time.monotonic() + within
    while finished < len(items):
        assert time.monotonic() < deadline, f"not finished within {within} s: {events}"
        while pending and executor.open_slots() > 0:
            executor.submit(pending.pop(0))
        drained = executor.drain()
        if not drained:
            handles = executor.wait_handles()
            if handles:
                import multiprocessing.connection

                multiprocessing.connection.wait(handles, timeout=0.5)
            continue
        for event in drained:
            events[event.ti_id].append(event)
            finished += event.kind == "finished"
    return events


def outcome(events: list[TaskEvent]) -> tuple[str | None, str | None]:
    last = events[-1]
    assert last.kind == "finished"
    return last.state, last.reason


def wait_for_event(executor: Executor, kind: str, within: float = 20.0) -> TaskEvent:
    import multiprocessing.connection

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for event in executor.drain():
            if event.kind == kind:
                return event
        handles = executor.wait_handles()
        if handles:
            multiprocessing.connection.wait(handles, timeout=0.2)
    raise AssertionError(f"no {kind!r} event within {within} s")


EXECUTORS = pytest.mark.parametrize("kind", ["local", "local_reuse", "sequential"])


@EXECUTORS
def test_tries_succeed_fail_and_skip_through_each_executor(make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = make(kind)
    cases = {
        "noop": ("success", None),
        "boom": ("failed", "ValueError: boom"),
        "bash_ok": ("success", None),
        "bash_fail": ("failed", "exit code 1"),
        "bash_skip": ("skipped", "exit code 99"),
        "skip": ("skipped", "nothing to do today"),
        "gone": ("failed", f"task gone is not in the code of version v1abc ({dag_file})"),
    }
    items = [work_item(dag_file, task_id, ti_id=n) for n, task_id in enumerate(cases)]
    events = run_all(executor, items)
    for item in items:
        assert outcome(events[item.ti_id]) == cases[item.task_id], item.task_id
        started, finished = events[item.ti_id]
        assert (started.kind, finished.kind) == ("started", "finished")
        assert started.pid is not None and started.pid == finished.pid
        assert started.try_number == finished.try_number == 1
        assert started.at <= finished.at
    assert executor.in_flight() == set()


@EXECUTORS
def test_a_bash_task_sees_the_run_in_ledger_environment_variables(make: MakeExecutor, dag_file: Path,
                                                                  kind: str) -> None:
    item = work_item(dag_file, "bash_env", try_number=2)
    assert outcome(run_all(make(kind), [item])[item.ti_id]) == ("success", None)
    lines = read_log(item).splitlines()
    for expected in ("LEDGER_DAG_ID=demo", "LEDGER_TASK_ID=bash_env", "LEDGER_RUN_ID=7",
                     "LEDGER_LOGICAL_DATE=2024-03-10T00:00:00+00:00",
                     "LEDGER_DATA_INTERVAL_START=2024-03-10T00:00:00+00:00",
                     "LEDGER_DATA_INTERVAL_END=2024-03-11T00:00:00+00:00", "LEDGER_TRY_NUMBER=2", "EXTRA=yes"):
        assert expected in lines, expected


@EXECUTORS
def test_a_python_task_receives_its_context(make: MakeExecutor, dag_file: Path, kind: str) -> None:
    item = work_item(dag_file, "with_context", conf={"full_refresh": True})
    assert outcome(run_all(make(kind), [item])[item.ti_id]) == ("success", None)
    assert "context demo with_context 7 1 scheduled v1abc 2024-03-10T00:00:00+00:00" in read_log(item)
    assert "[('full_refresh', True)]" in read_log(item)


@EXECUTORS
def test_each_try_writes_its_own_log_with_the_task_output(make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = make(kind)
    first = work_item(dag_file, "hello", ti_id=1, try_number=1)
    second = work_item(dag_file, "hello", ti_id=1, try_number=2)
    run_all(executor, [first])
    run_all(executor, [second])
    assert first.log_path != second.log_path
    for item in (first, second):
        log = read_log(item)
        assert f"try {item.try_number} of dag=demo run=7 task=hello" in log
        assert "hello from python" in log and "and to stderr" in log
        assert "outcome: success" in log.splitlines()[-1]


@EXECUTORS
def test_a_task_that_exceeds_its_timeout_is_killed_and_failed(make: MakeExecutor, dag_file: Path,
                                                             kind: str) -> None:
    items = [work_item(dag_file, "bash_sleep", ti_id=1, timeout=1.0),
             work_item(dag_file, "sleepy", ti_id=2, timeout=0.5)]
    events = run_all(make(kind), items)
    assert outcome(events[1]) == ("failed", "timed out after 1.0 s")
    assert outcome(events[2]) == ("failed", "timed out after 0.5 s")
    # The try has ended, its process group killed: bash writes no more. On a loaded host its timeout can end it
    # before it started `sleep 60` and wrote the pid: then there is no sleep to outlive it.
    pid_file = dag_file.parent / "sleep.pid"
    sleep_pid = pid_file.read_text().strip() if pid_file.exists() else ""
    if sleep_pid:
        assert process_gone(int(sleep_pid)), "the bash task's `sleep 60` outlived its timeout"
    for item_events in events.values():
        assert process_gone(item_events[0].pid or 0)


def test_a_worker_killed_mid_task_reports_its_try_lost_and_the_last_worker_is_replaced_at_once(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 2)
    assert isinstance(executor, LocalExecutor)
    workers_before = {w.process.pid for w in executor._workers}
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    started = wait_for_event(executor, "started")
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    worker = next(w for w in executor._workers if w.item is not None)
    assert worker.process.pid is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.reason) == (1, "lost", "worker died")
    assert process_gone(sleep_pid) and process_gone(started.pid or 0)
    assert executor.open_slots() == 2 and executor.in_flight() == set()
    workers_after = {w.process.pid for w in executor._workers}  # the executor always has one (decision 0331)
    assert len(workers_after) == 1 and workers_after != workers_before
    again = work_item(dag_file, "noop", ti_id=2)
    assert outcome(run_all(executor, [again])[2]) == ("success", None)


def test_a_worker_found_dead_as_an_item_is_sent_to_it_takes_down_what_its_unread_try_started(
        make: MakeExecutor, dag_file: Path) -> None:
    """Its try's start was never read (the worker died before the next drain): the pid that names the try's process
    group is learnt from what the worker said last, and the group is killed (the background `sleep 60` a BashTask
    started would otherwise run on beside the try's next attempt)."""
    executor = make("local", 1, queue_ahead=1)
    assert isinstance(executor, LocalExecutor)
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    (worker,) = executor._workers
    assert worker.process.pid is not None
    # its "started" waits in the pipe, unread: a message larger than the worker's READY (which may be there too,
    # unread); the try's process writing sleep.pid does not order it before the worker's send
    deadline = time.monotonic() + 30
    while _unread_bytes(worker.conn) < 100 and time.monotonic() < deadline:
        worker.conn.poll(0.05)
    assert _unread_bytes(worker.conn) >= 100
    os.kill(worker.process.pid, signal.SIGKILL)
    assert process_gone(worker.process.pid)
    # its end of the pipe closed: the process is a zombie once its first thread has exited, and its other threads
    # may hold its descriptors a moment longer, in which a send to it would still succeed
    assert _hung_up(worker.conn), "the dead worker's end of the pipe stayed open"
    executor.submit(work_item(dag_file, "noop", ti_id=2))  # (sent to the dead worker: it is buried then)
    assert process_gone(sleep_pid), "what the dead worker's try started ran on"
    ends: dict[int, tuple[str | None, str | None]] = {}
    deadline = time.monotonic() + 30
    while len(ends) < 2 and time.monotonic() < deadline:
        ends.update((e.ti_id, (e.state, e.reason)) for e in executor.drain() if e.kind == "finished")
        multiprocessing.connection.wait(executor.wait_handles(), timeout=0.2)
    assert ends == {1: ("lost", "worker died"), 2: ("success", None)}


def _wait_until_made(path: Path, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not made within {within} s"
        time.sleep(0.01)


def _hung_up(conn: multiprocessing.connection.Connection, within: float = 30.0) -> bool:
    """True once the other end of a pipe connection has closed (POLLHUP), whatever waits unread in it."""
    poller = select.poll()
    poller.register(conn.fileno(), 0)  # no event asked for: poll reports the hang-up alone, not the unread bytes
    return any(events & select.POLLHUP for _, events in poller.poll(within * 1000))


def _unread_bytes(conn: multiprocessing.connection.Connection) -> int:
    """How many bytes wait unread in a pipe connection (FIONREAD)."""
    import array
    import fcntl
    import termios

    count = array.array("i", [0])
    fcntl.ioctl(conn.fileno(), termios.FIONREAD, count, True)
    return count[0]


def test_the_local_executor_runs_up_to_parallelism_tries_at_once(make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 2)
    assert executor.open_slots() == 2
    # each of the two tries waits for the other to have started: they can only succeed side by side
    a, b = work_item(dag_file, "barrier_a", ti_id=1), work_item(dag_file, "barrier_b", ti_id=2)
    executor.submit(a)
    assert executor.open_slots() == 1
    executor.submit(b)
    assert executor.open_slots() == 0
    assert executor.in_flight() == {1, 2}
    with pytest.raises(RuntimeError, match="no open slot"):
        executor.submit(work_item(dag_file, "noop", ti_id=3))
    with pytest.raises(ValueError, match="already in flight"):
        executor.submit(a)
    deadline = time.monotonic() + 30
    finished: dict[int, TaskEvent] = {}
    while len(finished) < 2 and time.monotonic() < deadline:
        finished.update({e.ti_id: e for e in executor.drain() if e.kind == "finished"})
        time.sleep(0.01)
    assert {ti: (e.state, e.reason) for ti, e in finished.items()} == {1: ("success", None), 2: ("success", None)}
    assert executor.open_slots() == 2 and executor.in_flight() == set()


def test_the_sequential_executor_runs_one_try_per_submit_and_has_no_wait_handles(make: MakeExecutor,
                                                                                 dag_file: Path) -> None:
    executor = make("sequential", 8)
    assert executor.parallelism == 1
    assert executor.wait_handles() == []
    assert executor.open_slots() == 1
    executor.submit(work_item(dag_file, "noop", ti_id=1))
    assert executor.open_slots() == 0 and executor.in_flight() == {1}
    events = executor.drain()
    assert [(e.kind, e.state) for e in events] == [("started", None), ("finished", "success")]
    assert executor.open_slots() == 1 and executor.in_flight() == set()
    assert executor.drain() == []


def test_end_lets_tries_finish_within_the_grace_period_then_stops_the_rest(make: MakeExecutor,
                                                                          dag_file: Path) -> None:
    executor = make("local", 2)
    assert isinstance(executor, LocalExecutor)
    worker_pids = [w.process.pid for w in executor._workers]
    executor.submit(work_item(dag_file, "nap", ti_id=1))  # 0.3 s
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=2))  # 60 s
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    began = time.monotonic()
    events = executor.end(grace=2.5)
    took = time.monotonic() - began
    assert took >= 2.4  # (that it then stopped the rest, not waited for them, is what `finished` says)
    finished = {e.ti_id: (e.state, e.reason) for e in events if e.kind == "finished"}
    assert finished == {1: ("success", None), 2: ("lost", "stopped by shutdown")}
    assert process_gone(sleep_pid)
    assert all(process_gone(pid or 0) for pid in worker_pids)
    assert executor.open_slots() == 0 and executor.in_flight() == set()
    assert executor.end(1) == []
    with pytest.raises(RuntimeError):
        executor.submit(work_item(dag_file, "noop", ti_id=3))


def test_end_returns_at_once_when_nothing_runs(make: MakeExecutor) -> None:
    executor = make("local", 2)
    began = time.monotonic()
    assert executor.end(grace=600) == []
    assert time.monotonic() - began < 300  # it did not wait out the grace (a margin no machine's load reaches)


KILLED_SCHEDULER = '''
import json, sys, time
sys.path.insert(0, {repo!r})
from tests.scheduler.test_task_runner import work_item
from pathlib import Path
from ledger.scheduler.executors.local import LocalExecutor

executor = LocalExecutor(2, start_method={method!r})
executor.start()
executor.submit(work_item(Path({dag_file!r}), "bash_sleep", ti_id=1))
executor.submit(work_item(Path({dag_file!r}), "sleepy", ti_id=2))
started = {{}}
while len(started) < 2:
    for event in executor.drain():
        started[event.ti_id] = event.pid
    time.sleep(0.01)
print(json.dumps({{"workers": [w.process.pid for w in executor._workers], "tries": list(started.values())}}),
      flush=True)
time.sleep(120)
'''


@pytest.mark.parametrize("method", ["exec", "fork"])
def test_killing_the_scheduler_with_sigkill_leaves_no_worker_or_task_running(dag_file: Path, tmp_path: Path,
                                                                            method: str) -> None:
    script = tmp_path / "scheduler.py"
    script.write_text(KILLED_SCHEDULER.format(repo=str(REPO), dag_file=str(dag_file), method=method))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, "the scheduler script ended early"
        pids = json.loads(line)
        sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    finally:
        proc.kill()
        proc.wait()
    for pid in [*pids["workers"], *pids["tries"], sleep_pid]:
        assert process_gone(pid), f"process {pid} outlived the killed scheduler"


def test_a_changed_dag_file_is_imported_again_by_the_workers(make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 1)
    first = work_item(dag_file, "hello", ti_id=1)
    run_all(executor, [first])
    source = dag_file.read_text().replace('print("hello from python")', 'print("hello from version two")')
    dag_file.write_text(source)
    stat = dag_file.stat()
    os.utime(dag_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = work_item(dag_file, "hello", ti_id=2, try_number=2)
    assert outcome(run_all(executor, [second])[2]) == ("success", None)
    assert "hello from version two" in read_log(second)
    third = work_item(dag_file, "hello", ti_id=3, try_number=3)
    run_all(executor, [third])
    assert (dag_file.parent / "imports.txt").read_text().count("imported") == 2  # once per version


def test_a_try_that_ends_while_its_worker_waits_to_tell_its_start_is_told_start_and_end_at_once(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision 0366: the worker tells a short try's start with its end. Here the wait is long (the workers are forked
    from this process, so they see it) and the try ends when the test says: until then the executor hears nothing,
    then both in one drain, in order, with the try's own pid and times."""
    monkeypatch.setattr(local_executor, "SAY_STARTED_AFTER", 120.0)
    executor = make("local", 1, start_method="fork")
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))
    _wait_until_made(dag_file.parent / "a.started")  # the try runs, blocked until the test writes b.started
    (worker,) = executor._workers  # type: ignore[attr-defined]
    assert executor.drain() == [] and worker.pid is None  # its start is not told while it runs (within 120 s)
    (dag_file.parent / "b.started").touch()
    deadline = time.monotonic() + 30
    drained: list[TaskEvent] = []
    while not drained and time.monotonic() < deadline:
        multiprocessing.connection.wait(executor.wait_handles(), timeout=0.2)
        drained = executor.drain()
    assert [(e.ti_id, e.kind, e.state) for e in drained] == [(1, "started", None), (1, "finished", "success")]
    started, finished = drained
    assert started.pid == finished.pid and started.pid not in (None, worker.process.pid)
    assert started.at <= finished.at
    assert executor.open_slots() == 1 and executor.in_flight() == set()


def test_a_worker_killed_before_it_told_its_trys_start_takes_down_what_the_try_started(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision 0366: the executor has not heard of the try's process (its worker waits to tell the start with the
    end), yet burying the worker kills the try's process group (the `sleep 60 &` a BashTask started): the pid the
    worker wrote as it forked the try (scheduler/executors/try_pid.py)."""
    monkeypatch.setattr(local_executor, "SAY_STARTED_AFTER", 120.0)
    executor = make("local", 1, start_method="fork")
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    (worker,) = executor._workers  # type: ignore[attr-defined]
    assert executor.drain() == [] and worker.pid is None  # (nothing told yet)
    worker_pid = worker.process.pid
    assert worker_pid is not None
    os.kill(worker_pid, signal.SIGKILL)
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.reason) == (1, "lost", "worker died")
    assert finished.pid is not None and finished.pid != worker_pid  # the try's own, from the slot
    assert process_gone(sleep_pid), "what the try started ran on after its worker was buried"


def test_a_try_that_runs_on_has_its_start_told_before_it_ends(make: MakeExecutor, dag_file: Path) -> None:
    """The other side of decision 0366: a try still running after the worker's short wait has its start told on its
    own (its pid known, so a stop kills its group alone), and its end later."""
    executor = make("local", 1)
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))
    started = wait_for_event(executor, "started")  # the try cannot end before the test writes b.started
    (worker,) = executor._workers  # type: ignore[attr-defined]
    assert (started.ti_id, worker.pid) == (1, started.pid) and started.pid != worker.process.pid
    (dag_file.parent / "b.started").touch()
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.pid) == (1, "success", started.pid)


def test_the_local_executor_can_also_fork_its_workers_from_the_scheduler(make: MakeExecutor,
                                                                         dag_file: Path) -> None:
    executor = make("local", 2, start_method="fork")
    items = [work_item(dag_file, "noop", ti_id=1), work_item(dag_file, "bash_fail", ti_id=2)]
    events = run_all(executor, items)
    assert outcome(events[1]) == ("success", None)
    assert outcome(events[2]) == ("failed", "exit code 1")


def test_reused_workers_run_python_tries_themselves_and_bash_tries_in_a_child(make: MakeExecutor,
                                                                             dag_file: Path) -> None:
    executor = make("local_reuse", 1)
    assert isinstance(executor, LocalExecutor)
    worker_pid = executor._workers[0].process.pid
    items = [work_item(dag_file, "noop", ti_id=1), work_item(dag_file, "boom", ti_id=2),
             work_item(dag_file, "bash_ok", ti_id=3)]
    events = run_all(executor, items)
    assert [outcome(events[n]) for n in (1, 2, 3)] == [("success", None), ("failed", "ValueError: boom"),
                                                      ("success", None)]
    assert events[1][0].pid == events[2][0].pid == worker_pid  # no fork: the try's pid is its worker's
    assert events[3][0].pid != worker_pid  # a Bash try still runs in a child of its own
    log = read_log(items[1])
    assert f"pid {worker_pid}, in process)" in log and "ValueError: boom" in log
    assert "outcome: failed (ValueError: boom)" in log.splitlines()[-1]


@pytest.mark.parametrize("kind, counts", [("local", ["count 1", "count 1"]), ("local_reuse", ["count 1", "count 2"])])
def test_tries_of_a_reused_worker_share_its_module_state_and_forked_tries_do_not(
        make: MakeExecutor, dag_file: Path, kind: str, counts: list[str]) -> None:
    executor = make(kind, 1)
    items = [work_item(dag_file, "counter", ti_id=1), work_item(dag_file, "counter", ti_id=1, try_number=2)]
    for item in items:
        assert outcome(run_all(executor, [item])[1]) == ("success", None)
    assert [next(line for line in read_log(i).splitlines() if line.startswith("count")) for i in items] == counts


def test_a_python_try_past_its_timeout_ends_its_reused_worker_which_is_replaced(make: MakeExecutor,
                                                                               dag_file: Path) -> None:
    executor = make("local_reuse", 1)
    assert isinstance(executor, LocalExecutor)
    worker_pid = executor._workers[0].process.pid
    assert worker_pid is not None
    events = run_all(executor, [work_item(dag_file, "sleepy", ti_id=1, timeout=0.5)])
    assert outcome(events[1]) == ("failed", "timed out after 0.5 s")
    assert "the task runs in its worker process, which ends with it" in read_log(
        work_item(dag_file, "sleepy", ti_id=1))
    assert process_gone(worker_pid)
    deadline = time.monotonic() + 30
    while executor._workers[0].process.pid == worker_pid:  # its exit is seen, and a new worker started
        assert time.monotonic() < deadline
        assert executor.drain() == []  # the worker's end is not reported as another outcome
        time.sleep(0.05)
    assert outcome(run_all(executor, [work_item(dag_file, "noop", ti_id=2)])[2]) == ("success", None)


def test_make_executor_builds_local_and_sequential_and_refuses_anything_else() -> None:
    local = make_executor("local", 3)
    assert isinstance(local, LocalExecutor) and local.parallelism == 3
    assert not local.reuse_workers
    reusing = make_executor("local", 2, reuse_workers=True)
    assert isinstance(reusing, LocalExecutor) and reusing.reuse_workers
    sequential = make_executor("Sequential", 3)
    assert isinstance(sequential, SequentialExecutor) and sequential.parallelism == 1
    with pytest.raises(ValueError, match="unknown executor 'kubernetes': choose one of local, sequential"):
        make_executor("kubernetes", 2)
    with pytest.raises(ValueError, match="parallelism"):
        make_executor("local", 0)


def test_nothing_is_accepted_before_start(dag_file: Path) -> None:
    for executor in (LocalExecutor(2), SequentialExecutor()):
        assert executor.open_slots() == 0
        assert executor.drain() == []
        with pytest.raises(RuntimeError):
            executor.submit(work_item(dag_file, "noop"))


def test_many_no_op_tries_flow_through_the_local_executor(make: MakeExecutor, dag_file: Path) -> None:
    """A sanity check of throughput and latency; printed (run with -s to see), not asserted."""
    executor = make("local", 2)
    count = 200
    items = [work_item(dag_file, "noop", ti_id=n, try_number=n) for n in range(1, count + 1)]
    submitted_at: dict[int, float] = {}
    pending = list(items)
    starts: list[float] = []
    finished = 0
    import multiprocessing.connection

    began = time.perf_counter()
    while finished < count:
        while pending and executor.open_slots() > 0:
            item = pending.pop(0)
            submitted_at[item.ti_id] = time.time()
            executor.submit(item)
        drained = executor.drain()
        if not drained:
            multiprocessing.connection.wait(executor.wait_handles(), timeout=1)
        for event in drained:
            if event.kind == "started":
                starts.append(event.at - submitted_at[event.ti_id])
            else:
                assert event.state == "success", event
                finished += 1
    seconds = time.perf_counter() - began
    print(f"\nLocalExecutor(2): {count} no-op tries in {seconds:.2f} s = {count / seconds:.0f} tries/s; "
          f"submit -> started p50 {statistics.median(starts) * 1000:.2f} ms")


def test_the_local_executor_notices_dead_workers_where_pidfds_are_missing(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(pid: int) -> int:
        raise OSError("pidfd_open is not supported")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    executor = make("local", 1)
    assert isinstance(executor, LocalExecutor)
    assert outcome(run_all(executor, [work_item(dag_file, "noop", ti_id=1)])[1]) == ("success", None)
    executor.submit(work_item(dag_file, "sleepy", ti_id=2, try_number=2))
    wait_for_event(executor, "started")
    worker_pid = executor._workers[0].process.pid
    assert worker_pid is not None
    os.kill(worker_pid, signal.SIGKILL)
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.reason) == (2, "lost", "worker died")


def test_a_work_item_reaches_a_worker_with_its_datetimes_as_they_were() -> None:
    """dumps sends UTC datetimes as their fields, every other datetime (another zone, pendulum's, a fold) as
    pickle does: what the worker loads is what Connection.send's pickle would give, type, zone and fold included."""
    import pickle
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta, timezone

    import pendulum

    from ledger.scheduler.executors.base import dumps

    for start, end in [(datetime(2024, 3, 31, 1, 30, 5, 123456, tzinfo=UTC), datetime(2024, 4, 1, tzinfo=UTC)),
                       (pendulum.datetime(2024, 3, 31, tz="Europe/Amsterdam"),
                        datetime(2024, 1, 2, tzinfo=timezone(timedelta(hours=-7)))),
                       (datetime(2024, 11, 3, 1, 30, tzinfo=UTC, fold=1), pendulum.datetime(2024, 1, 1))]:
        item = replace(work_item(Path("/tmp/demo.py"), "noop"), logical_date=start, data_interval_start=start,
                       data_interval_end=end)
        loaded, usual = pickle.loads(dumps(item)), pickle.loads(pickle.dumps(item))  # (as Connection.send would)
        assert loaded == item
        for name in ("logical_date", "data_interval_start", "data_interval_end"):
            got, expected = getattr(loaded, name), getattr(usual, name)
            assert (type(got), got.tzinfo, got.fold, got) == (type(expected), expected.tzinfo, expected.fold, expected)
