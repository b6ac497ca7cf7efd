"""Tries that outlive their job (the CeleryExecutor's, on remote workers), and tries whose code ended before their
job died (any executor's: their report is on this host, decision 0298): adopted by the job that takes their runs
over, instead of being recorded lost; and the executor's remarks (a refused redelivery) written as events.

A job that claims runs from a job that died finds that job's queued and running tries (task_store.orphaned). It
offers them to its executor (Executor.adopt): the ones the executor can follow become this job's (their task
instances' job_id, guarded on their state and try number) and are followed as if this job had queued them; an
event `try_adopted` says so. A local try's process died with its job, so the LocalExecutor and SequentialExecutor
follow only a try that left its whole report beside its log as its code ended: its end, that report, comes with the
executor's next drain and is recorded like any other. The rest are lost, as before.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.states import TaskState
from ledger.infra.logs import log_file
from ledger.scheduler.executors.base import Executor, WorkItem
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import tasks as task_store


def adopt(session: Session, executor: Executor, orphans: list[tuple[int, int, int]], *, job_id: int, logs: str,
          actor: str, now: datetime) -> tuple[list[tuple[int, int, int]], dict[int, dict[str, Any]]]:
    """(the orphans not adopted, ti id -> the fields of the job's in-flight entry for each adopted try)."""
    rows = {r.ti_id: r for r in task_store.adoptable(session, [ti for ti, _tn, _run in orphans])}
    offered: list[tuple[WorkItem, bool]] = []
    infos: dict[int, dict[str, Any]] = {}
    for ti, tn, _run in orphans:
        row = rows.get(ti)
        if row is None or row.try_number != tn:
            continue
        spec = dag_store.spec(session, row.dag_id, row.version_hash)
        task = spec.tasks.get(row.task_id)
        if task is None:
            continue
        path = log_file(logs, row.dag_id, row.run_id, row.task_id, tn, row.map_index)
        offered.append((WorkItem(
            ti_id=ti, run_id=row.run_id, dag_id=row.dag_id, task_id=row.task_id, try_number=tn, fileloc="",
            logical_date=row.logical_date, data_interval_start=row.data_interval_start,
            data_interval_end=row.data_interval_end, dag_version=row.version_hash, run_type=row.run_type,
            log_path=path, map_index=row.map_index, queue=task.queue, priority_weight=row.priority_weight),
            row.state == TaskState.RUNNING))
        infos[ti] = dict(run_id=row.run_id, dag_id=row.dag_id, task_id=row.task_id,
                         retry_delay=task.delay_after(tn), dag_version=row.version_hash, log_path=path,
                         started=row.state == TaskState.RUNNING, map_index=row.map_index)
    adopted = executor.adopt(offered) if offered else set()
    if not adopted:
        return orphans, {}
    task_store.adopt(session, [(ti, tn) for ti, tn, _run in orphans if ti in adopted], job_id=job_id)
    events.record_many(session, [
        dict(at=now, kind="try_adopted", actor=actor, dag_id=infos[ti]["dag_id"], run_id=run,
             details={"task_id": infos[ti]["task_id"], "ti_id": ti, "try_number": tn, "job_id": job_id})
        for ti, tn, run in orphans if ti in adopted])
    return [o for o in orphans if o[0] not in adopted], {ti: infos[ti] for ti in adopted}


def record_remarks(session: Session, executor: Executor, *, actor: str, now: datetime) -> None:
    """The executor's remarks about tries (a worker refused a redelivered message) as events."""
    remarks = executor.remarks()
    if not remarks:
        return
    found = task_store.subjects(session, [r["ti_id"] for r in remarks if isinstance(r.get("ti_id"), int)])
    rows = []
    for remark in remarks:
        details = {k: v for k, v in remark.items() if k != "kind"}
        dag_id, run_id, task_id, _index = found.get(remark.get("ti_id"), (None, None, None, -1))  # type: ignore[arg-type]
        details["task_id"] = task_id
        rows.append(dict(at=now, kind=remark["kind"], actor=actor, dag_id=dag_id, run_id=run_id, details=details))
    events.record_many(session, rows)
