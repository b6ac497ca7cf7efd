"""Queueing tries: the ready task instances that parallelism, max_active_tasks, pools and their tasks' own limits
(max_active_tis_per_dag, max_active_tis_per_dagrun) let through get their next try number (a guarded write) and a
WorkItem with everything the try needs (its code, values passed on, its signal, dataset events, templates' dates);
the job follows each in its `inflight` record until it ends."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.mapping import NOT_MAPPED, label
from ledger.core.signals import Signal
from ledger.core.versions import DagSpec
from ledger.infra.logs import log_file
from ledger.models import DagRun
from ledger.scheduler.executors.base import WorkItem
from ledger.scheduler.loop import dataset_runs
from ledger.scheduler.loop.loop_report import LoopReport
from ledger.scheduler.loop.planner import choose
from ledger.scheduler.runtime.try_item import RunGives, work_item
from ledger.sdk.xcom import pull_view
from ledger.store import dags as dag_store
from ledger.store import signals as signal_store
from ledger.store import tasks as task_store

Job = Any  # a DagRunJob (scheduler/loop/job.py), which imports this module: typed there; importing it here
# (even for types) would make a cycle



@dataclass
class InFlight:
    run_id: int
    dag_id: str
    task_id: str
    retry_delay: float
    dag_version: str = ""
    log_path: str = ""
    queued_at: float = 0.0  # wall time the try was handed to the executor (for the task lag metric)
    started: bool = False
    map_index: int = NOT_MAPPED
    armed: bool = False  # a signal's START armed it, and this try used the arm up

    @property
    def label(self) -> str:
        return label(self.task_id, self.map_index)


def task_rooms(session: Session, candidates: list[tuple[task_store.TiRow, DagRun, DagSpec]],
               dag_of: Mapping[int, str]) -> tuple[dict[tuple[str, str], int], dict[tuple[int, str], int], set[int]]:
    """For planner.choose: how many more instances of each candidate's task may be queued, over its DAG's runs
    (max_active_tis_per_dag) and within its run (max_active_tis_per_dagrun), read from what every job has queued
    or running now, and the candidates they hold back; only for tasks whose version declares a limit (nothing is
    read otherwise). A candidate's version is its task instance's own when it has one (cleared to run the latest,
    decision 0271), else its run's; a task whose versions differ in its limit takes the lowest."""
    per_dag: dict[tuple[str, str], int] = {}
    per_run: dict[tuple[int, str], int] = {}
    limited: set[int] = set()
    for ti, _run, spec in candidates:
        if ti.version is not None and ti.version != spec.version_hash:
            spec = dag_store.spec(session, dag_of[ti.run_id], ti.version)
        limits = spec.task_limits.get(ti.task_id) if spec.task_limits else None
        if limits is None:
            continue
        limited.add(ti.id)
        dag_limit, run_limit = limits
        if dag_limit is not None:
            key = (dag_of[ti.run_id], ti.task_id)
            per_dag[key] = min(per_dag.get(key, dag_limit), dag_limit)
        if run_limit is not None:
            pair = (ti.run_id, ti.task_id)
            per_run[pair] = min(per_run.get(pair, run_limit), run_limit)
    if per_dag:
        counts = task_store.active_counts_by_task(session, per_dag, lock=True)  # (it queues next)
        per_dag = {key: limit - counts.get(key, 0) for key, limit in per_dag.items()}
    if per_run:
        in_runs = task_store.active_counts_in_runs(session, per_run)
        per_run = {pair: limit - in_runs.get(pair, 0) for pair, limit in per_run.items()}
    return per_dag, per_run, limited


