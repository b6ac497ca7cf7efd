"""A job's life cycle: its loop, run until it is stopped (SIGTERM/SIGINT), has done its loops or is idle, with
database faults waited out (back-off, until LEDGER_DB_MAX_OUTAGE) and stale reads read again; its sleep until
something happens (the executor, a doorbell, a due retry or callback); its shutdown: the executor and callbacks
ended within the grace period, the last outcomes recorded, tries still running left to the job that adopts them
(remote) or recorded lost, the locks released."""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ledger.core.states import StaleState
from ledger.infra.logs import claim_folder
from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.loop import outcome_recording
from ledger.scheduler.loop.faults import first_line, is_transient
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.signals.wakeup import DatabaseWakeup
from ledger.services.signal_delivery import ring
from ledger.store import events
from ledger.store import jobs as job_store
from ledger.store import tasks as task_store

Job = Any  # a DagRunJob (scheduler/loop/job.py), which imports this module: typed there; importing it here
# (even for types) would make a cycle



def claim_logs(job: Job, identity: str) -> None:
    """The job's logs folder made its database's (ledger/infra/logs.py, decision 0350), as it starts: the folder an
    earlier database in the same LEDGER_HOME wrote is moved aside, said in one line."""
    moved = claim_folder(job.logs_folder, identity)
    if moved is not None:
        job.say(f"moved the logs of an earlier database from {job.logs_folder} to {moved}")


def run_started(job: Job, *, num_runs: int | None = None, exit_when_idle: bool = False) -> None:
    """The loop of a job whose start() has been called."""
    loops = 0
    # what exists now (modules, classes, table metadata: tens of thousands of objects that live as long as
    # the process) is left out of the cyclic garbage collector's full passes, which scanned it all again
    # every few hundred loops (collected first: garbage that is frozen is never freed)
    gc.collect()
    gc.freeze()
    job.backoff.max_outage = job.settings.db_max_outage
    outage_since: float | None = None
    attempt = stale = 0
    try:
        while not job.stopping:
            try:
                report = job.loop_once()
            except StaleState as exc:
                # another process changed a row this job wrote from what it remembered: nothing was written,
                # what it remembered is forgotten (transaction()), and the next loop reads it all again
                stale += 1
                if stale > 10:  # the database itself says otherwise every time: a bug, not a race
                    raise
                job.say(f"{exc.what}; reading again")
                continue
            except Exception as exc:
                if not is_transient(exc):
                    raise
                now_m = time.monotonic()
                outage_since = now_m if outage_since is None else outage_since
                if job.backoff.gives_up(now_m - outage_since):
                    raise
                attempt += 1
                wait_s = job.backoff.delay(attempt)
                job.say(f"database error, retrying in {wait_s:.1f} s (attempt {attempt}): {first_line(exc)}")
                pause(job, wait_s)
                continue
            stale = 0
            if outage_since is not None:
                job.say(f"database reachable again after {time.monotonic() - outage_since:.1f} s")
                outage_since, attempt = None, 0
            loops += 1
            if num_runs is not None and loops >= num_runs:
                break
            idle = not report.progress and not job.executor.in_flight() and report.retry_at is None \
                and not job.busy() and not job.callbacks.processes.running and not job.callbacks.backlog
            if exit_when_idle and idle:
                if not report.looked_for_runs:  # look for claimable runs once more before leaving
                    job.claims.soon()
                    continue
                break
            job.sleep(report)
    finally:
        job.shutdown()


