"""RabbitMQ as the broker (an amqp:// LEDGER_CELERY_BROKER_URL, the result backend on Redis): a private RabbitMQ
node on loopback ports, a `ledger worker` and the real `ledger scheduler`. Skipped where rabbitmq-server is not
installed, except in CI (CI=true), where .ci/run installs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.celery_cluster import Cluster, free_port, wait_for_port
from tests.scheduler.test_celery_executor import ledger, tries, write_dag

pytestmark = pytest.mark.timeout(180)
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # (Debian's; /usr/sbin's wrapper would switch to its own user)


@pytest.fixture
def rabbitmq(tmp_path: Path) -> Iterator[str]:
    """The amqp:// URL of a RabbitMQ node of this test's own (its files under tmp_path, no plugins)."""
    if shutil.which("rabbitmq-server") is None or not os.path.exists(SERVER):
        if os.environ.get("CI") == "true":
            pytest.fail("rabbitmq-server is not installed (.ci/run installs it)")
        pytest.skip("rabbitmq-server is not installed")
    folder = tmp_path / "rabbitmq"
    folder.mkdir()
    (folder / "plugins").write_text("[].\n")
    port = free_port()
    env = {**os.environ, "HOME": str(folder), "RABBITMQ_NODENAME": f"ledger{port}@localhost",
           "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1", "RABBITMQ_NODE_PORT": str(port),
           "RABBITMQ_DIST_PORT": str(free_port()), "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"),
           "RABBITMQ_LOG_BASE": str(folder / "log"), "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "plugins"),
           "RABBITMQ_CONFIG_FILE": str(folder / "none")}
    epmd_before = _epmd("-names")  # (the node starts Erlang's port mapper when none runs: stopped again after)
    with open(folder / "out.log", "wb") as out:
        node = subprocess.Popen([SERVER], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port("127.0.0.1", port, within=60, proc=node)
        yield f"amqp://guest:guest@127.0.0.1:{port}//"
    finally:
        os.killpg(node.pid, 15)
        try:
            node.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, 9)
            node.wait(10)
        if not epmd_before:
            _epmd("-kill")


def _epmd(flag: str) -> bool:
    epmd = shutil.which("epmd") or "/usr/lib/erlang/bin/epmd"
    try:
        return subprocess.run([epmd, flag], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


CHAIN = """
import pendulum
from ledger import DAG, PythonTask

def noop():
    print("ran over amqp")

with DAG("amqp", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 1, 3, tz="UTC"), catchup=True) as dag:
    PythonTask("first", noop) >> PythonTask("second", noop)
"""


def test_tries_run_on_a_worker_through_a_rabbitmq_broker_each_once(cluster: Cluster, rabbitmq: str) -> None:
    write_dag(cluster, "amqp.py", CHAIN)
    backend = {"LEDGER_CELERY_RESULT_BACKEND": cluster.redis.url}
    cluster.start_webserver()
    worker = cluster.start_worker("rabbit", broker=rabbitmq, **backend)
    assert "transport:   amqp://" in cluster.procs.output(worker)  # (Celery's banner: the broker it took)
    done = ledger(cluster, "scheduler", "--executor", "celery", "--exit-when-idle",
                  LEDGER_CELERY_BROKER_URL=rabbitmq, **backend)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = tries(cluster, "amqp")
    assert sorted((task, n, state, host) for task, _run, n, state, host in rows) == sorted(
        (task, 1, "success", "rabbit") for task in ("first", "second") for _ in range(3))
