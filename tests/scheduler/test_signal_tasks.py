"""Signal-driven tasks through real processes: a running `ledger scheduler`, signals sent with the real
`ledger signal send`, tasks that send signals themselves, and the actions START, RESTART, STOP and NONE."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests import launcher
from tests.conftest import LEDGER, REPO, Cli
from tests.scheduler.test_scheduler_cli import FAST, query

pytestmark = pytest.mark.slow

DAG_FILE = """
import os, time
import pendulum
from ledger import DAG, BashTask, PythonTask, SignalAction

OUT = os.environ["SIGNAL_TEST_OUT"]


def forever(context):
    with open(os.path.join(OUT, f"forever-try-{context.try_number}"), "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(0.1)


def once(context):
    with open(os.path.join(OUT, f"once-{context.try_number}"), "w") as f:
        f.write(context.signal["value"] if context.signal else "-")


def rule(signal):
    return SignalAction.START if int(signal.value) % 2 == 0 else "NONE"


with DAG("sig", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    PythonTask("forever", forever, signals={"ctl": {"start": "START", "stop": "STOP", "restart": "RESTART"}})
    PythonTask("once", once, signals={"go": "START", "even": rule})
"""


@pytest.fixture
def running(ready_cli: Cli, tmp_path: Any) -> Iterator[tuple[Cli, Any]]:
    out = tmp_path / "out"
    out.mkdir()
    cli = ready_cli
    cli.env["SIGNAL_TEST_OUT"] = str(out)
    cli.write_dag("sig.py", DAG_FILE)
    cli.ok("dags", "list")
    proc = launcher.popen([LEDGER, "scheduler", "--parallelism", "3"], env={**cli.env, **FAST},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield cli, out
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=40)
        if proc.poll() is None:
            proc.kill()
        assert proc.wait() == 0, proc.stdout.read() if proc.stdout else ""


def wait_for(what: Callable[[], Any], timeout: float = 30, step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out waiting for {what.__doc__ or what}")


def ti(cli: Cli, task_id: str) -> tuple[str, int] | None:
    rows = query(cli, "SELECT state, try_number FROM task_instance WHERE dag_id='sig' AND task_id=? "
                      "ORDER BY id DESC LIMIT 1", task_id)
    return (rows[0][0], rows[0][1]) if rows else None


def tries(cli: Cli, task_id: str) -> list[tuple[int, str]]:
    return [(n, s) for n, s in query(
        cli, "SELECT tt.try_number, tt.state FROM task_try tt JOIN task_instance ti ON ti.id = tt.task_instance_id "
             "WHERE ti.dag_id='sig' AND ti.task_id=? ORDER BY tt.try_number", task_id)]


def actions(cli: Cli) -> list[tuple[str, str, str]]:
    return [(e["details"]["key"], e["details"]["action"], e["details"]["outcome"])
            for e in cli.json("events", "--kind", "signal_action")]


def test_start_creates_a_run_stop_ends_the_running_try_and_the_run_succeeds(running: tuple[Cli, Any]) -> None:
    cli, _out = running
    cli.ok("signal", "send", "ctl", "start")
    wait_for(lambda: ti(cli, "forever") == ("running", 1))
    (run,) = cli.json("timeline", "sig")
    assert run["run_type"] == "manual" and run["state"] == "running"
    cli.ok("signal", "send", "ctl", "stop")
    wait_for(lambda: ti(cli, "forever") == ("stopped", 1))
    assert tries(cli, "forever") == [(1, "stopped")]
    wait_for(lambda: cli.json("timeline", "sig")[0]["state"] == "success")
    assert ti(cli, "once") == ("skipped", 0)  # no signal came for it: skipped when the run ended
    assert actions(cli) == [("ctl", "START", "armed"), ("ctl", "STOP", "stop requested")]


def test_restart_ends_the_running_try_and_starts_a_new_one(running: tuple[Cli, Any]) -> None:
    cli, out = running
    cli.ok("signal", "send", "ctl", "start")
    wait_for(lambda: (out / "forever-try-1").exists())
    cli.ok("signal", "send", "ctl", "restart")
    wait_for(lambda: ti(cli, "forever") == ("running", 2))
    assert tries(cli, "forever") == [(1, "stopped"), (2, "running")]
    wait_for(lambda: (out / "forever-try-2").exists())
    first_pid = int((out / "forever-try-1").read_text())
    with pytest.raises(ProcessLookupError):
        import os
        os.kill(first_pid, 0)
    cli.ok("signal", "send", "ctl", "stop")
    wait_for(lambda: cli.json("timeline", "sig")[0]["state"] == "success")


def test_each_start_of_a_finished_task_is_a_new_try_and_it_sees_its_signal(running: tuple[Cli, Any]) -> None:
    cli, out = running
    cli.ok("signal", "send", "ctl", "start")  # keeps the run open
    wait_for(lambda: ti(cli, "forever") == ("running", 1))
    for n, value in enumerate(["first", "second", "third"], start=1):
        cli.ok("signal", "send", "go", value)
        wait_for(lambda n=n: ti(cli, "once") == ("success", n))  # type: ignore[misc]
        assert (out / f"once-{n}").read_text() == value
    assert tries(cli, "once") == [(1, "success"), (2, "success"), (3, "success")]
    cli.ok("signal", "send", "ctl", "stop")
    wait_for(lambda: cli.json("timeline", "sig")[0]["state"] == "success")


def test_a_function_rule_decides_and_none_does_nothing(running: tuple[Cli, Any]) -> None:
    cli, out = running
    cli.ok("signal", "send", "ctl", "start")
    wait_for(lambda: ti(cli, "forever") == ("running", 1))
    cli.ok("signal", "send", "even", "3")  # the rule answers NONE
    cli.ok("signal", "send", "ctl", "nothing-mapped")  # a value map without it: NONE
    cli.ok("signal", "send", "even", "4")  # START
    wait_for(lambda: ti(cli, "once") == ("success", 1))
    assert (out / "once-1").read_text() == "4"
    assert ("even", "START", "armed") in actions(cli)
    assert not [a for a in actions(cli) if a[0] == "even" and a[1] != "START"]
    assert ti(cli, "forever") == ("running", 1)
    cli.ok("signal", "send", "ctl", "stop")
    wait_for(lambda: cli.json("timeline", "sig")[0]["state"] == "success")


def test_finished_tasks_send_task_state_signals(running: tuple[Cli, Any]) -> None:
    cli, _out = running
    cli.ok("signal", "send", "go", "x")  # no active run: START creates one
    wait_for(lambda: cli.json("timeline", "sig") and cli.json("timeline", "sig")[0]["state"] == "success")
    states = [s["value"] for s in cli.json("signal", "list", "ledger.task.sig.once")]
    assert states == ["running", "success"]
    assert [s["value"] for s in cli.json("signal", "list", "ledger.task.sig.forever")] == ["skipped"]
    listed = cli.json("events", "--dag", "sig", "--kind", "task_state_signal")  # and they show in `ledger events`
    assert [(e["details"]["task_id"], e["details"]["state"]) for e in listed if e["details"]["task_id"] == "once"] \
        == [("once", "running"), ("once", "success")]
    run_id = cli.json("timeline", "sig")[0]["run_id"]
    assert all(e["dag_id"] == "sig" and e["run_id"] == str(run_id) for e in listed)
    assert not [e for e in cli.json("events", "--dag", "sig", "--no-task-signals") if e["kind"] == "task_state_signal"]


def test_the_clickstream_example_streams_until_stopped(ready_cli: Cli, tmp_path: Any) -> None:
    cli = ready_cli
    cli.write_dag("clickstream.py", (REPO / "examples" / "dags" / "clickstream.py").read_text())
    env = {**cli.env, **FAST, "CLICKSTREAM_BATCH_SECONDS": "0.5"}
    proc = launcher.popen([LEDGER, "scheduler", "--parallelism", "2"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    try:
        cli.ok("signal", "send", "clickstream.control", "start")
        wait_for(lambda: len(tries_of(cli, "load_batch")) >= 3, timeout=60)
        cli.ok("signal", "send", "clickstream.control", "stop")
        wait_for(lambda: cli.json("timeline", "clickstream")[0]["state"] == "success", timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert [s for _n, s in tries_of(cli, "stream")] == ["stopped"]
    loads = tries_of(cli, "load_batch")
    assert loads and all(s == "success" for _n, s in loads)
    batches = cli.json("signal", "list", "clickstream.batch")
    assert len(batches) >= len(loads) >= 3
    assert [b["version"] for b in batches] == list(range(1, len(batches) + 1))


def tries_of(cli: Cli, task_id: str) -> list[tuple[int, str]]:
    return [(n, s) for n, s in query(
        cli, "SELECT tt.try_number, tt.state FROM task_try tt JOIN task_instance ti ON ti.id = tt.task_instance_id "
             "WHERE ti.task_id=? ORDER BY tt.try_number", task_id)]


def test_a_storm_of_signals_is_all_stored_and_the_scheduler_stays_responsive(running: tuple[Cli, Any]) -> None:
    """10,000 signals nobody listens to and 2,000 STARTs for one task, sent as fast as possible from
    another process while the scheduler runs: all are stored, the STARTs coalesce into a few tries,
    the scheduler's cursor passes the last START, and a STOP is still acted on at once."""
    cli, _out = running
    cli.ok("signal", "send", "ctl", "start")
    wait_for(lambda: ti(cli, "forever") == ("running", 1))
    storm = (
        "from pathlib import Path\n"
        "from ledger.infra.config import load_settings\n"
        "from ledger.store.db import make_engine, make_sessions\n"
        "from ledger.services.signal_service import SignalService\n"
        "s = load_settings(); e = make_engine(s.database_url)\n"
        "svc = SignalService(e, make_sessions(e), s.home)\n"
        "for i in range(100):\n"
        "    svc.send_many([('noise', str(i * 100 + j), None) for j in range(100)], sender='storm')\n"
        "    if i % 5 == 0:\n"
        "        svc.send_many([('go', str(i * 100 + j), None) for j in range(100)], sender='storm')\n"
    )
    import sys
    done = subprocess.run([sys.executable, "-c", storm], env=cli.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert query(cli, "SELECT key, count(*), max(version) FROM signal WHERE key IN ('noise', 'go') "
                      "GROUP BY key ORDER BY key") == [("go", 2000, 2000), ("noise", 10000, 10000)]
    newest = query(cli, "SELECT max(id) FROM signal WHERE key = 'go'")[0][0]  # 'noise' is not even read
    wait_for(lambda: query(cli, "SELECT version FROM signal_cursor WHERE listener='ledger.scheduler'")[0][0]
             >= newest, timeout=120)
    wait_for(lambda: (ti(cli, "once") or ("", 0))[0] == "success", timeout=120)
    assert 1 <= ti(cli, "once")[1] <= 2000  # type: ignore[index]
    cli.ok("signal", "send", "ctl", "stop")  # still acted on (how soon is benchmarks/signal_latency.py's to say)
    wait_for(lambda: ti(cli, "forever") == ("stopped", 1), timeout=60)
    wait_for(lambda: cli.json("timeline", "sig")[0]["state"] == "success")
