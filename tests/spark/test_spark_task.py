"""SparkTask: its definition, its configuration, and real tries in worker processes (one shared worker and
SparkSession for the module), on local[*] and through a Spark Connect server started on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pendulum
import pytest

from ledger.core.errors import DagDefinitionError
from ledger.scheduler.executors.local import LocalExecutor
from ledger.scheduler.executors.sequential import SequentialExecutor
from ledger.scheduler.runtime import spark_session, task_runner, try_plan, try_process
from ledger.sdk.dag import DAG
from ledger.sdk.describe import version_of
from ledger.sdk.spark import SparkTask, spark_task
from tests.scheduler.test_task_runner import process_gone
from tests.spark.conftest import DAY, log_of, run_one, spark_item, write_spark_dag

pytestmark = pytest.mark.spark

START = pendulum.datetime(2024, 1, 1, tz="UTC")


# -- the task and its configuration (no JVM) ----------------------------------------------------------

def first(spark, context):  # type: ignore[no-untyped-def]
    return spark.range(1).count()


def second(spark, context):  # type: ignore[no-untyped-def]
    return spark.range(2).count()


def _version(fn: object, conf: dict[str, str] | None = None) -> str:
    with DAG("v", schedule="@daily", start_date=START) as dag:
        SparkTask("t", fn, spark_conf=conf)  # type: ignore[arg-type]
    return version_of(dag)[0]


def test_a_spark_task_records_its_code_and_spark_conf_in_the_dag_version() -> None:
    with DAG("d", schedule="@daily", start_date=START):
        task = SparkTask("t", first, op_kwargs={"table": "events"},
                         spark_conf={"spark.sql.shuffle.partitions": 8, "spark.sql.ansi.enabled": True})
    definition = task.definition()
    assert task.kind == "spark"
    assert definition["callable"].endswith(".first") and len(definition["source_sha256"]) == 64
    assert definition["op_kwargs"] == {"table": "events"}
    assert definition["spark_conf"] == {"spark.sql.ansi.enabled": "true", "spark.sql.shuffle.partitions": "8"}
    assert _version(first) == _version(first)
    assert _version(first) != _version(second)  # other code: another version
    assert _version(first) != _version(first, {"spark.sql.shuffle.partitions": "8"})


def test_spark_task_arguments_are_checked_and_the_decorator_makes_tasks() -> None:
    with DAG("d", schedule="@daily", start_date=START) as dag:
        with pytest.raises(DagDefinitionError, match="must be callable"):
            SparkTask("a", "not callable")  # type: ignore[arg-type]
        with pytest.raises(DagDefinitionError, match="cannot set 'spark'"):
            SparkTask("b", first, op_kwargs={"spark": 1})
        with pytest.raises(DagDefinitionError, match="must be a string"):
            SparkTask("c", first, spark_conf={"spark.x": [1]})

        @spark_task(spark_conf={"spark.sql.shuffle.partitions": 2}, retries=3)
        def aggregate(spark, context, *, source):  # type: ignore[no-untyped-def]
            pass

        made = aggregate(source="/data")
        plain = spark_task(first)()
    assert isinstance(made, SparkTask) and made.task_id == "aggregate" and made.retries == 3
    assert made.op_kwargs == {"source": "/data"} and made.spark_conf == {"spark.sql.shuffle.partitions": "2"}
    assert plain.task_id == "first"
    assert set(dag.tasks) == {"aggregate", "first"}


def test_importing_ledger_spark_does_not_import_pyspark() -> None:
    code = "import sys, ledger, ledger.sdk.spark, ledger.scheduler.runtime.task_runner; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_session_settings_come_from_defaults_then_the_environment() -> None:
    local = spark_session.load_settings({})
    assert (local.master, local.remote) == ("local[*]", None)
    assert local.conf["spark.sql.shuffle.partitions"] == "4"
    assert local.conf["spark.sql.sources.partitionOverwriteMode"] == "dynamic"
    assert local.conf["spark.ui.enabled"] == "false" and local.conf["spark.driver.host"] == "127.0.0.1"
    given = spark_session.load_settings({
        "LEDGER_SPARK_CONF": json.dumps({"spark.sql.shuffle.partitions": 16, "spark.master": "local[2]",
                                         "spark.sql.ansi.enabled": True}),
    })
    assert given.master == "local[2]" and given.conf["spark.sql.shuffle.partitions"] == "16"
    assert given.conf["spark.sql.ansi.enabled"] == "true" and "spark.master" not in given.conf
    cluster = spark_session.load_settings({"LEDGER_SPARK_CONF": '{"spark.master": "local[2]"}',
                                           "LEDGER_SPARK_MASTER": "spark://h:7077"})
    assert cluster.master == "spark://h:7077" and "spark.driver.host" not in cluster.conf
    remote = spark_session.load_settings({"LEDGER_SPARK_REMOTE": "sc://127.0.0.1:15002"})
    assert remote.remote == "sc://127.0.0.1:15002" and not remote.is_local
    for bad, message in (({"LEDGER_SPARK_CONF": "{nope"}, "not valid JSON"),
                         ({"LEDGER_SPARK_CONF": "[1]"}, "JSON object"),
                         ({"LEDGER_SPARK_REMOTE": "http://x"}, "sc://host:port")):
        with pytest.raises(spark_session.SparkUnavailable, match=re.escape(message)):
            spark_session.load_settings(bad)


def test_java_versions_are_read_from_java_version_output() -> None:
    assert spark_session.java_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert spark_session.java_major('openjdk version "21" 2023-09-19') == 21
    assert spark_session.java_major('java version "1.8.0_292"') == 8
    assert spark_session.java_major("no version here") is None


# -- no Java: one clear line (no JVM is started) ---------------------------------------------------------

@pytest.fixture
def no_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    empty = tmp_path / "bin-without-java"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    for name in ("LEDGER_SPARK_REMOTE", "LEDGER_SPARK_MASTER", "LEDGER_SPARK_CONF"):
        monkeypatch.delenv(name, raising=False)
    return write_spark_dag(tmp_path / "dags")


def test_without_java_a_spark_try_fails_with_one_clear_line(no_java: Path) -> None:
    executor = LocalExecutor(1)
    executor.start()
    try:
        worker_pid = executor._workers[0].process.pid
        item = spark_item(no_java, "identity")
        started, finished = run_one(executor, item, within=60)
    finally:
        executor.end(0)
    assert (finished.state, finished.reason) == ("failed", spark_session.NO_JAVA)
    assert started.pid == finished.pid == worker_pid  # run in the worker itself, not in a forked child
    log = log_of(item)
    assert f"[ledger] {spark_session.NO_JAVA}" in log.splitlines()
    assert "Traceback" not in log
    assert log.splitlines()[-1].startswith("[ledger] ") and "outcome: failed" in log.splitlines()[-1]


def test_the_sequential_executor_runs_spark_tries_in_its_own_process(no_java: Path) -> None:
    executor = SequentialExecutor()
    executor.start()
    item = spark_item(no_java, "identity")
    stdout, fd1, fd2 = sys.stdout, os.fstat(1), os.fstat(2)
    executor.submit(item)
    assert sys.stdout is stdout  # put back after the try
    assert [(s.st_dev, s.st_ino) for s in (os.fstat(1), os.fstat(2))] == [(fd1.st_dev, fd1.st_ino),
                                                                           (fd2.st_dev, fd2.st_ino)]
    started, finished = executor.drain()
    executor.end(0)
    assert (started.kind, finished.kind) == ("started", "finished")
    assert started.pid == finished.pid == os.getpid()
    assert (finished.state, finished.reason) == ("failed", spark_session.NO_JAVA)
    assert "try 1 of dag=sparky" in log_of(item)


def test_a_forked_child_hands_a_spark_try_back_without_running_it(no_java: Path) -> None:
    try_plan.clear_cache()
    item = spark_item(no_java, "identity")
    running = try_process.fork_try(item)
    outcome = running.wait(timeout=30)
    assert outcome is not None and running.handed_over
    assert (outcome.state, outcome.reason) == ("failed", task_runner.HANDOVER_REASON)
    assert not Path(item.log_path).exists()


# -- local[*] through one shared worker -----------------------------------------------------------------

def _counts(executor: LocalExecutor, dag_file: Path, ti_id: int) -> dict[str, int]:
    item = spark_item(dag_file, "count", ti_id=ti_id)
    _, finished = run_one(executor, item)
    assert finished.state == "success", log_of(item)
    line = next(x for x in log_of(item).splitlines() if x.startswith("COUNTS "))
    counts: dict[str, int] = json.loads(line.removeprefix("COUNTS "))
    return counts


def _files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*.parquet")}


def test_a_spark_try_writes_date_partitions_and_rewriting_one_is_idempotent(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    worker_pid = spark_worker._workers[0].process.pid
    day2 = DAY + timedelta(days=1)
    first_day = spark_item(spark_dag, "write", ti_id=1)
    started, finished = run_one(spark_worker, first_day)
    assert (finished.state, finished.reason) == ("success", None), log_of(first_day)
    assert started.pid == finished.pid == worker_pid
    log = log_of(first_day)
    assert "try 1 of dag=sparky run=100 task=write" in log.splitlines()[0]
    assert "[ledger] Spark session started in" in log and "wrote 3 rows for 2024-03-10" in log
    assert "outcome: success" in log.splitlines()[-1]
    _, finished = run_one(spark_worker, spark_item(spark_dag, "write", ti_id=2, day=day2, conf={"rows": 2}))
    assert finished.state == "success"
    events = spark_dag.parent / "out" / "events"
    assert sorted(p.name for p in events.iterdir() if p.is_dir()) == ["date=2024-03-10", "date=2024-03-11"]
    assert _counts(spark_worker, spark_dag, 3) == {"2024-03-10": 3, "2024-03-11": 2}
    other_day = _files(events / "date=2024-03-11")
    replaced = _files(events / "date=2024-03-10")

    again = spark_item(spark_dag, "write", ti_id=1, try_number=2)  # the same date once more
    _, finished = run_one(spark_worker, again)
    assert finished.state == "success", log_of(again)
    assert "Spark session reused" in log_of(again)
    assert _counts(spark_worker, spark_dag, 4) == {"2024-03-10": 3, "2024-03-11": 2}
    assert _files(events / "date=2024-03-11") == other_day  # the other partition was not touched
    assert set(_files(events / "date=2024-03-10")).isdisjoint(replaced)  # its own was rewritten


def test_tries_in_one_worker_reuse_its_session_and_task_conf_lasts_one_try(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    items = [spark_item(spark_dag, "identity", ti_id=10), spark_item(spark_dag, "decorated", ti_id=11),
             spark_item(spark_dag, "identity", ti_id=12, try_number=2)]
    timings = []
    for item in items:
        began = time.monotonic()
        _, finished = run_one(spark_worker, item)
        timings.append(time.monotonic() - began)
        assert finished.state == "success", log_of(item)
    identities = [next(x for x in log_of(item).splitlines() if x.startswith("IDENTITY")) for item in items[::2]]
    assert identities[0] == identities[1]  # same application, same JVM, same worker
    assert f"returned {identities[0].split()[1]!r}" in log_of(items[0])
    assert "PARTITIONS 4" in log_of(items[0]) and "PARTITIONS 4" in log_of(items[2])
    assert "DECORATED hi 7" in log_of(items[1])  # the task's spark_conf, for its try only
    print(f"per-try wall time through the executor with a warm session: {[round(t, 2) for t in timings]}")


def test_a_python_task_is_still_forked_by_a_worker_that_holds_a_session(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    source = spark_dag.parent / "plain_dag.py"
    source.write_text(
        "import os\nimport pendulum\nfrom ledger import DAG, PythonTask\n"
        "def where():\n    print('PID', os.getpid())\n"
        "with DAG('plain', schedule='@daily', start_date=pendulum.datetime(2024, 1, 1, tz='UTC')):\n"
        "    PythonTask('where', where)\n")
    item = spark_item(spark_dag, "where", ti_id=40)
    item = type(item)(**{**item.__dict__, "dag_id": "plain", "fileloc": str(source)})
    started, finished = run_one(spark_worker, item)
    assert finished.state == "success"
    assert started.pid != spark_worker._workers[0].process.pid
    assert f"PID {started.pid}" in log_of(item)


def test_a_spark_try_past_its_timeout_has_its_jobs_cancelled_and_its_worker_goes_on(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    worker_pid = spark_worker._workers[0].process.pid
    # The worker's session is built and has run the slow job's plan on a few rows first, in a try of its own: the
    # first job of a JVM (its session, its classes, its generated code) can take longer than the 3 s timeout at
    # load, and the slow job would begin after its cancel.
    _, warmed = run_one(spark_worker, spark_item(spark_dag, "warm", ti_id=19))
    assert warmed.state == "success" and warmed.pid == worker_pid
    slow = spark_item(spark_dag, "slow", ti_id=20, timeout=3.0)
    began = time.monotonic()
    _, finished = run_one(spark_worker, slow)
    assert (finished.state, finished.reason) == ("failed", "timed out after 3.0 s")
    assert time.monotonic() - began < 300  # the job runs for hours unless cancelled (a margin no load reaches)
    assert "cancelling its Spark jobs" in log_of(slow)
    after = spark_item(spark_dag, "identity", ti_id=21)
    _, finished = run_one(spark_worker, after)
    assert finished.state == "success" and finished.pid == worker_pid
    assert "Spark session reused" in log_of(after)


def test_a_task_conf_that_cannot_change_on_a_running_session_restarts_it(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    jvm_pid = _jvm_pid(spark_worker, spark_dag, ti_id=22)
    item = spark_item(spark_dag, "static_conf", ti_id=23)
    _, finished = run_one(spark_worker, item)
    assert finished.state == "success", log_of(item)
    log = log_of(item)
    assert "restarting the Spark session for spark_conf spark.executor.memory=600m" in log
    assert "EXECUTOR_MEMORY 600m" in log
    assert _jvm_pid(spark_worker, spark_dag, ti_id=24) == jvm_pid  # a new SparkContext, the same JVM


def test_a_session_stopped_by_task_code_is_started_again_for_the_next_try(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    jvm_pid = _jvm_pid(spark_worker, spark_dag, ti_id=25)
    assert run_one(spark_worker, spark_item(spark_dag, "stopper", ti_id=26))[1].state == "success"
    after = spark_item(spark_dag, "identity", ti_id=27)
    _, finished = run_one(spark_worker, after)
    assert finished.state == "success", log_of(after)
    assert "the Spark session was stopped: starting a new one" in log_of(after)
    assert f" {jvm_pid}@" in log_of(after)  # a new application in the same JVM


@pytest.mark.slow
def test_a_spark_try_that_ignores_the_cancel_fails_timed_out_and_its_worker_is_replaced(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    worker_pid = spark_worker._workers[0].process.pid
    jvm_pid = _jvm_pid(spark_worker, spark_dag, ti_id=29)
    stuck = spark_item(spark_dag, "stuck", ti_id=30, timeout=2.0)
    _, finished = run_one(spark_worker, stuck)
    assert (finished.state, finished.reason) == ("failed", "timed out after 2.0 s")
    assert "did not stop within" in log_of(stuck)
    deadline = time.monotonic() + 20
    while spark_worker._workers[0].process.pid == worker_pid or not spark_worker._workers[0].ready:
        assert time.monotonic() < deadline, "the stuck worker was not replaced"
        spark_worker.drain()
        time.sleep(0.1)
    assert spark_worker.open_slots() == 1 and spark_worker.in_flight() == set()
    assert process_gone(jvm_pid, within=20), "the JVM outlived its worker"


def _jvm_pid(executor: LocalExecutor, dag_file: Path, ti_id: int) -> int:
    item = spark_item(dag_file, "identity", ti_id=ti_id)
    assert run_one(executor, item)[1].state == "success", log_of(item)
    line = next(x for x in log_of(item).splitlines() if x.startswith("IDENTITY"))
    return int(line.split()[2].split("@")[0])


@pytest.mark.slow
def test_a_try_that_finds_its_workers_jvm_dead_is_lost_and_the_next_runs_on_a_new_worker_and_jvm(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    worker_pid = spark_worker._workers[0].process.pid
    jvm_pid = _jvm_pid(spark_worker, spark_dag, ti_id=45)
    os.kill(jvm_pid, signal.SIGKILL)  # while the worker is idle (the kernel's OOM killer, say)
    assert process_gone(jvm_pid, within=20)
    item = spark_item(spark_dag, "identity", ti_id=46)
    _, finished = run_one(spark_worker, item)
    # its code never ran: the worker's fault, not the task's (lost: no retry spent)
    assert (finished.state, finished.reason) == ("lost", "the worker's Spark driver (JVM) died before this try's "
                                                         "code ran: this worker will be replaced")
    assert "IDENTITY" not in log_of(item) and "outcome: lost" in log_of(item), log_of(item)
    deadline = time.monotonic() + 20
    while spark_worker._workers[0].process.pid == worker_pid or not spark_worker._workers[0].ready:
        assert time.monotonic() < deadline, "the worker was not replaced"
        spark_worker.drain()
        time.sleep(0.1)
    assert _jvm_pid(spark_worker, spark_dag, ti_id=47) != jvm_pid  # the next try: a new worker, a new JVM


def test_ending_the_executor_stops_the_workers_session_and_its_jvm(
        spark_worker: LocalExecutor, spark_dag: Path) -> None:
    worker = spark_worker._workers[0].process
    jvm_pid = _jvm_pid(spark_worker, spark_dag, ti_id=50)
    spark_worker.end(5)
    # exit status 0: the worker left through its clean shutdown path, not killed when the 5 s grace ran out (how
    # long that took depends on the machine's load, so it is not asserted)
    assert worker.exitcode == 0, "the worker did not leave through its clean shutdown path"
    assert process_gone(jvm_pid, within=20)


# -- Spark Connect: a server on loopback, no Java for the worker -------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    for module in ("grpc", "pandas", "pyarrow", "google.protobuf"):
        pytest.importorskip(module, reason="the Spark Connect client needs pyspark[connect]")
    import pyspark

    home = Path(pyspark.__path__[0])
    script = home / "sbin" / "start-connect-server.sh"
    if not script.exists() or not list((home / "jars").glob("spark-connect_*.jar")):
        pytest.skip("this pyspark ships no Spark Connect server")
    try:
        spark_session.check_java()
    except spark_session.SparkUnavailable as exc:
        pytest.skip(f"the Connect server needs Java: {exc}")
    port = _free_port()
    logs = tmp_path / "connect-server"
    logs.mkdir()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(logs), "SPARK_PID_DIR": str(logs),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    argv = ["bash", str(script), "--wait", "--master", "local[2]",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
            "--conf", "spark.sql.sources.partitionOverwriteMode=dynamic",
            "--conf", "spark.driver.memory=1g"]
    with open(logs / "server.log", "wb") as out:
        server = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                tail = (logs / "server.log").read_text(errors="replace")[-2000:]
                pytest.fail(f"the Spark Connect server exited ({server.returncode}):\n{tail}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the Spark Connect server did not listen within 120 s"
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop_group(server)


def _stop_group(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (the scripts and the JVM), SIGKILL what is left after 20 s."""
    for signum, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(server.pid, signum)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            server.poll()
            try:
                os.killpg(server.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
    server.wait(timeout=10)


@pytest.mark.slow
def test_spark_tries_run_through_a_spark_connect_server_without_java_in_the_worker(
        connect_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dag_file = write_spark_dag(tmp_path / "dags")
    empty = tmp_path / "bin-without-java"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # the worker has no Java: the driver runs in the server
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("LEDGER_SPARK_REMOTE", connect_server)
    executor = LocalExecutor(1)
    executor.start()
    try:
        write = spark_item(dag_file, "write", ti_id=1)
        _, finished = run_one(executor, write)
        assert (finished.state, finished.reason) == ("success", None), log_of(write)
        assert f"Spark Connect {connect_server}" in log_of(write)
        again = spark_item(dag_file, "write", ti_id=1, try_number=2, conf={"rows": 5})
        assert run_one(executor, again)[1].state == "success", log_of(again)
        assert "Spark session reused" in log_of(again)
        other = spark_item(dag_file, "write", ti_id=2, day=DAY + timedelta(days=1), conf={"rows": 2})
        assert run_one(executor, other)[1].state == "success"
        count = spark_item(dag_file, "count", ti_id=3)
        assert run_one(executor, count)[1].state == "success", log_of(count)
        assert 'COUNTS {"2024-03-10": 5, "2024-03-11": 2}' in log_of(count)
        slow = spark_item(dag_file, "slow", ti_id=4, timeout=3.0)
        _, finished = run_one(executor, slow)
        assert (finished.state, finished.reason) == ("failed", "timed out after 3.0 s"), log_of(slow)
        assert "did not stop within" not in log_of(slow)  # interruptAll() stopped it
    finally:
        executor.end(5)
