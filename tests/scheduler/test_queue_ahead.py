"""LocalExecutor workers sent items ahead of the try they run (queue_ahead): real worker processes."""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.core.errors import ConfigError
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.scheduler.executors import executor_for
from ledger.scheduler.executors import local as local_executor
from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.executors.local import LocalExecutor
from ledger.scheduler.runtime.try_report import REPORT, ReportFile, TryReport
from tests.scheduler.conftest import MakeExecutor
from tests.scheduler.test_executors import wait_for_event
from tests.scheduler.test_task_runner import process_gone, wait_for_file, work_item


def local(make: MakeExecutor, kind: str, parallelism: int, ahead: int) -> LocalExecutor:
    executor = make(kind, parallelism, queue_ahead=ahead)
    assert isinstance(executor, LocalExecutor)
    return executor


def drain_until_finished(executor: LocalExecutor, ti_ids: set[int], within: float = 30.0
                         ) -> dict[int, list[TaskEvent]]:
    """Drain, submitting nothing, until each of these tries has finished: the events per ti id, in order."""
    seen: dict[int, list[TaskEvent]] = {ti: [] for ti in ti_ids}
    deadline = time.monotonic() + within
    while not all(seen[ti] and seen[ti][-1].kind == "finished" for ti in ti_ids):
        assert time.monotonic() < deadline, f"not finished within {within} s: {seen}"
        drained = executor.drain()
        if not drained:
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.5)
        for event in drained:
            seen.setdefault(event.ti_id, []).append(event)
    return seen


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_a_worker_starts_the_items_sent_ahead_one_after_another_without_another_submit(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = local(make, kind, 1, ahead=2)
    assert executor.open_slots() == 3
    for ti in (1, 2, 3):
        executor.submit(work_item(dag_file, "noop", ti_id=ti))
    assert executor.open_slots() == 0 and executor.in_flight() == {1, 2, 3}
    with pytest.raises(RuntimeError, match="no open slot"):
        executor.submit(work_item(dag_file, "noop", ti_id=4))
    seen = drain_until_finished(executor, {1, 2, 3})
    assert {ti: [(e.kind, e.state) for e in events] for ti, events in seen.items()} == {
        ti: [("started", None), ("finished", "success")] for ti in (1, 2, 3)}
    # one try at a time (parallelism 1), in the order they were sent
    spans = [(seen[ti][0].at, seen[ti][1].at) for ti in (1, 2, 3)]
    assert all(ended <= next_start for (_, ended), (next_start, _) in zip(spans, spans[1:], strict=False))
    assert executor.open_slots() == 3 and executor.in_flight() == set()


def test_items_go_to_idle_workers_before_any_is_sent_ahead(make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 2, ahead=1)
    # each of the two waits for the other to have started: sent to one worker, they would never both start
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))
    executor.submit(work_item(dag_file, "barrier_b", ti_id=2))
    seen = drain_until_finished(executor, {1, 2})
    assert [seen[ti][-1].state for ti in (1, 2)] == ["success", "success"]


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_an_item_stopped_while_it_waits_never_starts_and_the_try_before_it_runs_on(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = local(make, kind, 1, ahead=1)
    executor.submit(work_item(dag_file, "sleepy", ti_id=1))  # 60 s
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    assert wait_for_event(executor, "started").ti_id == 1
    assert executor.kill(2, "stopped by signal 7")
    seen = drain_until_finished(executor, {2})
    assert [(e.kind, e.state, e.reason) for e in seen[2]] == [
        ("finished", "failed", "never started: stopped by signal 7")]
    assert 1 not in seen and executor.in_flight() == {1}  # the running try was not touched
    assert executor.kill(1, "stopped by signal 8")
    assert drain_until_finished(executor, {1})[1][-1].reason == "stopped by signal 8"


def test_what_waited_in_a_worker_that_died_runs_on_its_replacement(make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 1, ahead=1)
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    started = wait_for_event(executor, "started")
    sleep_pid = int(wait_for_file(dag_file.parent / "sleep.pid"))
    worker = executor._workers[0]
    assert worker.process.pid is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    seen = drain_until_finished(executor, {1, 2})
    assert (seen[1][-1].state, seen[1][-1].reason) == ("lost", "worker died")
    assert [(e.kind, e.state) for e in seen[2]] == [("started", None), ("finished", "success")]
    assert seen[2][0].pid not in (started.pid, worker.process.pid)
    assert process_gone(sleep_pid)


def test_at_shutdown_what_still_waits_when_the_grace_ends_is_failed_as_never_started(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 1, ahead=1)
    executor.submit(work_item(dag_file, "bash_sleep", ti_id=1))
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    wait_for_event(executor, "started")
    ended = {e.ti_id: (e.kind, e.state, e.reason) for e in executor.end(grace=0.5)}
    assert ended == {1: ("finished", "lost", "stopped by shutdown"),
                     2: ("finished", "failed", "never started: stopped by shutdown")}


def loop_until_finished(executor: LocalExecutor, ti_ids: set[int], within: float = 15.0) -> dict[int, list[TaskEvent]]:
    """As a scheduler loop with nothing more to queue does: drain, then hand over no new work (submit_all([])),
    until each of these tries has finished."""
    seen: dict[int, list[TaskEvent]] = {ti: [] for ti in ti_ids}
    deadline = time.monotonic() + within
    while not all(seen[ti] and seen[ti][-1].kind == "finished" for ti in ti_ids):
        assert time.monotonic() < deadline, f"not finished within {within} s: {seen}"
        drained = executor.drain()
        executor.submit_all([])
        if not drained:
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.5)
        for event in drained:
            seen.setdefault(event.ti_id, []).append(event)
    return seen


