"""Airflow's HTTP provider in ledger's namespace (ledger/airflow_compat/http.py): HttpOperator, HttpSensor and
HttpHook against a real HTTP server on loopback started by the test, with the connection from an AIRFLOW_CONN_*
variable. Run in process by `ledger dags test`'s loop, each try in a forked child as under the scheduler."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

DAG_FILE = """\
import json
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.providers.http.hooks.http import HttpHook
from airflow.providers.http.operators.http import HttpOperator, SimpleHttpOperator
from airflow.providers.http.sensors.http import HttpSensor

with DAG("http_calls", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    ready = HttpSensor(task_id="ready", http_conn_id="api", endpoint="ready", poke_interval=0, timeout=60)
    post = HttpOperator(task_id="post", http_conn_id="api", endpoint="items", method="POST",
                        data=json.dumps({"day": "{{ ds }}"}), headers={"Content-Type": "application/json"},
                        response_check=lambda response: response.json()["stored"],
                        response_filter=lambda response: response.json()["id"])
    get = SimpleHttpOperator(task_id="get", http_conn_id="api", endpoint="items/{{ ti.xcom_pull(task_ids='post') }}",
                             method="GET")

    @task
    def missing():
        try:
            HttpHook("GET", http_conn_id="api").run("nothing/here")
        except Exception as exc:
            return str(exc)

    ready >> post >> get >> missing()
"""


class Api(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str]] = []
    ready_after = 1  # /ready answers 404 this many times, then 200

    def _answer(self, status: int, body: Any) -> None:
        text = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def do_GET(self) -> None:
        Api.seen.append(("GET", self.path, ""))
        if self.path == "/ready":
            waits = sum(1 for method, path, _ in Api.seen if path == "/ready")
            self._answer(404 if waits <= Api.ready_after else 200, {})
        elif self.path == "/items/7":
            self._answer(200, {"id": 7, "day": "2024-03-05"})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"])).decode()
        Api.seen.append(("POST", self.path, body))
        self._answer(201, {"stored": True, "id": 7})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    Api.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_http_operator_sensor_and_hook_call_a_real_server_through_an_airflow_conn_variable(
        api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_API", api)
    (tmp_path / "http_calls.py").write_text(DAG_FILE)
    loaded = load_file(str(tmp_path / "http_calls.py"), str(tmp_path))
    assert loaded.error is None, loaded.error
    lines: list[str] = []
    run = local_testing.TestRun.of(loaded.dags[0], pendulum.datetime(2024, 3, 5, tz="UTC"), None, tmp_path)
    state = local_testing.test_dag(run, lines.append)
    log = "\n".join(lines)
    assert state is RunState.SUCCESS, log
    assert run.xcom["post"]["return_value"] == 7
    assert json.loads(run.xcom["get"]["return_value"]) == {"id": 7, "day": "2024-03-05"}
    assert run.xcom["missing"]["return_value"] == "404:Not Found"
    assert [s for s in Api.seen if s[1] == "/ready"] == [("GET", "/ready", "")] * 2  # not yet, then ready
    assert ("POST", "/items", '{"day": "2024-03-05"}') in Api.seen
