"""Remote tries' logs kept in an S3-compatible store (LEDGER_REMOTE_LOGS) instead of the database: a real S3 server
on loopback (moto's `moto_server`, from the test extra; the tests skip without it, and fail in CI), the real
scheduler, worker and readers."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledger.scheduler.loop import remote_logs
from ledger.scheduler.runtime.try_report import TryReport
from ledger.services.log_store import RemoteLogStore
from tests import launcher
from tests.celery_cluster import Cluster, free_port, wait_for_port
from tests.conftest import LEDGER
from tests.scheduler.test_celery_executor import SLOW, ledger, tries, write_dag

pytestmark = pytest.mark.timeout(180)

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str

    def env(self, bucket: str = "logs", prefix: str = "ledger") -> dict[str, str]:
        return {"LEDGER_REMOTE_LOGS": f"s3://{bucket}/{prefix}", "LEDGER_REMOTE_LOGS_ENDPOINT": self.endpoint,
                **CREDENTIALS}

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on a private loopback port, with a bucket `logs`."""
    found = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or shutil.which("moto_server")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("moto_server is not installed (the test extra installs moto[server])")
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    port = free_port()
    log = open(tmp_path_factory.mktemp("s3") / "moto.log", "wb")  # noqa: SIM115 (the server writes to it)
    proc = subprocess.Popen([found, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    log.close()
    try:
        wait_for_port("127.0.0.1", port, proc=proc)
        server = S3Server(f"http://127.0.0.1:{port}")
        server.client().create_bucket(Bucket="logs")
        yield server
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_remote_trys_log_goes_to_the_store_and_every_reader_reads_it_there(
        cluster: Cluster, s3_server: S3Server, tmp_path: Path) -> None:
    write_dag(cluster, "far.py", SLOW.replace("slow", "far").replace("@N@", "1").replace("@SECONDS@", "0"))
    assert ledger(cluster, "dags", "list").returncode == 0
    assert ledger(cluster, "trigger", "far").returncode == 0
    cluster.start_webserver()
    cluster.start_worker("w1")
    done = ledger(cluster, "scheduler", "--executor", "celery", "--exit-when-idle", **s3_server.env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(n, s) for _t, _r, n, s, _h in tries(cluster, "far")] == [(1, "success")]
    with sqlite3.connect(cluster.home / "ledger.db") as db:
        assert db.execute("SELECT count(*) FROM try_log").fetchone() == (0,)  # not in the database
    stored = s3_server.client().get_object(Bucket="logs", Key="ledger/far/run_1/t0/try_1.log")["Body"].read()
    assert b"\nbegun\n" in stored and b"outcome: success" in stored
    elsewhere = tmp_path / "reader"  # another host: the database and the store, no logs folder, no broker
    elsewhere.mkdir()
    env = {k: v for k, v in cluster.scheduler_env().items() if not k.startswith("LEDGER_CELERY")}
    env.update(LEDGER_HOME=str(elsewhere), LEDGER_DATABASE_URL=f"sqlite:///{cluster.home / 'ledger.db'}",
               **s3_server.env())
    read = launcher.run([LEDGER, "tasks", "logs", "far", "1", "t0"], env=env, cwd=elsewhere, capture_output=True,
                        text=True, timeout=60)
    assert read.returncode == 0 and read.stdout.endswith(stored.decode()), read.stdout + read.stderr
    port = free_port()
    web = cluster.procs.start("reader-web", [LEDGER, "webserver", "--port", str(port)], env, elsewhere)
    wait_for_port("127.0.0.1", port, proc=web)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/1/tasks/t0/tries/1/log/download", timeout=30) as f:
        assert f.read() == stored
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/runs/1/tasks/t0/tries/1/log", timeout=30) as f:
        assert "from s3://logs/ledger/far/run_1/t0/try_1.log" in f.read().decode()
    without = {k: v for k, v in env.items() if not k.startswith("LEDGER_REMOTE_LOGS")}
    missing = launcher.run([LEDGER, "tasks", "logs", "far", "1", "t0"], env=without, cwd=elsewhere,
                           capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no log for try 1 of 't0' in run 1" in missing.stderr, missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_log_the_store_refuses_is_kept_in_the_database_with_a_line_saying_so(s3_server: S3Server,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    store = RemoteLogStore.from_env(s3_server.env())
    gone = RemoteLogStore.from_env(s3_server.env(bucket="no-such-bucket"))
    assert store is not None and gone is not None
    files = {(1, 1): TryReport("success", log="one\n"), (2, 1): TryReport("failed", log="two\n"),
             (3, 1): TryReport("success")}
    names = {(1, 1): "d/run_1/a/try_1.log", (2, 1): "d/run_1/b/try_1.log", (3, 1): "d/run_1/c/try_1.log"}
    said: list[str] = []
    kept = remote_logs.keep(store, files, names, said.append)
    assert [kept[k].log for k in sorted(kept)] == [None, None, None] and said == []
    assert store.get("d/run_1/b/try_1.log") == b"two\n" and store.get("d/run_1/c/try_1.log") is None
    refused = remote_logs.keep(gone, files, names, said.append)
    assert refused[(1, 1)].log == "one\n" and refused[(2, 1)].log == "two\n"  # kept in the database instead
    assert len(said) == 2 and "is kept in the database: cannot write s3://no-such-bucket/ledger/d/run_1/" in said[0]
