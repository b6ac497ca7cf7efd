"""OpenLineage through the real CLI: `ledger scheduler` with OPENLINEAGE_URL sends every try's START and its
COMPLETE / FAIL / ABORT to a real HTTP receiver on loopback; each event is checked (tests/openlineage/receiver.py)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from typing import Any

from ledger.core.openlineage_ids import run_uuid
from tests.conftest import LEDGER, Cli
from tests.openlineage.receiver import check_event, receiving

FAST = {"LEDGER_POLL_INTERVAL": "0.2", "LEDGER_OPENLINEAGE_POLL_INTERVAL": "0.1"}

SALES = """
import json
from datetime import timedelta

import pendulum
from ledger import DAG, BashTask, PythonTask, Dataset, TimePartitions

RAW = Dataset("warehouse.raw_sales")
SALES = Dataset("s3://lake/sales", partitions=TimePartitions("daily", timezone="UTC"))

def load(context):
    import os
    from pathlib import Path
    from ledger.sdk.openlineage import spark_properties
    (Path(os.environ["LEDGER_HOME"]) / f"spark-{context.run_id}.json").write_text(json.dumps(spark_properties()))
    context.record_write("s3://lake/sales", context.logical_date.date().isoformat(), rows=3)

with DAG("sales", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 2, tz="UTC"), catchup=True):
    load_task = PythonTask("load", load, inlets=[RAW], outlets=[SALES])
    # fails its first try, succeeds its second
    load_task >> BashTask("publish", '[ "$LEDGER_TRY_NUMBER" -gt 1 ]', retries=1,
                                  retry_delay=timedelta(0))
"""


def facet_of(event: dict[str, Any]) -> dict[str, Any]:
    return dict(event["run"]["facets"]["ledger"])


def by_job_and_type(events: list[dict[str, Any]]) -> list[tuple[str, str, int, int]]:
    """(job name, event type, ledger run id, try number) of each event, in the order received."""
    return [(e["job"]["name"], e["eventType"], int(e["run"]["facets"]["ledger"]["dagRun"]["runId"]),
             e["run"]["facets"]["ledger"]["tryNumber"]) for e in events]


def test_every_try_is_sent_as_a_start_and_its_end_with_the_runs_place_in_the_timeline(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("sales.py", SALES)
    with receiving() as (url, got):
        env = {**FAST, "OPENLINEAGE_URL": url, "OPENLINEAGE_NAMESPACE": "acme"}
        out = cli.ok("scheduler", "--exit-when-idle", **env)
        assert f"openlineage: relaying tries to {url} (namespace acme)" in out, out
        assert "openlineage: 12 event(s) sent, 0 dropped" in out, out
        first = list(got.events)
        # a backfill (no relay of its own) overrides 2024-03-01; the next scheduler sends its tries
        cli.ok("backfill", "sales", "--start", "2024-03-01", "--end", "2024-03-01", "--reprocess", "completed",
               "--yes")
        out = cli.ok("scheduler", "--exit-when-idle", **env)
        assert "openlineage: 6 event(s) sent, 0 dropped" in out, out
        events = list(got.events)
    assert set(got.paths) == {"/api/v1/lineage"}
    for e in events:
        check_event(e)
    seen = by_job_and_type(first)
    for run_id in (1, 2):
        mine = [s for s in seen if s[2] == run_id]
        assert mine == [("sales.load", "START", run_id, 1), ("sales.load", "COMPLETE", run_id, 1),
                        ("sales.publish", "START", run_id, 1), ("sales.publish", "FAIL", run_id, 1),
                        ("sales.publish", "START", run_id, 2), ("sales.publish", "COMPLETE", run_id, 2)], seen
    start, end = [e for e in first if e["job"]["name"] == "sales.load" and facet_of(e)["dagRun"]["runId"] == "1"]
    assert start["run"]["runId"] == end["run"]["runId"] == run_uuid("acme", "sales", 1, "load", -1, 1)
    assert start["job"] == {**start["job"], "namespace": "acme", "name": "sales.load"}
    parent = start["run"]["facets"]["parent"]
    assert parent["run"]["runId"] == run_uuid("acme", "sales", 1) and parent["job"]["name"] == "sales"
    assert [(d["namespace"], d["name"]) for d in end["inputs"]] == [("acme", "warehouse.raw_sales")]
    assert [(d["namespace"], d["name"]) for d in end["outputs"]] == [("s3://lake", "sales")]
    ledger = end["run"]["facets"]["ledger"]
    # runs 1 and 2 load side by side, so which of them made dataset event 1 is the machine's choice
    written = {facet_of(e)["dagRun"]["runId"]: facet_of(e)["partitionsWritten"] for e in first
               if e["job"]["name"] == "sales.load" and e["eventType"] == "COMPLETE"}
    assert sorted(w[0]["event_id"] for w in written.values()) == ["1", "2"], written
    assert ledger["partitionsWritten"] == [{"dataset": "s3://lake/sales", "partition": "2024-03-01",
                                            "event_id": written["1"][0]["event_id"]},
                                           {"dataset": "s3://lake/sales", "partition": "2024-03-01", "rows": 3}]
    runs = {r["run_id"]: r for r in cli.json("timeline", "sales", "--all")}
    assert ledger["versionHash"] == runs["1"]["dag_version"] and re.fullmatch("[0-9a-f]{64}", ledger["codeSnapshot"])
    assert "previous" not in ledger and "overriddenBy" not in ledger  # (null: left out)
    second = next(facet_of(e) for e in first if facet_of(e)["dagRun"]["runId"] == "2")
    assert second["previous"] == {"runId": "1", "openlineageRunId": run_uuid("acme", "sales", 1)}
    # what the try hands a Spark application joins its lineage to the try's
    spark = json.loads((cli.home / "spark-1.json").read_text())
    assert spark["spark.openlineage.parentRunId"] == start["run"]["runId"], spark
    assert spark["spark.openlineage.rootParentRunId"] == parent["run"]["runId"], spark
    assert (spark["spark.openlineage.parentJobName"], spark["spark.openlineage.parentJobNamespace"]) == (
        "sales.load", "acme")
    # the backfill's run 3 replaced run 1: its tries say so
    later = events[len(first):]
    assert {s[2] for s in by_job_and_type(later)} == {3}
    facet = later[0]["run"]["facets"]["ledger"]
    assert facet["overrode"] == [{"runId": "1", "openlineageRunId": run_uuid("acme", "sales", 1)}]
    assert facet["dagRun"]["runType"] == "backfill" and facet["dagRun"]["backfillId"] == "1"
    assert later[0]["run"]["facets"]["parent"]["run"]["runId"] == run_uuid("acme", "sales", 3)


ONE_TASK = """
import pendulum
from ledger import DAG, BashTask