def appears(path: Path, within: float = 15.0) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {within} s"
        time.sleep(0.01)


def holding(executor: LocalExecutor, ti_id: int) -> Any:
    return next(w for w in executor._workers if any(item.ti_id == ti_id for item in w.items))


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_an_item_waiting_behind_a_long_try_moves_to_a_worker_that_fell_idle(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = local(make, kind, 2, ahead=1)
    executor.submit(work_item(dag_file, "barrier_a", ti_id=1))  # runs until the test writes b.started
    for ti in (2, 3, 4):  # the other worker takes 2; then 3 and 4 wait, one behind each worker's try
        executor.submit(work_item(dag_file, "noop", ti_id=ti))
    assert executor.open_slots() == 0 and len({id(holding(executor, ti)) for ti in (1, 2, 3, 4)}) == 2
    appears(dag_file.parent / "a.started")
    seen = loop_until_finished(executor, {2, 3, 4})  # the one behind the long try moved to the idle worker
    assert all([(e.kind, e.state) for e in seen[ti]] == [("started", None), ("finished", "success")]
               for ti in (2, 3, 4)), seen
    assert executor.in_flight() == {1} and executor.open_slots() == 3
    (dag_file.parent / "b.started").touch()
    assert loop_until_finished(executor, {1})[1][-1].state == "success"


def test_an_item_stopped_as_its_worker_gives_it_back_never_starts(make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 2, ahead=1)
    executor.submit(work_item(dag_file, "sleepy", ti_id=1))  # 60 s
    executor.submit(work_item(dag_file, "barrier_a", ti_id=2))  # until the test writes b.started
    for ti in (3, 4):  # one waits behind each (a log of its own: try number ti)
        executor.submit(work_item(dag_file, "noop", ti_id=ti, try_number=ti))
    behind_sleepy = next(ti for ti in (3, 4) if holding(executor, ti) is holding(executor, 1))
    appears(dag_file.parent / "a.started")
    (dag_file.parent / "b.started").touch()  # the barrier's worker ends it and the item behind it, then idles
    other = 7 - behind_sleepy
    assert drain_until_finished(executor, {2, other})[other][-1].state == "success"  # (nothing asked back yet)
    sleepy_worker = holding(executor, 1)
    deadline = time.monotonic() + 15
    while True:  # the scheduler's loop asked for the item behind the sleepy try; wait until its worker answered
        executor.submit_all([])
        if multiprocessing.connection.wait([sleepy_worker.conn], timeout=0.5):
            break
        assert time.monotonic() < deadline, "the worker of the sleepy try never answered"
    assert executor.kill(behind_sleepy, "stopped by signal 7")  # reads the answer: the item was given back
    assert [(e.ti_id, e.state, e.reason) for e in executor.drain()] == [
        (behind_sleepy, "failed", "never started: stopped by signal 7")]  # (its try number: behind_sleepy)
    assert executor.in_flight() == {1}
    assert not Path(work_item(dag_file, "noop", ti_id=behind_sleepy, try_number=behind_sleepy).log_path).exists()
    assert Path(work_item(dag_file, "noop", ti_id=other, try_number=other).log_path).exists()  # (where logs go)


class StillProcess:
    """A worker process that is never started: what a worker says is written by the test to the other end of its
    pipe, in the order the test chooses (the order two of the worker's threads may send it in)."""

    pid = None
    sentinel = -1
    exitcode = None

    def is_alive(self) -> bool:
        return False

    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def join(self, timeout: float | None = None) -> None: ...
    def close(self) -> None: ...


def a_scripted_worker(executor: LocalExecutor, items: list[Any]) -> tuple[Any, Any]:
    """A worker of `executor` holding `items` (its first one's "started" not read: no pid, which a stop would kill),
    and the worker's end of its pipe."""
    ours, theirs = multiprocessing.connection.Pipe(duplex=True)
    worker = local_executor._Worker(StillProcess(), ours, items=list(items))  # type: ignore[arg-type]
    executor._workers.append(worker)
    executor._started = True
    return worker, theirs


def test_an_item_given_back_after_the_try_before_it_ended_leaves_its_worker_idle(dag_file: Path) -> None:
    """The worker's main thread reported its try's end, then its inbox thread gave the next item back before the
    main thread took it: read in that order, the item is the first by then, and it is still given back."""
    executor = LocalExecutor(2, queue_ahead=1)
    running, waiting = work_item(dag_file, "noop", ti_id=1), work_item(dag_file, "noop", ti_id=2, try_number=2)
    worker, theirs = a_scripted_worker(executor, [running, waiting])
    executor._withdrawing.add((2, 2))
    theirs.send(TaskEvent(1, 1, "started", time.time(), pid=111))
    theirs.send(TaskEvent(1, 1, "finished", time.time(), "success", pid=111))
    theirs.send((local_executor.WITHDRAWN, 2))
    out: list[TaskEvent] = []
    executor._read(worker, out)
    assert [(e.ti_id, e.kind) for e in out] == [(1, "started"), (1, "finished")]
    assert worker.items == [] and worker.pid is None  # idle: it never starts an item it gave back
    assert executor._withdrawn == [waiting] and executor.in_flight() == {2} and executor.holds_events()
    executor._retire(worker)


def test_an_item_given_back_by_a_worker_stopped_at_shutdown_is_failed_as_never_started(dag_file: Path) -> None:
    executor = LocalExecutor(2, queue_ahead=1)
    running, waiting = work_item(dag_file, "sleepy", ti_id=1), work_item(dag_file, "noop", ti_id=2, try_number=2)
    worker, theirs = a_scripted_worker(executor, [running, waiting])
    executor._withdrawing.add((2, 2))
    theirs.send((local_executor.WITHDRAWN, 2))  # its answer arrives as the worker is stopped
    events: list[TaskEvent] = []
    executor._bury(worker, "stopped by shutdown", events, replace=False)
    assert {e.ti_id: (e.kind, e.state, e.reason) for e in events} == {
        1: ("finished", "lost", "stopped by shutdown"),
        2: ("finished", "failed", "never started: stopped by shutdown")}
    assert executor._withdrawn == [] and executor.in_flight() == set()


def test_a_try_whose_worker_died_before_saying_it_started_is_recorded_by_the_report_it_left(dag_file: Path) -> None:
    """On a loaded host a child can run its code to the end and leave its report before its worker has said it
    started it; the worker then dies (kill -9) without a word. The report says how the try ended (decision 0298)."""
    executor = LocalExecutor(1)
    item = work_item(dag_file, "returns", ti_id=1)
    worker, _theirs = a_scripted_worker(executor, [item])
    Path(item.log_path).parent.mkdir(parents=True, exist_ok=True)
    ReportFile(item.log_path).leave(TryReport("success", None, 5.0, item.log_path, pushed=(("return_value", 7),)))
    events: list[TaskEvent] = []
    executor._bury(worker, "worker died", events, replace=False)
    assert [(e.ti_id, e.kind, e.state, e.at) for e in events] == [(1, "finished", "success", 5.0)]
    assert events[0].report is not None and events[0].report.pushed == (("return_value", 7),)


def test_a_report_older_than_the_executor_is_not_taken_for_the_try_of_a_worker_that_died(dag_file: Path) -> None:
    """A home whose database was made again (run ids begin at 1 again) can hold a report an earlier database's try
    left at the same log path: it says nothing of this try, which never ran, and is lost."""
    executor = LocalExecutor(1)
    item = work_item(dag_file, "returns", ti_id=1)
    worker, _theirs = a_scripted_worker(executor, [item])
    executor._started_wall = time.time()
    Path(item.log_path).parent.mkdir(parents=True, exist_ok=True)
    ReportFile(item.log_path).leave(TryReport("success", None, executor._started_wall - 86400, item.log_path))
    events: list[TaskEvent] = []
    executor._bury(worker, "worker died", events, replace=False)
    assert [(e.ti_id, e.state, e.reason) for e in events] == [(1, "lost", "worker died")]
    assert not Path(item.log_path + REPORT).exists()  # (taken, and left behind no more)


def test_an_item_is_not_asked_back_for_a_slot_no_worker_could_be_started_for(
        dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the host will not start a process, an item asked back for a worker slot without a worker would come
    back to the worker it left, and be asked back again at every loop: it stays where it waits."""
    executor = LocalExecutor(2, queue_ahead=1)
    running, waiting = work_item(dag_file, "sleepy", ti_id=1), work_item(dag_file, "noop", ti_id=2, try_number=2)
    worker, theirs = a_scripted_worker(executor, [running, waiting])
    worker.pid = None

    def no_process() -> Any:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(executor, "_spawn", no_process)
    executor.submit_all([work_item(dag_file, "noop", ti_id=3, try_number=3)])  # no room, and no worker starts
    assert executor.holds_events() and [(e.ti_id, e.reason) for e in executor._pending] == [
        (3, "never started: no worker could be started ([Errno 11] Resource temporarily unavailable)")]
    executor.submit_all([])
    assert not theirs.poll(0)  # nothing asked back
    monkeypatch.undo()
    executor._spawn_failing = False  # (a worker started since: as _worker_for records it)
    executor.submit_all([])
    assert theirs.recv() == (local_executor.WITHDRAW, 2)
    executor._retire(worker)


def test_a_worker_answers_for_an_item_it_gives_back_before_it_says_it_started_the_one_behind_it(
        monkeypatch: pytest.MonkeyPatch, dag_file: Path) -> None:
    """With two items waiting behind a try, the inbox thread's answer for the first (given back) must reach the
    executor before the main thread's "started" of the second, or the executor would take that start for another
    item's. The answer is held back here until the main thread has had its chance to take the second."""
    ours, theirs = multiprocessing.connection.Pipe(duplex=True)
    answer_may_go = threading.Event()
    real_send = local_executor._Inbox.send

    def held_send(self: Any, message: object) -> None:
        if isinstance(message, tuple) and message[0] == local_executor.WITHDRAWN:
            answer_may_go.wait(30)
        real_send(self, message)

    monkeypatch.setattr(local_executor._Inbox, "send", held_send)
    inbox = local_executor._Inbox(ours, threaded=True)
    first, second = work_item(dag_file, "noop", ti_id=2), work_item(dag_file, "noop", ti_id=3)
    theirs.send(first)
    theirs.send(second)
    theirs.send((local_executor.WITHDRAW, 2))
    took: list[Any] = []

    def main_thread() -> None:  # as the worker's loop: take the next item, say it started
        item = inbox.next_item()
        took.append(item)
        inbox.send(TaskEvent(item.ti_id, item.try_number, "started", time.time(), pid=7))

    deadline = time.monotonic() + 15
    while [item.ti_id for item in list(inbox._waiting)] != [3]:  # until the inbox thread has taken 2 out for it
        assert time.monotonic() < deadline
        time.sleep(0.01)
    taker = threading.Thread(target=main_thread)
    taker.start()
    taker.join(0.5)  # (without the lock held for the answer, the start goes out now)
    answer_may_go.set()
    taker.join(15)
    assert [item.ti_id for item in took] == [3]
    said = [theirs.recv(), theirs.recv()]
    assert said[0] == (local_executor.WITHDRAWN, 2) and isinstance(said[1], TaskEvent) and said[1].ti_id == 3
    ours.close()


def test_queue_ahead_is_one_with_reused_workers_or_in_a_backfill_and_none_with_a_fork_per_try_unless_set() -> None:
    assert SchedulerSettings.from_env({}).items_ahead() == 0
    assert SchedulerSettings.from_env({"LEDGER_REUSE_WORKERS": "true"}).items_ahead() == 1
    assert SchedulerSettings.from_env({"LEDGER_QUEUE_AHEAD": "3"}).items_ahead() == 3
    assert SchedulerSettings.from_env({"LEDGER_QUEUE_AHEAD": "0", "LEDGER_REUSE_WORKERS": "1"}).items_ahead() == 0
    assert SchedulerSettings.from_env({}).items_ahead(batch=True) == 1  # `ledger backfill`'s own job
    assert SchedulerSettings.from_env({"LEDGER_QUEUE_AHEAD": "0"}).items_ahead(batch=True) == 0
    built = executor_for(SchedulerSettings.from_env({"LEDGER_QUEUE_AHEAD": "2"}))
    assert isinstance(built, LocalExecutor) and built.depth == 3
    with pytest.raises(ConfigError, match="queue_ahead must be 0 or more"):
        SchedulerSettings.from_env({"LEDGER_QUEUE_AHEAD": "-2"})
    with pytest.raises(ValueError, match="queue_ahead"):
        LocalExecutor(1, queue_ahead=-1)


@pytest.mark.parametrize("kind", ["local", "local_reuse"])
def test_a_stop_for_a_try_that_just_ended_leaves_the_try_that_began_after_it_alone(
        make: MakeExecutor, dag_file: Path, kind: str) -> None:
    executor = local(make, kind, 1, ahead=1)
    executor.submit(work_item(dag_file, "nap", ti_id=1))  # 0.3 s
    executor.submit(work_item(dag_file, "barrier_a", ti_id=2))  # starts when the nap ends, then waits for b.started
    deadline = time.monotonic() + 20
    while not (dag_file.parent / "a.started").exists():  # the second has begun; the executor has read none of it
        assert time.monotonic() < deadline, "the second try never began"
        time.sleep(0.01)
    assert executor.kill(1, "stopped by signal 7")  # a STOP a moment too late for the first
    (dag_file.parent / "b.started").touch()
    seen = drain_until_finished(executor, {1, 2})
    assert [(e.kind, e.state, e.reason) for e in seen[1]] == [("started", None, None), ("finished", "success", None)]
    assert [(e.kind, e.state) for e in seen[2]] == [("started", None), ("finished", "success")]  # once, to the end
    assert executor.in_flight() == set() and not executor._killed and not executor._cancelled


def test_a_worker_found_dead_when_sent_an_item_is_read_to_the_end_before_its_tries_are_judged(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = local(make, "local", 1, ahead=2)
    executor.submit(work_item(dag_file, "nap", ti_id=1))  # 0.3 s
    executor.submit(work_item(dag_file, "barrier_a", ti_id=2))  # starts when the nap ends
    deadline = time.monotonic() + 20
    while not (dag_file.parent / "a.started").exists():  # the first has ended, the second begun: nothing read yet
        assert time.monotonic() < deadline, "the second try never began"
        time.sleep(0.01)
    worker = executor._workers[0]
    assert worker.process.pid is not None
    os.kill(worker.process.pid, signal.SIGKILL)
    worker.process.join()  # (SIGKILL: it is dead; wait for it however loaded the host)
    executor.submit(work_item(dag_file, "noop", ti_id=3))  # finds the worker dead on send
    seen = drain_until_finished(executor, {1, 2, 3})
    assert [(e.kind, e.state) for e in seen[1]] == [("started", None), ("finished", "success")]  # as it ended
    # the worker says "started" once its fork returns, while the child may already have made its file: killed in
    # that moment (a loaded host), the worker never said it; either way the try is judged once, lost
    assert [(e.kind, e.state, e.reason) for e in seen[2]] in ([("started", None, None),
                                                               ("finished", "lost", "worker died")],
                                                              [("finished", "lost", "worker died")])
    assert [(e.kind, e.state) for e in seen[3]] == [("started", None), ("finished", "success")]


def test_a_worker_that_ran_its_share_of_tries_is_replaced_while_idle_and_loses_nothing(
        make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 1, recycle_after=2)
    assert isinstance(executor, LocalExecutor)
    pids = []
    for ti in range(1, 6):  # one at a time: the worker is idle whenever the next is submitted
        executor.submit(work_item(dag_file, "noop", ti_id=ti))
        pids.append(executor._workers[0].process.pid)
        seen = drain_until_finished(executor, {ti})
        assert [(e.kind, e.state) for e in seen[ti]] == [("started", None), ("finished", "success")]
    assert pids[0] == pids[1] != pids[2] == pids[3] != pids[4]  # (a new worker after every two tries)
    assert len(executor._workers) == 1 and executor.open_slots() == 1


GATED_DAG = '''
import pendulum

from ledger import DAG, PythonTask


def gated(context):
    """Ends once the test opens the FIFO its conf names (the open of each side waits for the other's)."""
    with open(context.conf["gate"], "rb") as gate:
        gate.read()


with DAG("demo", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("gated", gated)
    PythonTask("noop", lambda: None)
'''


def _end_of(executor: LocalExecutor, ti: int, within: float = 30.0) -> TaskEvent:
    """Drain until the try of `ti` has finished (whatever else the drains bring): its end."""
    deadline = time.monotonic() + within
    while True:
        assert time.monotonic() < deadline, f"{ti} did not finish within {within} s"
        drained = executor.drain()
        if not drained:
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.5)
        ended = next((e for e in drained if e.ti_id == ti and e.kind == "finished"), None)
        if ended is not None:
            return ended


def test_a_worker_kept_busy_by_items_sent_ahead_is_sent_no_more_once_it_ran_its_share_and_then_replaced(
        make: MakeExecutor, tmp_path: Path) -> None:
    dag_file = tmp_path / "gated_dag.py"
    dag_file.write_text(GATED_DAG)
    executor = make("local", 1, queue_ahead=1, recycle_after=2)
    assert isinstance(executor, LocalExecutor)

    def gated(ti: int) -> None:
        os.mkfifo(tmp_path / f"gate_{ti}")
        executor.submit(work_item(dag_file, "gated", ti_id=ti, conf={"gate": str(tmp_path / f"gate_{ti}")}))

    def open_gate(ti: int) -> None:  # returns once try `ti` has begun to wait on it, and lets it end
        with open(tmp_path / f"gate_{ti}", "wb"):
            pass

    gated(1)
    gated(2)
    first = executor._workers[0].process.pid
    open_gate(1)
    assert _end_of(executor, 1).state == "success"
    gated(3)  # (the worker has always an item: under steady load it is never idle)
    open_gate(2)
    assert _end_of(executor, 2).state == "success"
    assert executor.open_slots() == 0  # two tries run: it takes nothing more, though it holds only one
    assert executor.in_flight() == {3}
    open_gate(3)
    assert _end_of(executor, 3).state == "success"
    assert executor.open_slots() == 2  # idle: its successor's room
    executor.submit(work_item(dag_file, "noop", ti_id=4))
    assert [(e.kind, e.state) for e in drain_until_finished(executor, {4})[4]] == [
        ("started", None), ("finished", "success")]
    assert [w.process.pid for w in executor._workers] != [first]
    assert process_gone(first, within=30)  # (told to end, it exits by itself)


def _state(pid: int) -> str | None:
    """The process's state letter (None: there is no such process any more)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def test_replacing_a_worker_that_ran_its_share_does_not_wait_for_it_to_end(make: MakeExecutor, dag_file: Path) -> None:
    executor = make("local", 1, recycle_after=1)
    assert isinstance(executor, LocalExecutor)
    executor.submit(work_item(dag_file, "noop", ti_id=1))
    assert drain_until_finished(executor, {1})[1][-1].state == "success"
    worn = executor._workers[0].process.pid
    assert worn is not None
    os.kill(worn, signal.SIGSTOP)  # it cannot end now: told to end, it would be waited for, then killed
    os.waitid(os.P_PID, worn, os.WSTOPPED | os.WNOWAIT)  # (this process started it: returns once it has stopped)
    try:
        executor.submit(work_item(dag_file, "noop", ti_id=2))  # goes to its successor
        assert _state(worn) == "T"  # submit() returned without waiting for it, and did not kill it
    finally:
        os.kill(worn, signal.SIGCONT)
    assert drain_until_finished(executor, {2})[2][-1].state == "success"
    deadline = time.monotonic() + 30
    while _state(worn) is not None:  # it ends (or is killed once its grace has passed) and a drain reaps it
        assert time.monotonic() < deadline, "the worker let go was never reaped"
        if not executor.drain():
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.1)
    assert executor._leaving == [] and len(executor._workers) == 1



def _a_stopped_worker_let_go(executor: LocalExecutor, dag_file: Path) -> tuple[int, Any]:
    """Item 1 run by the executor's one worker (recycle_after=1), the worker SIGSTOPped (it cannot end), item 2 run
    by its successor: (the stopped worker's pid, its process handle)."""
    executor.submit(work_item(dag_file, "noop", ti_id=1))
    assert drain_until_finished(executor, {1})[1][-1].state == "success"
    process = executor._workers[0].process
    assert process.pid is not None
    os.kill(process.pid, signal.SIGSTOP)
    os.waitid(os.P_PID, process.pid, os.WSTOPPED | os.WNOWAIT)
    executor.submit(work_item(dag_file, "noop", ti_id=2))
    assert drain_until_finished(executor, {2})[2][-1].state == "success"
    return process.pid, process


def test_a_worker_let_go_that_does_not_end_is_killed_once_its_grace_has_passed_and_reaped(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_executor, "RETIRE_GRACE", 0.0)
    executor = make("local", 1, recycle_after=1)
    assert isinstance(executor, LocalExecutor)
    worn, process = _a_stopped_worker_let_go(executor, dag_file)
    deadline = time.monotonic() + 30
    while _state(worn) is not None:
        assert time.monotonic() < deadline, "the stopped worker was never killed and reaped"
        if not executor.drain():
            multiprocessing.connection.wait(executor.wait_handles(), timeout=0.1)
    assert process.exitcode == -signal.SIGKILL and executor._leaving == []


def test_ending_the_executor_ends_a_worker_it_let_go_that_has_not_ended(
        make: MakeExecutor, dag_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_executor, "RETIRE_GRACE", 3600.0)  # never killed by a drain: left to end()
    executor = make("local", 1, recycle_after=1)
    assert isinstance(executor, LocalExecutor)
    worn, _ = _a_stopped_worker_let_go(executor, dag_file)
    assert [worker.process.pid for worker, _ in executor._leaving] == [worn]
    executor.end(0)
    assert _state(worn) is None and executor._leaving == []


@pytest.mark.parametrize("start_method", ["exec", "fork"])
def test_the_successor_of_a_worker_let_go_holds_none_of_its_pipe(make: MakeExecutor, dag_file: Path,
                                                                    start_method: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker let go and not yet ended still has its pipe: its successor, started meanwhile, must not hold the
    scheduler's end of it (a forked successor would, unless it closes it), or the worker let go would never see
    its pipe close."""
    monkeypatch.setattr(local_executor, "RETIRE_GRACE", 3600.0)  # the stopped worker stays, however slow the host
    executor = make("local", 1, recycle_after=1, start_method=start_method)
    assert isinstance(executor, LocalExecutor)
    worn, _ = _a_stopped_worker_let_go(executor, dag_file)
    try:
        ((leaving, _kill_at),) = executor._leaving
        successor = executor._workers[0].process.pid
        assert successor is not None and successor != worn
        ours = os.fstat(leaving.conn.fileno())  # the scheduler's end of the stopped worker's pipe
        folder = Path(f"/proc/{successor}/fd")
        held = set()
        for fd in os.listdir(folder):
            with contextlib.suppress(FileNotFoundError):  # (an fd closed while this looks)
                found = os.stat(folder / fd)
                held.add((found.st_dev, found.st_ino))
        assert (ours.st_dev, ours.st_ino) not in held
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worn, signal.SIGCONT)


SIGNAL_DAG = '''
import signal

import pendulum

from ledger import DAG, PythonTask

@IMPORT@


def show():
    print("SIGUSR1 default", signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL,
          "SIGTERM default", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)


with DAG("@DAG@", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("show", show)
'''


def test_a_try_starts_with_default_signals_after_a_dag_file_changed_its_workers_and_the_worker_keeps_its_own(
        make: MakeExecutor, tmp_path: Path) -> None:
    plain, changing = tmp_path / "plain_dag.py", tmp_path / "changing_dag.py"
    plain.write_text(SIGNAL_DAG.replace("@IMPORT@", "").replace("@DAG@", "demo"))
    changing.write_text(SIGNAL_DAG.replace("@DAG@", "demo").replace(  # (the worker's own, as it imports the file)
        "@IMPORT@", "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)"))
    executor = make("local", 1)
    assert isinstance(executor, LocalExecutor)
    lines = []
    for ti, dag_file in enumerate([plain, plain, changing, plain, plain], start=1):
        item = work_item(dag_file, "show", ti_id=ti, try_number=ti)  # (a log of its own)
        executor.submit(item)
        assert _end_of(executor, ti).state == "success"
        lines.append(next(line for line in Path(item.log_path).read_text().splitlines() if "SIGUSR1" in line))
    assert all("SIGUSR1 default True SIGTERM default True" in line for line in lines), lines
    worker = executor._workers[0].process
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGTERM)  # its own handler again, not the file's SIG_IGN: it ends
    worker.join(timeout=30)
    assert not worker.is_alive()
