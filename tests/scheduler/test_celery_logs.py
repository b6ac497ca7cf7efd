"""A remote try's log read from anywhere while it runs, and variables and connections on a worker: a real
redis-server, ledger's webserver, a real `ledger worker` with no database, the real `ledger scheduler`, and readers
in a LEDGER_HOME of their own (not the scheduler's logs folder) that reach only the database and the broker."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests import launcher
from tests.celery_cluster import BROKER, Cluster, _env, free_port, wait_for_port
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import ledger, start_scheduler, tries, wait_until, write_dag

pytestmark = pytest.mark.timeout(180)

WAITS = """
import os
import time
import pendulum
from ledger import DAG, PythonTask
from ledger.services.secrets import Variable, get_connection

def wait():
    conn = get_connection("warehouse")
    print("greeting", Variable.get("greeting"), "to", conn.login, "at", conn.host, conn.port)
    print("password", conn.password, "and", Variable.get("api_password"))
    print("missing", Variable.get("not_set", default_var="fallback"))
    print("token", os.environ["LEDGER_WORKER_TOKEN"])
    print("waiting", flush=True)
    for _ in range(600):
        if os.path.exists("@GO@"):
            break
        time.sleep(0.1)
    print("released")

with DAG("waits", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("wait", wait)
"""


def reader_env(cluster: Cluster, home: Path) -> dict[str, str]:
    """A host that reaches the database and the broker, and has logs folder of its own (empty)."""
    return _env(home, LEDGER_DATABASE_URL=f"sqlite:///{cluster.home / 'ledger.db'}", **{BROKER: cluster.redis.url})


def read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())


def test_a_running_remote_trys_log_is_read_from_another_home_and_its_variables_come_from_the_api(
        cluster: Cluster, tmp_path: Path) -> None:
    go = tmp_path / "go"
    write_dag(cluster, "waits.py", WAITS.replace("@GO@", str(go)))
    for args in (("variables", "set", "greeting", "hello"), ("variables", "set", "api_password", "s3cr3t-value"),
                 ("connections", "add", "warehouse", "--uri", "postgresql://bob:pw-123456@db.example:5432/sales"),
                 ("dags", "list"), ("trigger", "waits")):
        done = ledger(cluster, *args)
        assert done.returncode == 0, done.stdout + done.stderr
    cluster.start_webserver()
    cluster.start_worker("w1")
    scheduler = start_scheduler(cluster)
    wait_until("the try runs", lambda: [(n, s, h) for _t, _r, n, s, h in tries(cluster, "waits")] == [
        (1, "running", "w1")])
    elsewhere = tmp_path / "reader"
    elsewhere.mkdir()
    env = reader_env(cluster, elsewhere)
    follow = cluster.procs.start("follow", [LEDGER, "tasks", "logs", "waits", "1", "wait", "--follow"], env, elsewhere)
    wait_until("the log followed from the other home", lambda: "\nwaiting\n" in cluster.procs.output(follow))
    once = launcher.run([LEDGER, "tasks", "logs", "waits", "1", "wait"], env=env, cwd=elsewhere,
                        capture_output=True, text=True, timeout=60)
    assert once.returncode == 0 and "try 1/1: running" in once.stdout and "\nwaiting\n" in once.stdout, once
    assert "greeting hello to bob at db.example 5432\n" in once.stdout  # served by the API to the worker's try
    assert "missing fallback\n" in once.stdout
    # the web view of that other home: its page, the API's page and the follow from an offset
    port = free_port()
    web = cluster.procs.start("reader-web", [LEDGER, "webserver", "--port", str(port)], env, elsewhere)
    wait_for_port("127.0.0.1", port, proc=web)
    page = json.loads(read(f"http://127.0.0.1:{port}/api/v1/runs/1/tasks/wait/tries/1/log"))
    assert page["ended"] is False and "\nwaiting\n" in page["text"] and page["next_offset"] == page["size"]
    html = read(f"http://127.0.0.1:{port}/runs/1/tasks/wait/tries/1/log")
    assert "waiting" in html and "ledger:log:ledger-" in html, html  # it says where it read the log
    live = urllib.request.Request(f"http://127.0.0.1:{port}/runs/1/tasks/wait/tries/1/log?after=0",
                                  headers={"X-Ledger-Live": "1"})  # the page's follow
    with urllib.request.urlopen(live, timeout=30) as answer:
        part = answer.read().decode()
    assert 'data-done="0"' in part and "\nwaiting\n" in part and f'data-next="{page["size"]}"' in part, part
    go.touch()
    assert scheduler.wait(60) == 0, cluster.procs.output(scheduler)
    assert follow.wait(30) == 0
    assert "\nreleased\n" in cluster.procs.output(follow)  # followed to the end
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "waits")] == [(1, "success")]
    after = json.loads(read(f"http://127.0.0.1:{port}/api/v1/runs/1/tasks/wait/tries/1/log"))
    assert after["ended"] is True and "\nreleased\n" in after["text"]  # (kept in the database now)
    kept = launcher.run([LEDGER, "tasks", "logs", "waits", "1", "wait"], env=env, cwd=elsewhere,
                        capture_output=True, text=True, timeout=60)  # from the database now
    assert kept.returncode == 0 and "outcome: success" in kept.stdout, kept
    # the secrets the try read are masked in what was kept, here and on the scheduler's host, as for local tries
    local = (cluster.home / "logs" / "waits" / "run_1" / "wait" / "try_1.log").read_text()
    for text in (kept.stdout, local, read(f"http://127.0.0.1:{port}/runs/1/tasks/wait/tries/1/log/download")):
        assert "password *** and ***\n" in text and "s3cr3t" not in text and "pw-123456" not in text, text
        assert "token ***\n" in text and cluster.token not in text  # (the worker's own credential too)