with DAG("ops", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    BashTask("a", {command!r})
"""


def a_refusing_url() -> str:
    """The URL of a loopback port nobody listens on: a backend that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_a_backend_that_is_down_fails_no_try_and_its_drops_are_counted(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", ONE_TASK.format(command="true"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    out = cli.ok("scheduler", "--exit-when-idle", **FAST, OPENLINEAGE_URL=a_refusing_url(),
                 LEDGER_OPENLINEAGE_DRAIN_TIMEOUT="0")
    assert [r["state"] for r in cli.json("timeline", "ops")] == ["success"]
    assert len([line for line in out.splitlines() if "openlineage: cannot send events" in line]) <= 1, out
    assert "openlineage: 0 event(s) sent, 2 dropped" in out, out


def test_a_try_an_operator_stops_ends_with_abort(ready_cli: Cli) -> None:
    cli = ready_cli
    started = cli.home / "started"
    cli.write_dag("ops.py", ONE_TASK.format(command=f"touch {started}; sleep 600"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    with receiving() as (url, got):
        proc = subprocess.Popen([LEDGER, "scheduler"], env={**cli.env, **FAST, "OPENLINEAGE_URL": url},
                                cwd=cli.home, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 120
            while not started.exists():  # the try's command writes it once it runs
                assert time.monotonic() < deadline and proc.poll() is None, "the try never started"
                time.sleep(0.1)
            cli.ok("runs", "cancel", "1")
            with got.changed:
                assert got.changed.wait_for(lambda: len(got.events) >= 2, timeout=120), got.events
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=120)
    for e in got.events:
        check_event(e)
    assert [(e["eventType"], facet_of(e)["tryState"]) for e in got.events] == [("START", "running"),
                                                                                 ("ABORT", "stopped")], out


def test_an_openlineage_configuration_that_cannot_be_used_is_one_line_and_nothing_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("ops.py", ONE_TASK.format(command="true"))
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01")
    (cli.home / "openlineage.yml").write_text("transport:\n  type: nosuch\n")
    result = cli.run("scheduler", "--exit-when-idle", **FAST, OPENLINEAGE_CONFIG=str(cli.home / "openlineage.yml"))
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        "Error: the OpenLineage client's configuration is not usable: ImportError: Failed to import nosuch"
    ], result.stderr
    assert [r["state"] for r in cli.json("timeline", "ops")] == ["queued"]
