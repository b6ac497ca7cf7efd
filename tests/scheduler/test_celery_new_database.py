"""A database made again against the same Redis (its ids start at 1 again) runs its own tries: the keys another
database's tries left in Redis (claims, states, leases, logs, kept for days) are never taken for its own, because
every try's task id carries its database's identity (migration 0015, decision 0344). The real `ledger` CLI, a real
redis-server, webserver and `ledger worker`."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.celery_cluster import Cluster
from tests.scheduler.test_celery_executor import ledger, query, tries, write_dag

pytestmark = pytest.mark.timeout(180)

NOTE = """
import pendulum
from ledger import DAG, PythonTask

def note():
    with open({trace!r}, "a") as out:
        out.write("ran\\n")
    print("the note was written")

with DAG("again", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("note", note)
"""


def trigger_and_run(cluster: Cluster) -> None:
    for args in (("dags", "list"), ("trigger", "again"), ("scheduler", "--executor", "celery", "--exit-when-idle")):
        done = ledger(cluster, *args)
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_database_made_again_against_the_same_redis_runs_its_tries_and_takes_none_of_the_old_ones(
        cluster: Cluster, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    write_dag(cluster, "again.py", NOTE.format(trace=str(trace)))
    web = cluster.start_webserver()
    cluster.start_worker("w1")
    trigger_and_run(cluster)
    assert trace.read_text() == "ran\n"
    [(first,)] = query(cluster, "SELECT identity FROM database_identity")

    # the operator makes the database again, as the docs say (the file removed, `ledger db upgrade`), and restarts
    # the webserver on it; Redis and the worker keep running with what the first database's try left there
    web.send_signal(signal.SIGTERM)
    web.wait(30)
    for leftover in cluster.home.glob("ledger.db*"):
        leftover.unlink()
    made = ledger(cluster, "db", "upgrade")
    assert made.returncode == 0 and "from empty to" in made.stdout, made.stdout + made.stderr
    [(second, legacy_through)] = query(cluster, "SELECT identity, legacy_through FROM database_identity")
    assert second != first and legacy_through == 0  # a new database: every task id carries its identity
    cluster.start_webserver(port=cluster.web_port)
    trigger_and_run(cluster)

    assert trace.read_text() == "ran\nran\n"  # the new database's try ran: its state is not the old try's
    assert tries(cluster, "again") == [("note", 1, 1, "success", "w1")]
    log = ledger(cluster, "tasks", "logs", "again", "1", "note")
    # its log is its own: the first database's try, at the same path on the worker, is not in it
    assert log.returncode == 0 and log.stdout.count("the note was written") == 1, log.stdout + log.stderr
