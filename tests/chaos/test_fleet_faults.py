"""Faults of a Celery fleet injected one at a time (issue 40), each run checked whole by the fleet's invariants
(tests/chaos/fleet_invariants.py): real redis-server, ledger's webserver, `ledger worker` processes and the real
`ledger scheduler`. Every try of the traced DAG waits for the file `go` the test writes once it has made its
fault, so the fault always meets running tries."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import redis

from scheduler.executors.celery_app import task_id
from tests.celery_cluster import Cluster
from tests.chaos import faults
from tests.chaos.fleet_invariants import check, read_trace
from tests.chaos.traced import traced_dag
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import ledger, tries, wait_until, write_dag

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def traced(cluster: Cluster, tasks: int, dag_id: str = "chaos", **kw: object) -> tuple[Path, Path]:
    """The traced DAG in the scheduler's DAGs folder, registered and triggered: its trace file and its go file."""
    trace, go = cluster.home.parent / "trace", cluster.home.parent / "go"
    trace.touch()
    write_dag(cluster, f"{dag_id}.py", traced_dag(dag_id, trace, tasks=tasks, go=go, **kw))  # type: ignore[arg-type]
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", dag_id).returncode == 0
    return trace, go


def start_scheduler(cluster: Cluster, name: str = "scheduler", **env: str) -> subprocess.Popen[bytes]:
    return cluster.procs.start(name, [LEDGER, "scheduler", "--executor", "celery", "--exit-when-idle"],
                               cluster.scheduler_env(**env), cluster.home)


def executions(trace: Path) -> int:
    by_ti, _alive = read_trace(trace)
    return sum(len(runs) for runs in by_ti.values())


def states(cluster: Cluster, dag_id: str = "chaos") -> list[tuple[str, int, str]]:
    return [(task, number, state) for task, _run, number, state, _host in tries(cluster, dag_id)]


def running(cluster: Cluster, n: int, dag_id: str = "chaos") -> bool:
    return [s for *_, s in states(cluster, dag_id)] == ["running"] * n


def events(cluster: Cluster, kind: str, dag_id: str = "chaos") -> list[dict[str, object]]:
    return list(json.loads(ledger(cluster, "events", "--dag", dag_id, "--kind", kind, "--json").stdout))


def holds_invariants(cluster: Cluster, trace: Path, dag_ids: tuple[str, ...] = ("chaos",)) -> None:
    report = check(trace, cluster.home / "ledger.db", list(dag_ids))
    assert not report.broken, "\n".join([*report.broken, trace.read_text()])


def test_a_fleet_without_faults_holds_every_invariant_and_a_failure_of_the_code_spends_its_retry(
        cluster: Cluster) -> None:
    trace, go = traced(cluster, 3, fail_first=("t1",))
    go.touch()
    cluster.start_webserver()
    cluster.start_worker("w1")
    scheduler = start_scheduler(cluster)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert sorted(states(cluster)) == [("t0", 1, "success"), ("t1", 1, "failed"), ("t1", 2, "success"),
                                       ("t2", 1, "success")]
    holds_invariants(cluster, trace)