def sleep(job: Job, report: LoopReport) -> None:
    if report.loops_again(job.executor.open_slots(), executor_wakes=bool(job.executor.wait_handles())):
        return
    if job.executor.holds_events():  # events no handle announces: the next loop drains them now, not after a poll
        return
    # (a heartbeat comes due however long the poll interval: past two thirds of the lock timeout without one, its
    # local tries are killed, decision 0349)
    timeout = min(job.settings.poll_interval, max(0.0, job.heartbeat.next_at - time.monotonic()))
    if job.callbacks.processes.running:  # callback processes are polled: look again soon
        timeout = min(timeout, 0.1)
    if report.retry_at is not None:
        wait_s = (report.retry_at - job.clock.now()).total_seconds()
        timeout = max(0.0, min(timeout, wait_s))
    if report.write_by is not None:
        timeout = max(0.0, min(timeout, report.write_by - time.monotonic()))
    assert job.wakeup is not None
    try:
        job.wakeup.sleep(job.wait_handles(), timeout)
    except Exception as exc:  # the wake-up's check of the database failed: loop, and let the loop retry
        if not is_transient(exc):
            raise


def pause(job: Job, seconds: float) -> None:
    """Wait out a database fault (a stop request ends the wait early). Tries keep running meanwhile;
    their outcomes wait in the executor until they can be recorded."""
    deadline = time.monotonic() + seconds
    while not job.stopping and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(0.2, left))


@contextlib.contextmanager
def beating(job: Job) -> Iterator[None]:
    """While the job waits for its tries and callbacks to end at shutdown, when no loop runs: its heartbeat, written
    every heartbeat_interval from a thread of its own, keeps its runs its own and its local tries running to the end
    of the grace (decision 0349). A database fault skips one, as a loop that fails does."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(job.settings.heartbeat_interval):
            try:
                with job.sessions.begin() as session:
                    job_store.heartbeat(session, job.job_id, now=job.heartbeat.read_time(job.clock.now))
                    job.heartbeat.done()
                job.heartbeat.committed(job.executor.hold_until)
            except Exception:  # (the next one is tried an interval later; the fence acts meanwhile)
                continue

    thread = threading.Thread(target=beat, name="ledger-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def shut_down(job: Job) -> None:
    """Stop taking work, let running tries finish within the grace period, release the locks."""
    if isinstance(job.wakeup, DatabaseWakeup):
        job.wakeup.close()
    with beating(job):
        last = job._unrecorded + job.executor.end(job.settings.shutdown_grace)
        job.callbacks.end(job.settings.shutdown_grace)
    now = job.clock.now()
    attempt = 0
    try:
        while True:  # a database fault while stopping: try a few times, else the lock timeout frees the runs
            try:
                end_in_database(job, last, now)
                break
            except Exception as exc:
                attempt += 1
                if not (is_transient(exc) or isinstance(exc, StaleState)) or attempt >= 6:
                    raise
                job.say(f"database error while stopping, retrying (attempt {attempt}): {first_line(exc)}")
                time.sleep(job.backoff.delay(attempt))
    finally:
        job.connection.let_go()
    job._unrecorded = []
    job.callbacks.recorded()
    if job.doorbells:
        job.doorbells = False
        ring(job.engine, job.home)


def end_in_database(job: Job, last: list[TaskEvent], now: datetime) -> None:
    last = outcome_recording.with_reports_kept(job, last)
    with job.transaction() as session:
        outcome_recording.record(job, session, last, now)
        running_on = job.executor.left_running()  # remote tries: the job that takes their runs over adopts them
        lost = [(ti, tn) for ti, tn in task_store.unfinished_in_job(session, job.job_id) if ti not in running_on]
        if lost:
            outcome_recording.record(job, session, [TaskEvent(ti, tn, "finished", time.time(), "lost",
                                             reason="its job stopped before the try ended")
                                   for ti, tn in lost], now)
        job.callbacks.ended(session, now, job.actor)
        released = job_store.release_all(session, job.job_id)
        events.record_many(session, [  # one event per run, so that `ledger events --dag/--run` finds it
            dict(at=now, kind="locks_released", actor=job.actor, dag_id=dag_id, run_id=run_id,
                 details={"job_id": job.job_id}) for run_id, dag_id in released])
        job_store.end_job(session, job.job_id, now=now)
        job.effects.task_states.flush(session, now, job.actor)
