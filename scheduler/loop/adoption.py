"""Tries that outlive their job (the CeleryExecutor's, on remote workers), and tries whose code ended before their
job died (any executor's: their report is on this host, decision 0298): adopted by the job that takes their runs
over, instead of being recorded lost; and the executor's remarks (a refused redelivery) written as events.

A job that claims runs from a job that died finds that job's queued and running tries (task_store.orphaned). The
transaction that claims the runs offers those tries to the executor (`offer`); it neither adopts nor loses them. Once
it has committed, and before the next loop's transaction, the executor looks for them where they run (Executor.find:
Redis, or a report file beside the log), so that no transaction waits on that look. The next loop's transaction
(`settle`) reads the offered tries again: each still the dead job's, with the same try number, becomes this job's
if the executor found it (guarded on its state and try number; an event `try_adopted`) and is lost otherwise. Once
that transaction has committed the executor follows the adopted tries (Executor.follow), as if this job had queued
them. A local try's process died with its job, so the LocalExecutor and SequentialExecutor find only a try that left
its whole report as its code ended: its end, that report, comes with the executor's next drain and is recorded like
any other. A job that dies between the two transactions leaves the tries to the next job, as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.states import TaskState
from ledger.infra.logs import log_file
from ledger.infra.workers import task_id as celery_task_id
from ledger.scheduler.executors.base import Executor, WorkItem
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import identity as identity_store
from ledger.store import tasks as task_store


@dataclass(frozen=True)
class Offer:
    """A dead job's try offered to this job's executor: its work item, whether it was recorded started, and the
    fields of the job's in-flight entry for it once adopted."""

    item: WorkItem
    started: bool
    fields: dict[str, Any]


@dataclass(frozen=True)
class Settled:
    """What the transaction that settled the offers decided: ti id -> the fields of the job's in-flight entry for
    each adopted try; the tries the executor now follows (its `find`'s findings); the offered tries that are lost,
    (ti id, try number, run id)."""

    adopted: dict[int, dict[str, Any]]
    follow: dict[int, Any]
    lost: list[tuple[int, int, int]]


def offer(session: Session, orphans: list[tuple[int, int, int]], *, logs: str
          ) -> tuple[list[Offer], list[tuple[int, int, int]]]:
    """In the transaction that took the orphans' runs over: (the tries to offer the executor, the orphans that
    cannot be offered: their task is gone from their version, lost now)."""
    rows = {r.ti_id: r for r in task_store.adoptable(session, [ti for ti, _tn, _run in orphans])}
    identity = identity_store.read(session)
    offers: list[Offer] = []
    for ti, tn, _run in orphans:
        row = rows.get(ti)
        if row is None or row.try_number != tn:
            continue
        task = dag_store.spec(session, row.dag_id, row.version_hash).tasks.get(row.task_id)
        if task is None:
            continue
        path = log_file(logs, row.dag_id, row.run_id, row.task_id, tn, row.map_index)
        item = WorkItem(
            ti_id=ti, run_id=row.run_id, dag_id=row.dag_id, task_id=row.task_id, try_number=tn, fileloc="",
            logical_date=row.logical_date, data_interval_start=row.data_interval_start,
            data_interval_end=row.data_interval_end, dag_version=row.version_hash, run_type=row.run_type,
            log_path=path, map_index=row.map_index, queue=task.queue, priority_weight=row.priority_weight,
            database=identity.of(ti))
        offers.append(Offer(item, row.state == TaskState.RUNNING, dict(
            run_id=row.run_id, dag_id=row.dag_id, task_id=row.task_id, retry_delay=task.delay_after(tn),
            dag_version=row.version_hash, log_path=path, started=row.state == TaskState.RUNNING,
            map_index=row.map_index)))
    offered = {o.item.ti_id for o in offers}
    return offers, [o for o in orphans if o[0] not in offered]


@dataclass(frozen=True)
class Looked:
    """Offered tries and what the executor found of them (ti id -> its finding; the others it did not find)."""

    offers: list[Offer]
    found: dict[int, Any]


def find(executor: Executor, offers: list[Offer]) -> Looked:
    """Outside any transaction: the offered tries the executor finds where they run."""
    return Looked(offers, executor.find([(o.item, o.started) for o in offers]) if offers else {})


def settle(session: Session, looked: Looked, *, job_id: int, actor: str, now: datetime) -> Settled:
    """In the next loop's transaction: each offered try that is still the dead job's, with its try number, is
    adopted if the executor found it, lost otherwise; an offered try that changed meanwhile (an operator's action,
    another job) is left as it now is."""
    offers, found = looked.offers, looked.found
    still = set(task_store.orphaned(session, sorted({o.item.run_id for o in offers}), job_id=job_id))
    adopted: dict[int, dict[str, Any]] = {}
    lost: list[tuple[int, int, int]] = []
    for o in offers:
        key = (o.item.ti_id, o.item.try_number, o.item.run_id)
        if key not in still:
            continue
        if o.item.ti_id in found:
            adopted[o.item.ti_id] = o.fields
        else:
            lost.append(key)
    if adopted:
        tries = [(o.item.ti_id, o.item.try_number) for o in offers if o.item.ti_id in adopted]
        task_store.adopt(session, tries, job_id=job_id)
        events.record_many(session, [
            dict(at=now, kind="try_adopted", actor=actor, dag_id=adopted[ti]["dag_id"], run_id=adopted[ti]["run_id"],
                 details={"task_id": adopted[ti]["task_id"], "ti_id": ti, "try_number": tn, "job_id": job_id})
            for ti, tn in tries])
    return Settled(adopted, {ti: found[ti] for ti in adopted}, lost)


def record_remarks(session: Session, executor: Executor, *, actor: str, now: datetime) -> None:
    """The executor's remarks about tries (a worker refused a redelivered message) as events. A remark about a try
    of another database (one whose Celery task id is not what this database names the try: workers share the list
    of refusals in Redis) is not this database's to record."""
    remarks = executor.remarks()
    if not remarks:
        return
    identity = identity_store.read(session)
    remarks = [r for r in remarks if r.get("celery_task_id") is None or not isinstance(r.get("ti_id"), int)
               or r["celery_task_id"] == celery_task_id(r["ti_id"], r.get("try_number") or 0, identity.of(r["ti_id"]))]
    found = task_store.subjects(session, [r["ti_id"] for r in remarks if isinstance(r.get("ti_id"), int)])
    rows = []
    for remark in remarks:
        details = {k: v for k, v in remark.items() if k != "kind"}
        dag_id, run_id, task_id, _index = found.get(remark.get("ti_id"), (None, None, None, -1))  # type: ignore[arg-type]
        details["task_id"] = task_id
        rows.append(dict(at=now, kind=remark["kind"], actor=actor, dag_id=dag_id, run_id=run_id, details=details))
    events.record_many(session, rows)
