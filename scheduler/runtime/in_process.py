"""Tries that run in the calling process itself rather than in a forked child.

Spark tries always: a JVM-backed SparkSession cannot be shared with forked children, so `run_in_process(item,
plan)` runs them with the session that process keeps (scheduler/runtime/spark_session.py): fd 0/1/2 go to the try's
log for the duration, the task runs in a thread so that the execution timeout can cancel its Spark jobs,
and a try whose task still does not stop, or whose session's JVM died, says `retire` (a LocalExecutor
worker then exits, to be replaced). A Spark try that finds the JVM of the process's session dead before its code
runs (killed while the process was idle) is `lost`: the fault is the worker's, and no retry is spent. With
LEDGER_REUSE_WORKERS, Python tries too: in a thread, and a try past its execution timeout fails at once and says
`retire` (a thread cannot be stopped).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.runtime import dagbag
from ledger.scheduler.runtime.task_runner import (
    call_task,
    execute_plan,
    masked,
    redirect_output,
    say,
    say_ended,
    say_started,
)
from ledger.scheduler.runtime.try_outcome import Outcome, State, describe_exception, one_line
from ledger.scheduler.runtime.try_plan import Plan, make_plan, prepared, restore_output, save_output
from ledger.scheduler.runtime.try_report import TryReport, build
from ledger.sdk import try_outputs
from ledger.sdk.context import TaskContext, environment
from ledger.sdk.dag import PythonTask
from ledger.sdk.spark import SparkTask

JVM_GONE = "the worker's Spark driver (JVM) died before this try's code ran: this worker will be replaced"
CANCEL_GRACE = 5.0  # seconds an in-process try gets to stop after its timeout cancelled its Spark jobs
CANCEL_AGAIN = 0.5  # seconds between cancels within the grace


@dataclass
class InProcessResult:
    outcome: Outcome
    # This process should run no more tries (a LocalExecutor worker exits to be replaced): a Spark task's
    # thread was still running CANCEL_GRACE s after its timeout, or the session's JVM died, or a reused
    # worker's Python task ran past its timeout.
    retire: bool = False
    report: TryReport | None = None  # what the try left, built as its code ended (scheduler/runtime/try_report.py)
    # Its code never ran: the JVM of this process's session had died since its last try. The worker's fault, not
    # the try's: recorded lost (no retry spent), and the process retires (a new one starts a new JVM).
    lost: bool = False


Result = tuple[State | Literal["lost"], str | None, bool]  # (state, reason, retire); lost: its code never ran
_NO_OUTCOME: Result = ("failed", "the try ended without an outcome", False)


def _run_spark(task: SparkTask, context: TaskContext) -> Result:
    """(state, reason, retire) of a Spark try, run in this thread with this process's session: `lost` when the
    session's JVM died since this process's last try, before the try's code runs (checked in this thread, so that a
    JVM that does not answer is bounded by the execution timeout)."""
    from ledger.scheduler.runtime import spark_session

    if spark_session.driver_lost():
        say(JVM_GONE)
        return "lost", JVM_GONE, True
    try:
        with spark_session.session(task.spark_conf, say=say) as spark:
            state, reason = call_task(task.run, (spark, context), {})
        if state == "failed" and spark_session.driver_lost():
            say("the worker's Spark driver (JVM) is gone: this worker will be replaced")
            return state, reason, True
        return state, reason, False
    except spark_session.SparkUnavailable as exc:
        reason = one_line(str(exc))
        say(reason)
        return "failed", reason, isinstance(exc, spark_session.DriverLost)


def _in_thread(plan: Plan, began: float, work: Callable[[], Result],
               on_interrupt: Callable[[], None] | None = None) -> tuple[threading.Thread, list[Result]]:
    """Run `work` in a daemon thread and wait for it until the try's execution timeout. Returns the thread
    (still alive when the timeout passed first) and what `work` returned, once it has. A bug of ours in
    `work` still ends as a clean failed try."""
    result: list[Result] = []

    def body() -> None:
        try:
            result.append(work())
        except BaseException as exc:
            traceback.print_exc()
            result.append(("failed", describe_exception(exc), False))

    thread = threading.Thread(target=body, name=f"ledger-try-{plan.item.task_id}", daemon=True)
    thread.start()
    timeout = plan.item.execution_timeout
    try:
        thread.join(None if timeout is None else max(0.0, began + timeout - time.monotonic()))
    except BaseException:  # e.g. Ctrl-C in a sequential executor
        if on_interrupt is not None:
            on_interrupt()
        raise
    return thread, result


def _cancel_spark() -> None:
    from ledger.scheduler.runtime import spark_session

    spark_session.cancel_all()


def _execute_in_process(plan: Plan, began: float) -> Result:
    """Run a planned try in this process: the task in a thread, cancelled at its execution timeout."""
    if plan.error is None and plan.context is not None and isinstance(plan.task, PythonTask):
        return _python_in_thread(plan, began)
    if plan.error is not None or not isinstance(plan.task, SparkTask) or plan.context is None:
        state, reason = execute_plan(plan)
        return state, reason, False
    if plan.output:
        say(f"output while importing {plan.item.fileloc}:")
        sys.stdout.write(plan.output if plan.output.endswith("\n") else plan.output + "\n")
    task, context = plan.task, plan.context
    thread, result = _in_thread(plan, began, lambda: _run_spark(task, context), on_interrupt=_cancel_spark)
    if not thread.is_alive():
        return result[0] if result else _NO_OUTCOME
    reason = f"timed out after {float(plan.item.execution_timeout or 0)} s"
    say(f"{reason}: cancelling its Spark jobs")
    # Cancelled again until the thread ends or the grace passes: a job the task submits after a cancel (one that
    # was still being planned as the timeout passed) is not cancelled by it.
    grace_ends = time.monotonic() + CANCEL_GRACE
    while thread.is_alive() and (left := grace_ends - time.monotonic()) > 0:
        _cancel_spark()
        thread.join(min(left, CANCEL_AGAIN))
    if thread.is_alive():
        say(f"the task did not stop within {CANCEL_GRACE:.0f} s of the cancel")
        return "failed", reason, True
    return "failed", reason, False


def _python_in_thread(plan: Plan, began: float) -> Result:
    """A Python try in a reused worker (LEDGER_REUSE_WORKERS): the task runs in a thread of this process.
    A thread cannot be stopped, so a try still running at its execution timeout is failed at once and the
    result says `retire`: its worker exits, and the try's thread with it."""
    thread, result = _in_thread(plan, began, lambda: (*execute_plan(plan), False))
    if thread.is_alive():
        timed_out = f"timed out after {float(plan.item.execution_timeout or 0)} s"
        say(f"{timed_out}: the task runs in its worker process, which ends with it")
        return "failed", timed_out, True
    return result[0] if result else _NO_OUTCOME


