"""`ledger scheduler --metrics-port N` serves Prometheus metrics: scraped from a real running scheduler."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable

from tests import launcher
from tests.conftest import LEDGER, Cli

METRICS_DAG = """
import pendulum
from datetime import timedelta
from ledger import DAG, BashTask

with DAG("m", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True) as dag:
    BashTask("a", "true") >> BashTask("b", "exit 1", retries=1, retry_delay=timedelta(0))

with DAG("on_signal", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as driven:
    BashTask("go", "true", signals={"metrics.go": "START"})
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _value(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_running_scheduler_serves_its_metrics(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("m.py", METRICS_DAG)
    cli.write_dag("broken.py", "import nothing_by_this_name\n")
    port = _free_port()
    proc = launcher.popen([LEDGER, "scheduler", "--metrics-port", str(port)], env=cli.env, cwd=cli.home,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/metrics"

    def scrape_until(done: Callable[[str], bool]) -> str:
        text, until = "", time.monotonic() + 90
        while time.monotonic() < until:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    text = answer.read().decode()
            except OSError:
                text = ""
            if done(text):
                break
            time.sleep(0.3)
        return text

    try:
        text = scrape_until(lambda t: _value(t, "ledger_task_instances_finished_total", '{state="failed"}') >= 3)
        cli.ok("signal", "send", "metrics.go", "now")  # a manual run created by a signal, its task started
        later = scrape_until(lambda t: _value(t, "ledger_task_instances_finished_total", '{state="success"}') >= 4)
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
    assert f"metrics on http://127.0.0.1:{port}/metrics" in output
    assert _value(text, "ledger_task_instances_finished_total", '{state="success"}') == 3  # a of 3 runs
    assert _value(text, "ledger_task_instances_finished_total", '{state="up_for_retry"}') == 3
    assert _value(text, "ledger_task_instances_finished_total", '{state="failed"}') == 3
    assert _value(text, "ledger_tries_started_total") == 9
    assert _value(text, "ledger_runs_created_total", '{run_type="scheduled"}') == 3
    assert _value(text, "ledger_loop_duration_seconds_count") > 0
    assert _value(text, "ledger_task_lag_seconds_count") == 9
    assert "ledger_queue_depth" in text and "ledger_running_tries" in text
    assert _value(text, "ledger_signals_handled_total") == 0
    broken = str(cli.dags / "broken.py")
    assert _value(text, "ledger_dag_file_import_errors", f'{{file="{broken}"}}') == 1
    assert _value(text, "ledger_dag_file_import_errors", f'{{file="{cli.dags / "m.py"}"}}') == 0
    assert _value(text, "ledger_dag_file_parse_seconds", f'{{file="{cli.dags / "m.py"}"}}') > 0
    # the signal: one action taken, one manual run created, its try started and succeeded
    assert _value(later, "ledger_signals_handled_total") >= 1, later
    assert _value(later, "ledger_runs_created_total", '{run_type="manual"}') == 1
    assert _value(later, "ledger_runs_created_total", '{run_type="scheduled"}') == 3
    assert _value(later, "ledger_tries_started_total") == 10


def test_a_metrics_port_in_use_is_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(exist_ok=True)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli.fails("scheduler", "--exit-when-idle", "--metrics-port", str(port))
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr
