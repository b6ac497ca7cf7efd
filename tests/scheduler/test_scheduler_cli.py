"""The scheduler daemon through the real `ledger scheduler` command, with real worker processes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ledger.core.timeline import ChainRun, chain_violations
from tests import launcher
from tests.backfill.test_backfill_cli import query as rows_of
from tests.conftest import LEDGER, Cli

FAST = {"LEDGER_POLL_INTERVAL": "0.2", "LEDGER_HEARTBEAT_INTERVAL": "0.5"}

HEADER = """
import pendulum
from datetime import timedelta
from ledger import DAG, BashTask, PythonTask
START = pendulum.datetime(2024, 3, 1, tz="UTC")
"""


def db(cli: Cli) -> sqlite3.Connection:
    return sqlite3.connect(cli.home / "ledger.db")


def query(cli: Cli, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """On the Cli's database: SQLite in LEDGER_HOME (with `args` for its `?` placeholders), or the PostgreSQL one
    LEDGER_DATABASE_URL names."""
    if args:
        assert "LEDGER_DATABASE_URL" not in cli.env, "placeholders are SQLite's"
        with db(cli) as conn:
            return list(conn.execute(sql, args))
    return rows_of(cli, sql)


def schedule(cli: Cli, *extra: str, timeout: float = 120, **env: str) -> str:
    result = cli.run("scheduler", "--exit-when-idle", *extra, timeout=timeout, **{**FAST, **env})
    assert result.exit_code == 0, result.output
    return result.stdout


def assert_chain(cli: Cli, dag_id: str) -> list[dict[str, Any]]:
    import pendulum

    runs = cli.json("timeline", dag_id)
    chain = [ChainRun(int(r["run_id"]), pendulum.parse(r["logical_date"]),
                      int(r["previous_run_id"]) if r["previous_run_id"] else None, r["state"] != "overridden",
                      int(r["overridden_by"]) if r["overridden_by"] else None) for r in runs]
    assert chain_violations(chain) == []
    return runs


def assert_each_try_ran_once(cli: Cli) -> None:
    rows = query(cli, "SELECT ti.id, ti.try_number, count(tt.id), count(DISTINCT tt.try_number) "
                      "FROM task_instance ti LEFT JOIN task_try tt ON tt.task_instance_id = ti.id GROUP BY ti.id")
    for ti_id, try_number, tries, distinct in rows:
        assert tries == distinct == try_number, f"task instance {ti_id}: {tries} tries for try number {try_number}"


def test_catch_up_runs_every_due_interval_to_success_with_one_try_each(each_db_cli: Cli) -> None:
    cli = each_db_cli
    cli.write_dag("chain.py", HEADER + """
def work(context):
    print("working on", context.logical_date.isoformat())

with DAG("chain", schedule="@daily", start_date=START, end_date=START.add(days=4), catchup=True):
    a = BashTask("a", 'echo "a for $LEDGER_LOGICAL_DATE try $LEDGER_TRY_NUMBER"')
    b = PythonTask("b", work)
    c = BashTask("c", "true")
    a >> b >> c
""")
    log = schedule(cli)
    runs = assert_chain(cli, "chain")
    assert [r["state"] for r in runs] == ["success"] * 5
    assert [r["run_type"] for r in runs] == ["scheduled"] * 5
    assert "queued → running" in log and "running → success" in log
    assert_each_try_ran_once(cli)
    assert "a for 2024-03-02T00:00:00+00:00 try 1" in cli.ok("tasks", "logs", "chain", runs[1]["run_id"], "a")
    assert "working on 2024-03-03T00:00:00+00:00" in cli.ok("tasks", "logs", "chain", runs[2]["run_id"], "b")
    # a second scheduler finds nothing to do
    schedule(cli)
    assert len(cli.json("timeline", "chain")) == 5


def test_a_failed_try_is_retried_after_its_delay_and_each_try_has_its_log(each_db_cli: Cli) -> None:
    cli = each_db_cli
    marker = cli.home / "failed-once"
    cli.write_dag("flaky.py", HEADER + f"""
with DAG("flaky", schedule=None, start_date=START):
    BashTask("t", 'if [ ! -e {marker} ]; then touch {marker}; echo first; exit 3; fi; echo second',
             retries=2, retry_delay=timedelta(seconds=0.5))
""")
    cli.ok("trigger", "flaky", "--logical-date", "2024-03-01")
    schedule(cli)
    (run,) = cli.json("timeline", "flaky")
    assert run["state"] == "success"
    (ti,) = cli.json("runs", "show", run["run_id"])["task_instances"]
    assert (ti["state"], ti["try_number"]) == ("success", 2)
    assert "first" in cli.ok("tasks", "logs", "flaky", run["run_id"], "t", "--try", "1")
    assert "second" in cli.ok("tasks", "logs", "flaky", run["run_id"], "t")
    failures = cli.json("events", "--kind", "task_failed")
    assert failures[0]["details"]["reason"] == "exit code 3"
    assert failures[0]["details"]["state"] == "up_for_retry"


def test_a_task_over_its_execution_timeout_is_killed_and_fails_its_run(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("slow.py", HEADER + """
with DAG("slow", schedule=None, start_date=START):
    a = BashTask("a", "sleep 60", execution_timeout=timedelta(seconds=1))
    b = BashTask("b", "true")
    after = BashTask("cleanup", "echo cleanup", trigger_rule="all_done")
    a >> b >> after
""")
    cli.ok("trigger", "slow", "--logical-date", "2024-03-01")
    schedule(cli)  # (without the timeout `a` would sleep its 60 s and succeed: the states below say it was killed)
    (run,) = cli.json("timeline", "slow")
    states = {t["task_id"]: t["state"] for t in cli.json("runs", "show", run["run_id"])["task_instances"]}
    assert states == {"a": "failed", "b": "upstream_failed", "cleanup": "success"}
    assert run["state"] == "success"  # the leaf ran: trigger rule all_done
    reason = cli.json("events", "--kind", "task_failed")[0]["details"]["reason"]
    assert "timed out" in reason
    log = cli.ok("tasks", "logs", "slow", run["run_id"], "a").strip().splitlines()
    assert "outcome: failed (timed out after 1.0 s: execution_timeout" in log[-1]  # the log says why it ended


def test_depends_on_past_waits_for_the_previous_run_in_the_chain(each_db_cli: Cli) -> None:
    cli = each_db_cli
    cli.write_dag("past.py", HEADER + """
with DAG("past", schedule="@daily", start_date=START, end_date=START.add(days=2), catchup=True):
    BashTask("t", '[ "$LEDGER_LOGICAL_DATE" != "2024-03-02T00:00:00+00:00" ]', depends_on_past=True)
""")
    schedule(cli)
    runs = cli.json("timeline", "past")
    assert [r["state"] for r in runs] == ["success", "failed", "running"]
    third = cli.json("runs", "show", runs[2]["run_id"])["task_instances"][0]
    assert (third["state"], third["try_number"]) == ("scheduled", 0)
    # fixing the failed date by clearing it lets the chain continue
    cli.write_dag("past.py", HEADER + """
with DAG("past", schedule="@daily", start_date=START, end_date=START.add(days=2), catchup=True):
    BashTask("t", 'true', depends_on_past=True)
""")
    # a clear re-runs the run's own version (the failing command) unless the run moves to the fixed one
    cli.ok("tasks", "clear", "past", runs[1]["run_id"])
    schedule(cli)
    assert [r["state"] for r in cli.json("timeline", "past")] == ["success", "failed", "running"]
    cli.ok("tasks", "clear", "past", runs[1]["run_id"], "--on-latest-version")
    schedule(cli)
    assert [r["state"] for r in cli.json("timeline", "past")] == ["success"] * 3


def test_paused_dags_get_no_new_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", HEADER + """
with DAG("daily", schedule="@daily", start_date=START, end_date=START.add(days=1), catchup=True):
    BashTask("t", "true")
""")
    cli.ok("dags", "pause", "daily")
    schedule(cli)
    assert cli.json("timeline", "daily") == []
    cli.ok("dags", "unpause", "daily")
    schedule(cli)
    assert len(cli.json("timeline", "daily")) == 2


def test_a_pool_limits_how_many_tasks_run_at_once(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.ok("pools", "set", "narrow", "1")
    cli.write_dag("pooled.py", HEADER + """
with DAG("pooled", schedule=None, start_date=START):
    for i in range(4):
        BashTask(f"t{i}", "sleep 0.3", pool="narrow")
""")
    cli.ok("trigger", "pooled", "--logical-date", "2024-03-01")
    schedule(cli, "--parallelism", "4")
    spans = sorted(query(cli, "SELECT started_at, ended_at FROM task_try"))
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end, "two tries of the one-slot pool overlapped"
    assert cli.json("pools", "list") == [{"name": "narrow", "slots": 1, "used": 0, "description": ""}]


def test_a_scheduler_whose_tries_are_ready_one_at_a_time_starts_one_worker(ready_cli: Cli) -> None:
    """The local executor's workers start on demand (decision 0331): a chain, one try ready at a time, runs every
    try in a child of one worker, and the scheduler has no other worker (each try counts its worker's siblings)."""
    cli = ready_cli
    seen = cli.home / "workers.txt"
    cli.write_dag("chain.py", HEADER + f"""
import os

def parent_of(pid):
    with open(f"/proc/{{pid}}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])

def note():
    worker = os.getppid()
    scheduler = parent_of(worker)
    workers = 0
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{entry}}/cmdline", "rb") as f:
                is_worker = b"exec_worker_main" in f.read()
            workers += is_worker and parent_of(entry) == scheduler
        except OSError:  # (gone meanwhile)
            pass
    with open({str(seen)!r}, "a") as f:
        f.write(f"{{worker}} {{workers}}\\n")

with DAG("chain", schedule="@daily", start_date=START, end_date=START, catchup=True):
    PythonTask("a", note) >> PythonTask("b", note) >> PythonTask("c", note)
""")
    schedule(cli, "--parallelism", "4")
    assert [r["state"] for r in cli.json("timeline", "chain")] == ["success"]
    lines = seen.read_text().splitlines()
    assert len(lines) == 3 and len(set(lines)) == 1 and lines[0].split()[1] == "1", lines


def test_max_active_runs_limits_the_runs_running_at_once(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("limited.py", HEADER + """
with DAG("limited", schedule="@daily", start_date=START, end_date=START.add(days=3), catchup=True,
         max_active_runs=1):
    BashTask("t", "sleep 0.2")
""")
    schedule(cli, "--parallelism", "4")
    spans = sorted(query(cli, "SELECT started_at, ended_at FROM dag_run"))
    assert len(spans) == 4
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end


def test_broken_dag_files_are_recorded_and_the_others_are_scheduled(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("good.py", HEADER + """
with DAG("good", schedule="@daily", start_date=START, end_date=START, catchup=True):
    BashTask("t", "true")
""")
    cli.write_dag("syntax.py", "this is not python\n")
    cli.write_dag("hangs.py", "import time\ntime.sleep(600)\n")
    cli.write_dag("raises.py", "raise ValueError('no config')\n")
    # (the good files' imports, in processors just forked, must end within it however loaded the host: 5 s)
    schedule(cli, LEDGER_DAG_FILE_PROCESSOR_TIMEOUT="5")
    assert [r["state"] for r in cli.json("timeline", "good")] == ["success"]
    errors = {Path(e["file"]).name: e["error"] for e in cli.json("dags", "errors")}
    assert set(errors) == {"syntax.py", "hangs.py", "raises.py"}
    assert "timed out" in errors["hangs.py"]
    assert "ValueError: no config" in errors["raises.py"]


def test_sigterm_stops_taking_work_lets_running_tries_finish_and_releases_locks(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("long.py", HEADER + """
with DAG("long", schedule=None, start_date=START):
    a = BashTask("a", "sleep 1.5")
    b = BashTask("b", "true")
    a >> b
""")
    cli.ok("trigger", "long", "--logical-date", "2024-03-01")
    proc = launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not query(cli, "SELECT 1 FROM task_try WHERE state = 'running'") and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert query(cli, "SELECT state FROM task_try") == [("success",)]  # a finished; b never started
    assert query(cli, "SELECT count(*) FROM dag_run WHERE lock_holder IS NOT NULL") == [(0,)]
    assert query(cli, "SELECT state FROM job") == [("success",)]
    released = cli.json("events", "--dag", "long", "--kind", "locks_released")
    assert [(e["dag_id"], str(e["run_id"])) for e in released] == [("long", "1")]  # one event per run, with its DAG


def test_a_try_lost_with_its_scheduler_gets_a_new_try_that_spends_no_retry(each_db_cli: Cli) -> None:
    """kill -9 of a scheduler during a try: the next scheduler records the try `lost` (not failed), gives the task a
    new try though it has no retries, and the events name the DAG, run and task, so `ledger events --dag` finds
    them."""
    cli = each_db_cli
    cli.write_dag("zz.py", HEADER + """
with DAG("zz", schedule=None, start_date=START, default_args={"retries": 0}):
    BashTask("slow", 'if [ "$LEDGER_TRY_NUMBER" = 1 ]; then sleep 60; fi')
""")
    cli.ok("trigger", "zz", "--logical-date", "2024-03-01")
    env = {**cli.env, **FAST, "LEDGER_LOCK_TIMEOUT": "10"}
    proc = launcher.popen([LEDGER, "scheduler"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          start_new_session=True)
    deadline = time.monotonic() + 30
    while not query(cli, "SELECT 1 FROM task_try WHERE state = 'running'") and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    schedule(cli, timeout=120, LEDGER_LOCK_TIMEOUT="10")
    (lost,) = cli.json("events", "--dag", "zz", "--kind", "try_lost")
    assert (lost["dag_id"], str(lost["run_id"]), lost["details"]["task_id"]) == ("zz", "1", "slow")
    assert lost["details"]["try_number"] == 1 and lost["details"]["state"] == "scheduled"
    assert lost["details"]["reason"].startswith("lost: its job stopped heart-beating; it gets a new try")
    assert cli.json("events", "--dag", "zz", "--kind", "task_failed") == []
    # the killed scheduler's death is told once per run it held, with the run's DAG
    died = cli.json("events", "--dag", "zz", "--kind", "job_died")
    assert [(e["dag_id"], str(e["run_id"])) for e in died] == [("zz", "1")], cli.json("events", "--kind", "job_died")
    # and `--task` finds the task's own events among them
    about = cli.json("events", "--dag", "zz", "--task", "slow", "--no-task-signals")
    assert sorted(e["kind"] for e in about) == ["try_lost"], about
    assert query(cli, "SELECT state FROM task_try ORDER BY try_number") == [("lost",), ("success",)]
    assert query(cli, "SELECT state, try_number, max_tries FROM task_instance") == [("success", 2, 2)]
    assert query(cli, "SELECT state FROM dag_run") == [("success",)]


@pytest.mark.slow
def test_kill_9_in_the_middle_of_a_catch_up_then_a_restart_completes_every_run(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("catchup.py", HEADER + """
with DAG("catchup", schedule="@daily", start_date=START, end_date=START.add(days=9), catchup=True,
         default_args={"retries": 2, "retry_delay": timedelta(seconds=0)}):
    a = BashTask("a", "sleep 0.2")
    b = BashTask("b", "sleep 0.2")
    a >> b
""")
    env = {**cli.env, **FAST, "LEDGER_LOCK_TIMEOUT": "10"}
    proc = launcher.popen([LEDGER, "scheduler", "--parallelism", "2"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = query(cli, "SELECT count(*) FROM dag_run WHERE state = 'success'")[0][0]
        if done >= 3:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    # the killed scheduler's workers died with it: nothing of it still runs
    assert query(cli, "SELECT count(*) FROM dag_run WHERE state = 'success'")[0][0] < 10
    schedule(cli, timeout=180, LEDGER_LOCK_TIMEOUT="10")
    runs = assert_chain(cli, "catchup")
    assert [r["state"] for r in runs] == ["success"] * 10
    assert_each_try_ran_once(cli)
    kinds = [e["kind"] for e in cli.json("events")]
    assert "lock_stolen" in kinds


def test_exit_when_idle_with_nothing_to_do_exits_at_once(ready_cli: Cli) -> None:
    """It does not wait for a poll interval (ten minutes here) to find it has nothing to do: it exits within the
    command's deadline, however busy the machine."""
    ready_cli.dags.mkdir()
    schedule(ready_cli, timeout=120, LEDGER_POLL_INTERVAL="600")


def test_the_scheduler_refuses_a_missing_database_and_bad_settings(cli: Cli) -> None:
    assert "ledger db upgrade" in cli.fails("scheduler", "--exit-when-idle").stderr
    cli.ok("db", "upgrade")
    assert "executor" in cli.fails("scheduler", "--executor", "nope").stderr
    result = cli.run("scheduler", "--exit-when-idle", LEDGER_PARALLELISM="many")
    assert result.exit_code != 0 and "LEDGER_PARALLELISM" in result.stderr and "Traceback" not in result.output
    # a parallelism no host could start (a worker process per slot) is refused before any worker starts
    result = cli.run("scheduler", "--exit-when-idle", "--parallelism", "9223372036854775807")
    assert result.exit_code != 0 and "at most 512" in result.stderr and "Traceback" not in result.output
    assert cli.run("scheduler", "--exit-when-idle", LEDGER_PARALLELISM="100000").exit_code != 0


def test_reused_workers_run_python_tries_in_process_on_the_code_of_each_runs_version(ready_cli: Cli) -> None:
    cli = ready_cli
    source = HEADER + """
def work(context):
    print("code A for", context.logical_date.date())

with DAG("reuse", schedule=None, start_date=START):
    PythonTask("p", work, retries=1) >> BashTask("b", "echo bash for $LEDGER_LOGICAL_DATE")
"""
    cli.write_dag("reuse.py", source)
    cli.ok("trigger", "reuse", "--logical-date", "2024-03-01")
    cli.write_dag("reuse.py", source.replace("code A", "code B"))  # a new version before the first run ran
    cli.ok("trigger", "reuse", "--logical-date", "2024-03-02")
    log = schedule(cli, "--reuse-workers")
    assert "Python tries in reused workers, 1 queued ahead per worker" in log
    first, second = cli.json("timeline", "reuse")
    assert (first["state"], second["state"]) == ("success", "success")
    assert first["dag_version"] != second["dag_version"]
    for run, code in ((first, "code A for 2024-03-01"), (second, "code B for 2024-03-02")):
        python_log = cli.ok("tasks", "logs", "reuse", run["run_id"], "p")
        assert code in python_log and ", in process)" in python_log
        bash_log = cli.ok("tasks", "logs", "reuse", run["run_id"], "b")
        assert "bash for" in bash_log and ", in process)" not in bash_log
    assert_each_try_ran_once(cli)
    result = cli.run("scheduler", "--exit-when-idle", LEDGER_REUSE_WORKERS="sometimes")
    assert result.exit_code != 0 and "LEDGER_REUSE_WORKERS" in result.stderr and "Traceback" not in result.output