def run_in_process(item: WorkItem, plan: Plan | None = None) -> InProcessResult:
    """Run one try in this process (Spark tries: the process keeps their SparkSession), with the same log,
    header, footer and outcomes as a forked try. fd 0, 1 and 2 go to the try's log while it runs.

    When the task does not stop after its timeout (its thread is still running) or the session's JVM died,
    the result says `retire`: the caller should end this process (a LocalExecutor worker does) or give up
    the session."""
    saved = save_output()
    began = time.monotonic()
    retire = lost = False
    state: State
    reason: str | None
    report = None
    try:
        redirect_output(item.log_path)
        notes = try_outputs.begin(item.log_path + try_outputs.OTHERS if item.log_path else None)
        say_started(item, ", in process")
        try:
            plan = plan or prepared(item) or make_plan(item, capture=True)
            if plan.loaded is not None and plan.error is None:
                dagbag.activate(plan.loaded)
            with environment(plan.context):  # put back after the try: this process runs others
                ended, reason, retire = _execute_in_process(plan, began)
            lost = ended == "lost"
            state = "failed" if ended == "lost" else ended
        except Exception as exc:  # a bug of ours must still end as a clean failed try
            traceback.print_exc()
            state, reason = "failed", describe_exception(exc)
        try_outputs.end()
        report = build("lost" if lost else state, masked(reason), time.time(), item.log_path, outputs=notes)
        say_ended(item, "lost" if lost else state, reason, began)
    finally:
        restore_output(saved)
    return InProcessResult(Outcome(state, masked(reason), report.at if report else time.time()), retire, report,
                           lost)


def end_in_process() -> None:
    """Stop what in-process tries left in this process (its SparkSession), if anything."""
    module = sys.modules.get("ledger.scheduler.runtime.spark_session")
    if module is not None:
        module.stop_session()


def give_up_in_process() -> None:
    """After a try that says `retire`, in a process that goes on (a sequential executor): drop the session
    it holds."""
    module = sys.modules.get("ledger.scheduler.runtime.spark_session")
    if module is not None:
        module.discard_session()
