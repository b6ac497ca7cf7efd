"""Faults of a Celery fleet (issue 40), with real parts: redis-server, ledger's webserver, `ledger worker` processes
and the real `ledger scheduler`. Each try appends `start <task> <try> <pid>` and `end <task> <try>` to a trace file
the test reads: a try runs once, a fault of the fleet is `lost` (no retry spent) and never `failed`, and a try that
was lost is dead before its task's next try starts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from billiard.exceptions import WorkerLostError

from ledger.scheduler.executors.base import TaskEvent
from ledger.scheduler.executors.celery import CeleryExecutor
from ledger.scheduler.executors.celery_app import CeleryConfig, task_id
from ledger.scheduler.runtime.try_lease import TryLease, dead_value, lease_key, taken_value
from tests.celery_cluster import Cluster, RedisServer, free_port
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import ledger, tries, wait_until, write_dag
from tests.scheduler.test_celery_queued_timeout import wait_for
from tests.scheduler.test_celery_sending import items

pytestmark = pytest.mark.timeout(240)

# a try of task $1: for try 2 and later, whether a process an earlier try of the task wrote down (its shell, the
# child it started) is still alive; its start; @BODY@; its end
TRACE_SCRIPT = """T=$1
TRACE=@TRACE@
for p in $(awk -v t="$T" '($1 == "start" || $1 == "child") && $2 == t {print $4}' "$TRACE"); do
  if [ -d /proc/$p ] && ! grep -q '^State:.*Z' /proc/$p/status; then echo "alive $T $p" >> "$TRACE"; fi
done
echo "start $T $LEDGER_TRY_NUMBER $$" >> "$TRACE"
@BODY@
echo "end $T $LEDGER_TRY_NUMBER" >> "$TRACE"
"""
TRACED = """
import pendulum
from ledger import DAG, BashTask

