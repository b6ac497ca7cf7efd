"""`ledger backfill DAG ... --downstream`: the consumer runs a backfill's rewrites re-run, DAG by DAG in
dependency order (ledger.core.dataset_rules.downstream_plan), for the plan a dry run shows.

The re-runs themselves are made by the scheduler (scheduler/loop/dataset_runs.py) as each rewritten partition is
written: the backfill's runs record their events as rewrites to send on, a consumer run that read the old
partition is overridden by a new run that records the event that caused it, and what that run writes is sent on
in turn. So a consumer never re-runs before the rewrite it reads exists.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.backfill_plan import Action, PlanItem
from ledger.core.dataset_rules import (
    Consumer,
    DownstreamItem,
    downstream_plan,
    leaf_keys,
    partitioning_of,
    partitions_from,
)
from ledger.core.versions import DagSpec
from ledger.store import dags as dag_store
from ledger.store import datasets as dataset_store


def consumers(specs: Sequence[DagSpec]) -> list[Consumer]:
    """The DAGs scheduled on partitioned datasets, with the partitioned datasets their tasks write."""
    found = []
    for spec in specs:
        if spec.datasets is None:
            continue
        parts = partitioning_of(spec.datasets["condition"])
        if parts is None:
            continue
        inputs = frozenset(k.split(":", 1)[1] for k in leaf_keys(spec.datasets["condition"])
                           if k.startswith("dataset:"))
        found.append(Consumer(spec.dag_id, inputs, _outputs(spec), parts))
    return found


def _outputs(spec: DagSpec) -> frozenset[str]:
    return frozenset(str(o["dataset"]) for t in spec.tasks.values() for o in t.outlets
                     if "dataset" in o and o.get("partitions"))


def rewritten(spec: DagSpec, plan: Sequence[PlanItem]) -> dict[str, list[str]]:
    """dataset -> the partitions the backfill's runs rewrite (those of their data intervals)."""
    out: dict[str, list[str]] = {}
    todo = sorted((i.interval for i in plan if i.action != Action.SKIP), key=lambda i: i.start)
    if not todo:
        return out
    for t in spec.tasks.values():
        for o in t.outlets:
            parts = partitions_from(o.get("partitions"))
            if "dataset" not in o or parts is None:
                continue
            # the partitions of the whole range once, then those of each run's interval (walking each
            # interval on its own costs a schedule walk per date)
            grid = parts.starting(todo[0].start, max(i.end for i in todo))
            starts = [g[0] for g in grid]
            keys = out.setdefault(str(o["dataset"]), [])
            for iv in todo:
                lo, hi = bisect.bisect_left(starts, iv.start), bisect.bisect_left(starts, iv.end)
                keys.extend(k for _s, k in grid[lo:hi]) if hi > lo else keys.extend(parts.within(iv.start, iv.end))
    return {d: list(dict.fromkeys(ps)) for d, ps in out.items()}


def plan_downstream(session: Session, spec: DagSpec, plan: Sequence[PlanItem]) -> list[dict[str, Any]]:
    """Every consumer DAG and date the backfill re-runs, in dependency order, with the live run each overrides; a
    paused consumer's are there too, marked `paused` (the scheduler makes them once the DAG is unpaused)."""
    specs = [dag_store.spec(session, dag_id, version)
             for dag_id, version, _ in dag_store.schedulable(session, paused=True) if dag_id != spec.dag_id]
    items = downstream_plan(rewritten(spec, plan), consumers(specs))
    dag_ids = {i.dag_id for i in items}
    live = {dag_id: dataset_store.live_runs(session, dag_id) for dag_id in dag_ids}
    paused = dag_store.paused_ids(session, dag_ids)
    return [item_json(i, live[i.dag_id].get(i.logical_date), paused=i.dag_id in paused) for i in items]


def item_json(i: DownstreamItem, run: tuple[int, int | None] | None, *, paused: bool = False) -> dict[str, Any]:
    return {"dag_id": i.dag_id, "partition": i.partition, "logical_date": i.logical_date.isoformat(),
            "depth": i.depth, "because": {"dataset": i.because[0], "partition": i.because[1]},
            "action": "override" if run is not None else "new",
            "replaces_run_id": None if run is None else str(run[0]), "paused": paused}
