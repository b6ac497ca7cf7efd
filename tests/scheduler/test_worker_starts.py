"""When the LocalExecutor starts its workers (decision 0331): one at start(), waited for at the first submit() or
drain() (decision 0361), another only when an item needs a slot and no worker is idle, up to parallelism. Real
worker processes."""

from __future__ import annotations

import multiprocessing.connection
import os
import signal
from pathlib import Path

import pytest

from ledger.core.errors import WorkerNotStarted
from ledger.scheduler.executors.local import LocalExecutor
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_executors import outcome, run_all, wait_for_event
from tests.scheduler.test_queue_ahead import drain_until_finished
from tests.scheduler.test_task_runner import process_gone, wait_for_file, work_item


def local(make: MakeExecutor, kind: str, parallelism: int, **kwargs: object) -> LocalExecutor:
    executor = make(kind, parallelism, **kwargs)
    assert isinstance(executor, LocalExecutor)
    return executor


def worker_pids(executor: LocalExecutor) -> set[int | None]:
    return {w.process.pid for w in executor._workers}


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_tries_run_one_at_a_time_all_run_on_the_one_worker_started_with_the_executor(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = local(make, kind, 4)
    first = worker_pids(executor)
    assert len(first) == 1 and executor.open_slots() == 4  # the slots of the workers not started yet count
    for ti in (1, 2, 3):
        events = run_all(executor, [work_item(dag_file, "noop", ti_id=ti)])
        assert outcome(events[ti]) == ("success", None)
        if kind == "local_reuse":  # the try ran in its worker: its pid is the worker's
            assert {events[ti][0].pid} == first
    assert worker_pids(executor) == first and executor._spawned == 1


def test_a_worker_starts_only_for_an_item_no_idle_worker_can_take_and_parallelism_bounds_them(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 2)
    # each of the two waits for the other to have started: they succeed only side by side, in two workers
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))
    assert executor._spawned == 1 and executor.open_slots() == 1
    executor.submit(work_item(dag_file, "barrier_b", ti_id=2))
    assert executor._spawned == 2 and executor.open_slots() == 0
    with pytest.raises(RuntimeError, match="no open slot"):
        executor.submit(work_item(dag_file, "noop", ti_id=3))
    seen = drain_until_finished(executor, {1, 2})
    assert [seen[ti][-1].state for ti in (1, 2)] == ["success", "success"]
    both = worker_pids(executor)
    events = run_all(executor, [work_item(dag_file, "noop", ti_id=ti) for ti in (4, 5, 6, 7)])
    assert all(outcome(events[ti]) == ("success", None) for ti in (4, 5, 6, 7))
    assert worker_pids(executor) == both and executor._spawned == 2  # the two idle ones took them


def test_with_queue_ahead_a_new_worker_starts_before_an_item_waits_behind_a_running_try(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 2, queue_ahead=1)
    assert executor.open_slots() == 4
    executor.submit(work_item(dag_file, "sleepy", ti_id=1))  # 60 s
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    assert executor._spawned == 2 and [len(w.items) for w in executor._workers] == [1, 1]
    finished = wait_for_event(executor, "finished")  # (the sleepy one runs on)
    assert (finished.ti_id, finished.state) == (2, "success")
    executor.submit(work_item(dag_file, "noop", ti_id=3))  # the second worker is idle again: it takes it
    executor.submit(work_item(dag_file, "noop", ti_id=4))
    executor.submit(work_item(dag_file, "noop", ti_id=5))  # both busy, both started: it waits in one of them
    assert executor._spawned == 2 and executor.open_slots() == 0
    assert executor.kill(1, "stopped by the test")  # (what waits behind it then starts)
    seen = drain_until_finished(executor, {1, 3, 4, 5})
    assert (seen[1][-1].state, seen[1][-1].reason) == ("failed", "stopped by the test")
    assert all(seen[ti][-1].state == "success" for ti in (3, 4, 5))


def test_a_dead_worker_that_is_not_the_last_is_replaced_only_when_an_item_needs_a_worker(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 2)
    executor.submit(work_item(dag_file, "sleepy", ti_id=1))  # 60 s, in the worker started with the executor
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=2))  # in a second one, started for it
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    second = next(w for w in executor._workers if w.item is not None and w.item.ti_id == 2)
    assert second.process.pid is not None
    os.kill(second.process.pid, signal.SIGKILL)
    finished = wait_for_event(executor, "finished")
    assert (finished.ti_id, finished.state, finished.reason) == (2, "lost", "worker died")
    assert process_gone(sleep_pid)
    assert len(executor._workers) == 1 and executor._spawned == 2 and executor.open_slots() == 1
    events = run_all(executor, [work_item(dag_file, "noop", ti_id=3)])  # the first is busy: a worker starts for it
    assert outcome(events[3]) == ("success", None) and executor._spawned == 3