with DAG("traced", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    for i in range(@N@):
        BashTask(f"t{i}", f"bash @SCRIPT@ t{i}")
"""
# the first try starts a child and waits on it (until the test kills something); later tries end at once
FIRST_TRY_HANGS = 'if [ "$LEDGER_TRY_NUMBER" = 1 ]; then sleep 300 & echo "child $T 1 $!" >> "$TRACE"; wait; fi'


def traced_dag(cluster: Cluster, n: int, body: str) -> Path:
    trace = cluster.home.parent / "trace"
    trace.touch()
    script = cluster.home.parent / "traced.sh"
    script.write_text(TRACE_SCRIPT.replace("@TRACE@", str(trace)).replace("@BODY@", body))
    write_dag(cluster, "traced.py", TRACED.replace("@SCRIPT@", str(script)).replace("@N@", str(n)))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "traced").returncode == 0
    return trace


def lines(trace: Path) -> list[list[str]]:
    return [line.split() for line in trace.read_text().splitlines()]


def ran(trace: Path) -> dict[str, list[tuple[str, str]]]:
    """Per task: its (start|end, try number) lines in order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for kind, task, number, *_ in lines(trace):
        if kind in ("start", "end"):
            out.setdefault(task, []).append((kind, number))
    return out


def start_scheduler(cluster: Cluster, **env: str) -> subprocess.Popen[bytes]:
    return cluster.procs.start("scheduler", [LEDGER, "scheduler", "--executor", "celery", "--exit-when-idle"],
                               cluster.scheduler_env(**env), cluster.home)


def lost_reasons(cluster: Cluster) -> list[str]:
    events = json.loads(ledger(cluster, "events", "--dag", "traced", "--kind", "try_lost", "--json").stdout)
    return [e["details"]["reason"] for e in events]


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def dead(pid: int) -> bool:
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True


def test_two_workers_started_on_one_host_without_a_name_get_distinct_names_and_run_each_try_once(
        cluster: Cluster) -> None:
    gate = cluster.home.parent / "gate"  # the tries run until the test writes it
    trace = traced_dag(cluster, 8, f"until [ -f {gate} ]; do sleep 0.05; done")
    cluster.start_webserver()
    host = socket.gethostname()
    home = cluster.home.parent / "worker-home"  # one host, one LEDGER_HOME
    cluster.start_worker(host, named=False, home=home)
    second = cluster.start_worker(f"{host}-2", named=False, home=home)
    assert f"({host} is the name of a live worker (pid " in cluster.procs.output(second)
    listed = json.loads(ledger(cluster, "workers", "--json").stdout)
    assert sorted(w["name"] for w in listed) == [host, f"{host}-2"]
    scheduler = start_scheduler(cluster)
    # four tries run at once, two on each worker, while each worker beats again and the scheduler reads their
    # leases (each worker of a shared name beating over the other made the scheduler declare them lost)
    wait_until("four tries running", lambda: [s for *_, s, _h in tries(cluster, "traced")].count("running") == 4)
    since = time.time()
    wait_until("each worker beats while they run", lambda: sorted(
        w["name"] for w in json.loads(ledger(cluster, "workers", "--json").stdout)
        if w["last_heartbeat"] > since and len(w["leases"]) == 2) == [host, f"{host}-2"])
    assert [s for *_, s, _h in tries(cluster, "traced")].count("running") == 4  # none lost meanwhile
    gate.touch()
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert ran(trace) == {f"t{i}": [("start", "1"), ("end", "1")] for i in range(8)}, trace.read_text()
    rows = tries(cluster, "traced")
    assert sorted((t, n, s) for t, _r, n, s, _h in rows) == [(f"t{i}", 1, "success") for i in range(8)], rows
    assert {h for *_, h in rows} <= {host, f"{host}-2"}


def test_a_name_a_live_worker_holds_is_refused_and_a_restart_after_kill_9_takes_its_name_back(
        cluster: Cluster) -> None:
    cluster.start_webserver()
    slow = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "120"}  # its entry would outlive the test: a restart must not wait
    first = cluster.start_worker("w1", **slow)
    second = cluster.start_worker("w1", wait=False, label="second-w1", **slow)
    assert second.wait(60) != 0
    said = cluster.procs.output(second).strip().splitlines()
    assert len(said) == 1 and "worker name 'w1' is held by a live worker (pid " in said[0], said
    assert "give this one another --hostname" in said[0] and "Traceback" not in said[0]
    cluster.procs.kill9(first)
    again = cluster.start_worker("w1", label="restarted-w1", **slow)  # its predecessor is gone: this is its restart
    assert "is the name of a live worker" not in cluster.procs.output(again)
    assert [w["pid"] for w in json.loads(ledger(cluster, "workers", "--json").stdout)] == [again.pid]


def pids_of(trace: Path, task: str, number: str) -> list[int]:
    return [int(p) for kind, t, n, p in (line[:4] for line in lines(trace) if len(line) >= 4)
            if kind in ("start", "child") and t == task and n == number]


def killed_mid_try(cluster: Cluster, kill: Callable[[dict[str, subprocess.Popen[bytes]], str, list[int]], None]
                   ) -> tuple[Path, list[tuple[str, int, int, str, str | None]], list[str]]:
    """Task t0's first try hangs on two workers until `kill(workers, host, its pids)`; its second ends at once."""
    trace = traced_dag(cluster, 1, FIRST_TRY_HANGS)
    cluster.start_webserver()
    workers = {"w1": cluster.start_worker("w1"), "w2": cluster.start_worker("w2")}
    scheduler = start_scheduler(cluster)
    wait_until("try 1 started its child", lambda: len(pids_of(trace, "t0", "1")) == 2)
    wait_until("try 1 recorded running", lambda: [s for *_, s, _h in tries(cluster, "traced")] == ["running"])
    host = str(tries(cluster, "traced")[0][4])
    kill(workers, host, pids_of(trace, "t0", "1"))
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    rows = tries(cluster, "traced")
    assert ran(trace) == {"t0": [("start", "1"), ("start", "2"), ("end", "2")]}, trace.read_text()
    assert not [line for line in lines(trace) if line[0] == "alive"], trace.read_text()  # dead before try 2
    assert all(dead(pid) for pid in pids_of(trace, "t0", "1"))
    assert [(n, s) for _t, _r, n, s, _h in rows] == [(1, "lost"), (2, "success")], rows
    assert rows[0][4] == host
    return trace, rows, lost_reasons(cluster)