def queue_tries(job: Job, session: Session, candidates: list[tuple[task_store.TiRow, DagRun, DagSpec]],
                now: datetime, report: LoopReport, known: Mapping[int, Signal] | None = None,
                read_pools: bool = False) -> list[WorkItem]:
    """Queue the candidates that parallelism, max_active_tasks and pools let through; their WorkItems.
    `known`: signals already read, by id (the armed ones' signals are read only when missing); `read_pools`:
    read the pools' slots again in this transaction (a pool may have changed since the last loop)."""
    known = known or {}
    if read_pools:
        job.facts.pool_slots = None
    # (tries this transaction adopted are followed once it commits: a remote one then takes a slot too)
    slots = job.executor.open_slots() - len(job.effects.follow)
    if not candidates or slots <= 0:
        return []
    dates, dag_of = job.facts.dates_of(candidates)
    active = job.facts.active_counts(session, candidates, slots=slots, dag_of=dag_of, mark=job.quiet_mark(session))
    task_room, run_task_room, limited = task_rooms(session, candidates, dag_of)
    pools = job.facts.pools(session)  # (the limits' locks in their order: DAGs, tasks, then pools; decision 0363)
    pool_room = task_store.pool_room(session, {p: pools[p] for p in {c[0].pool for c in candidates} if p in pools},
                                     lock=True)
    chosen = choose(candidates, slots=slots, pool_room=pool_room,
                    active=active, newest_first=job.newest_first, dates=dates, dag_of=dag_of,
                    task_room=task_room, run_task_room=run_task_room, limited=limited)
    tries = task_store.queue(session, [c[0] for c in chosen], job_id=job.job_id, now=now,
                             versions={c[0].id: c[0].version or c[1].version_hash for c in chosen})
    job.facts.queued(dag_of[c[0].run_id] for c in chosen)
    for ti, run, _spec in chosen:
        pending = job.memory.settled.get(run.id)
        if pending is not None:
            job.memory.settled[run.id] = [c for c in pending if c[0].id != ti.id]
        picture = job.memory.pictures.get(run.id)
        if picture is not None:  # as task_store.queue wrote it
            job.memory.wrote(picture.run.id, ti.queued(tries[ti.id], job.job_id))
    report.queued = len(chosen)
    # a START is used up by the try it started (task_store.queue); the try sees its signal
    wanted = {c[0].signal_id for c in chosen if c[0].armed and c[0].signal_id is not None}
    signals = {i: known[i] for i in wanted if i in known}
    if len(signals) < len(wanted):
        signals.update(signal_store.by_ids(session, wanted - set(signals)))
    passed = {i: pull_view(v)
              for i, v in job.facts.passed_values(session, {run.id for _ti, run, _s in chosen}).items()}
    previous = job.facts.run_intervals(session, {run.previous_run_id for _ti, run, _s in chosen
                                             if run.previous_run_id is not None})
    triggering = dataset_runs.triggering_events(session, [run for _ti, run, _s in chosen])
    inlets = dataset_runs.inlet_events(session, chosen, tries, now=now, actor=job.actor)
    prior = job.facts.prior_successes(session, {run.id: run for _ti, run, _s in chosen}.values())  # prev_*_success
    work = []
    logs = str(job.logs_folder)
    for ti, run, spec in chosen:
        task = spec.tasks[ti.task_id]
        version = ti.version or run.version_hash  # a task instance cleared on the latest version runs that one
        code = job.code_cache().locate(session, run.dag_id, version)
        path = log_file(logs, run.dag_id, run.id, ti.task_id, tries[ti.id], ti.map_index)
        job.effects.queued[ti.id] = InFlight(  # followed once the transaction commits
            run.id, run.dag_id, ti.task_id, task.delay_after(tries[ti.id]), version, path, time.time(),
            map_index=ti.map_index, armed=ti.armed)
        gives = RunGives(
            run_id=run.id, dag_id=run.dag_id, logical_date=run.logical_date,
            data_interval_start=run.data_interval_start, data_interval_end=run.data_interval_end,
            dag_version=version, run_type=run.run_type,
            fileloc=code.fileloc if code is not None else job.facts.dag_file(session, run.dag_id),
            code_root=code.root if code is not None else None,
            code_captured=code.captured if code is not None else False, conf=run.conf or {},
            prev_interval=previous.get(run.previous_run_id) if run.previous_run_id is not None else None,
            prev_success=prior.get(run.id), triggering_events=triggering.get(run.id),
            started=run.started_at.isoformat() if run.started_at is not None else None)
        work.append(work_item(
            gives, task, ti_id=ti.id, try_number=tries[ti.id], map_index=ti.map_index, log_path=path,
            xcom=passed.get(run.id, {}), inlet_events=inlets.get(ti.id), priority_weight=ti.priority_weight,
            signal=signals[ti.signal_id].as_json() if ti.armed and ti.signal_id in signals else None,
            database=job.facts.database(session, ti.id), max_tries=ti.max_tries))
    return work