def test_an_item_for_which_no_worker_could_be_started_fails_as_never_started_and_the_executor_goes_on(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    executor = local(make, "local", 2)
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))  # waits for barrier_b: its worker stays busy

    def refused() -> None:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(executor, "_spawn", refused)  # as fork/exec fails when the host has no process to spare
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    assert 2 in executor.in_flight()
    seen = drain_until_finished(executor, {2})
    assert seen[2][-1].state == "failed"
    assert seen[2][-1].reason.startswith("never started: no worker could be started")
    monkeypatch.undo()
    executor.submit(work_item(dag_file, "barrier_b", ti_id=3))  # a second worker starts for it
    seen = drain_until_finished(executor, {1, 3})
    assert [seen[ti][-1].state for ti in (1, 3)] == ["success", "success"] and executor._spawned == 2


def hold_workers_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> None:
    """Workers started from now on run a sitecustomize that waits, as their interpreter starts, until the test opens
    the FIFO WORKER_GATE names for writing (if set: `release`), then exits with WORKER_EXIT (if set). Only workers:
    they alone are started with the executor's sys.path variable."""
    hook = tmp_path / "worker_hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os\n"
        "if 'LEDGER_WORKER_SYS_PATH' in os.environ:\n"
        "    if os.environ.get('WORKER_GATE'):  # (opening a FIFO to read waits for its writer)\n"
        "        os.close(os.open(os.environ['WORKER_GATE'], os.O_RDONLY))\n"
        "    if os.environ.get('WORKER_EXIT'):\n"
        "        os._exit(int(os.environ['WORKER_EXIT']))\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p))
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def gate_at(path: Path) -> Path:
    """A FIFO for WORKER_GATE: a worker held by it goes on once `release(path)` opens it for writing."""
    os.mkfifo(path)
    return path


def release(gate: Path) -> None:
    """Open the gate's FIFO for writing: returns once the held worker has opened it to read, which lets it go on."""
    os.close(os.open(gate, os.O_WRONLY))


def test_start_returns_before_its_worker_is_ready_and_the_first_drain_waits_for_it(
        tmp_path: Path, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = gate_at(tmp_path / "gate")
    hold_workers_at_start(tmp_path, monkeypatch, WORKER_GATE=str(gate))
    executor = LocalExecutor(2)
    executor.start()  # returns while its worker is held at its interpreter's start
    try:
        assert [w.ready for w in executor._workers] == [False] and executor.open_slots() == 2
        release(gate)
        assert executor.drain() == []  # waited until the worker said it is ready
        assert [w.ready for w in executor._workers] == [True]
        events = run_all(executor, [work_item(dag_file, "noop", ti_id=1)])
        assert outcome(events[1]) == ("success", None) and executor._spawned == 1
    finally:
        executor.end(0)


@pytest.mark.parametrize("first", ["drain", "submit"])
def test_a_worker_that_cannot_start_fails_the_first_drain_or_submit_runs_nothing_and_ends_the_executor(
        tmp_path: Path, dag_file: Path, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    hold_workers_at_start(tmp_path, monkeypatch, WORKER_EXIT="3")
    executor = LocalExecutor(2)
    executor.start()
    try:
        with pytest.raises(WorkerNotStarted, match="worker exited with code 3 as it started: no try was run"):
            executor.drain() if first == "drain" else executor.submit(work_item(dag_file, "noop", ti_id=1))
        assert executor.in_flight() == set() and executor.open_slots() == 0 and executor._workers == []
        with pytest.raises(RuntimeError, match="not accepting work"):
            executor.submit(work_item(dag_file, "noop", ti_id=2))
    finally:
        executor.end(0)


def test_a_worker_killed_before_it_is_ready_is_reported_by_its_signal(
        tmp_path: Path, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hold_workers_at_start(tmp_path, monkeypatch, WORKER_GATE=str(gate_at(tmp_path / "never")))
    executor = LocalExecutor(2)
    executor.start()
    try:
        os.kill(executor._workers[0].process.pid, signal.SIGKILL)  # as the kernel's OOM killer or an operator would
        with pytest.raises(WorkerNotStarted, match="worker was killed by SIGKILL as it started: no try was run"):
            executor.drain()
    finally:
        executor.end(0)


def test_a_worker_that_said_it_is_ready_and_died_before_the_first_drain_is_replaced_not_reported(
        dag_file: Path) -> None:
    executor = LocalExecutor(2)
    executor.start()
    try:
        (first,) = executor._workers
        multiprocessing.connection.wait([first.conn])  # its READY waits in the pipe, read by nobody yet
        os.kill(first.process.pid, signal.SIGKILL)
        first.process.join()
        assert executor.drain() == []  # buried, and replaced at once: the executor always has a worker
        events = run_all(executor, [work_item(dag_file, "noop", ti_id=1)])
        assert outcome(events[1]) == ("success", None) and executor._spawned == 2
    finally:
        executor.end(0)