def test_kill_9_of_a_workers_main_process_kills_its_try_before_it_is_recorded_lost_and_retried(
        cluster: Cluster) -> None:
    def kill_main(workers: dict[str, subprocess.Popen[bytes]], host: str, _pids: list[int]) -> None:
        os.kill(workers[host].pid, signal.SIGKILL)  # the PID a user sees; not its process group

    _trace, rows, reasons = killed_mid_try(cluster, kill_main)
    assert rows[1][4] != rows[0][4]  # the other worker
    (reason,) = reasons
    assert "main process" in reason and "died" in reason and "spends no retry" in reason, reason


def test_kill_9_of_the_pool_process_running_a_try_records_it_lost_without_spending_a_retry(
        cluster: Cluster) -> None:
    def kill_pool(workers: dict[str, subprocess.Popen[bytes]], host: str, pids: list[int]) -> None:
        process = pids[0]  # the try's shell; up its parents to the worker's pool process (a child of its main)
        while (parent := parent_of(process)) != workers[host].pid:
            process = parent
        os.kill(process, signal.SIGKILL)

    _trace, _rows, reasons = killed_mid_try(cluster, kill_pool)
    (reason,) = reasons
    assert "the pool process running it" in reason and "died" in reason and "spends no retry" in reason, reason


def test_code_the_webserver_cannot_give_makes_tries_lost_not_failed_and_spends_no_retry(cluster: Cluster) -> None:
    trace = traced_dag(cluster, 1, "true")
    cluster.start_worker("w1", api_url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
                         LEDGER_WORKER_CODE_FETCH_PATIENCE="0.1")
    scheduler = start_scheduler(cluster, LEDGER_MAX_LOST_TRIES="2")
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "lost"), (2, "lost")]
    assert trace.read_text() == ""  # none of the task's code ran
    reasons = lost_reasons(cluster)
    assert len(reasons) == 2 and all("cannot fetch the code of traced" in r and "refused" in r for r in reasons)
    assert "2 tries lost in a row (LEDGER_MAX_LOST_TRIES), so the task fails" in reasons[1]


def test_code_the_webserver_refuses_makes_tries_lost_at_once_not_failed(cluster: Cluster) -> None:
    trace = traced_dag(cluster, 1, "true")
    cluster.start_webserver()
    worker = cluster.start_worker("w1", LEDGER_WORKER_TOKEN="not-the-workers-token")  # an operator's typo: 401
    scheduler = start_scheduler(cluster, LEDGER_MAX_LOST_TRIES="2")
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "lost"), (2, "lost")]
    assert trace.read_text() == ""
    reasons = lost_reasons(cluster)
    assert len(reasons) == 2 and all("cannot fetch the code of traced" in r and "HTTP 401" in r for r in reasons)
    assert "asking again" not in cluster.procs.output(worker)  # the same answer again would not help


def test_a_try_whose_webserver_comes_back_within_the_patience_runs_as_its_first_try(cluster: Cluster) -> None:
    trace = traced_dag(cluster, 1, "true")
    port = free_port()
    worker = cluster.start_worker("w1", api_url=f"http://127.0.0.1:{port}")
    scheduler = start_scheduler(cluster)
    wait_until("the worker asks again", lambda: "asking again with back-off" in cluster.procs.output(worker))
    cluster.start_webserver(port=port)
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}


def test_an_outcome_whose_write_meets_a_redis_restart_is_kept_and_recorded_as_the_try_ended(
        cluster: Cluster) -> None:
    go = cluster.home.parent / "go"
    trace = traced_dag(cluster, 1, f"while [ ! -f {go} ]; do sleep 0.05; done; echo finished")
    cluster.start_webserver()
    patient = {"LEDGER_WORKER_HEARTBEAT_TIMEOUT": "60"}  # leases outlast the restart: this test is about outcomes
    worker = cluster.start_worker("w1", **patient)
    scheduler = start_scheduler(cluster, **patient)
    wait_until("the try runs", lambda: ran(trace) == {"t0": [("start", "1")]})
    wait_until("it is recorded running", lambda: [s for *_, s, _h in tries(cluster, "traced")] == ["running"])
    cluster.redis.stop()
    go.touch()  # the try ends while Redis is down
    wait_until("the worker keeps its outcome", lambda: "kept here until Redis answers" in cluster.procs.output(worker))
    cluster.redis.start()
    assert scheduler.wait(120) == 0, cluster.procs.output(scheduler)
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "traced")] == [(1, "success")]
    assert ran(trace) == {"t0": [("start", "1"), ("end", "1")]}
    log = (cluster.home / "logs" / "traced" / "run_1" / "t0" / "try_1.log").read_text()
    assert "\nfinished\n" in log and "outcome: success" in log, log
    said = cluster.procs.output(scheduler)
    assert "celery executor: reading the tries' states from Redis fails (" in said, said
    assert "celery executor: reading the tries' states from Redis works again" in said, said


def test_a_lease_fences_its_try_when_it_is_taken_or_cannot_be_renewed(tmp_path: Path,
                                                                       redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    fenced = {name: threading.Event() for name in ("taken", "unreachable")}
    leases = {name: TryLease(client, f"ledger-{i}-1", f'{{"by":"{name}"}}', 3.0, fenced[name].set, os.getppid())
              for i, name in enumerate(fenced)}
    for lease in leases.values():
        assert lease.renew()
        lease.start()
    client.set(lease_key("ledger-0-1"), taken_value("declared lost"))
    assert fenced["taken"].wait(10) and not fenced["unreachable"].is_set()
    assert leases["taken"].fenced == "its lease was taken by the scheduler"
    redis_server.stop()
    assert fenced["unreachable"].wait(20)
    assert "could not be renewed within 3 s" in str(leases["unreachable"].fenced)
    for lease in leases.values():
        lease.stop()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started_try(executor: CeleryExecutor, tmp_path: Path, ti_id: int) -> str:
    """A try submitted (to a queue no worker serves) and reported started by worker w1, as a worker does."""
    (item,) = items(tmp_path, ti_id)
    executor.submit_all([item])
    tid = task_id(ti_id, 1, "")
    executor._app.backend.store_result(tid, {"host": "w1", "pid": 7, "at": time.time()}, "STARTED")
    return tid


def finished(executor: CeleryExecutor) -> TaskEvent:
    seen: list[TaskEvent] = []
    wait_for("the try's end", lambda: seen.extend(executor.drain()) or any(e.kind == "finished" for e in seen),
             within=15.0)
    return next(e for e in seen if e.kind == "finished")


def test_a_pool_process_lost_by_celery_ends_its_try_lost_when_its_lease_says_it_is_dead_not_failed_before(
        tmp_path: Path, redis_server: RedisServer) -> None:
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    backend = redis.Redis.from_url(redis_server.url)
    try:
        tid = started_try(executor, tmp_path, 5)
        executor._app.backend.mark_as_failure(tid, WorkerLostError("Worker exited prematurely: signal 9 (SIGKILL)"))
        backend.set(lease_key(tid), dead_value("the pool process running it (pid 9) died; its processes were killed"))
        ended = finished(executor)
        assert (ended.state, ended.reason) == ("lost", "the pool process running it (pid 9) died; its processes "
                                                        "were killed")
    finally:
        executor.end(0)


def test_an_error_of_the_workers_own_machinery_ends_the_try_lost_not_failed(tmp_path: Path,
                                                                          redis_server: RedisServer) -> None:
    executor = CeleryExecutor(2, CeleryConfig(redis_server.url, redis_server.url, heartbeat_timeout=600))
    executor.start()
    try:
        tid = started_try(executor, tmp_path, 6)
        executor._app.backend.mark_as_failure(tid, redis.ConnectionError("Connection refused"))
        ended = finished(executor)
        assert (ended.state, ended.reason) == ("lost", "the worker's task raised ConnectionError: Connection refused")
    finally:
        executor.end(0)
