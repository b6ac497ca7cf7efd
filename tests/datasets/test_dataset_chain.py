"""Data-aware scheduling through the real CLI: a chain of three DAGs over two partitioned datasets, rewrites that
flow down, and Airflow-style (unpartitioned) dataset triggers."""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.backfill.test_backfill_cli import db, schedule, timeline
from tests.conftest import Cli
from tests.web.test_pages import text_of

CHAIN = """
import pendulum
from ledger import DAG, BashTask, PythonTask, Dataset, TimePartitions

RAW = Dataset("sales_raw", partitions=TimePartitions("daily", timezone="UTC"))
CLEAN = Dataset("sales_clean", partitions=TimePartitions("daily", timezone="UTC"))

def ingest(context):
    context.record_write("sales_raw", context.logical_date.date().isoformat(), rows=10)

with DAG("ingest", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 3, tz="UTC"), catchup=True):
    PythonTask("load", ingest, outlets=[RAW])

with DAG("clean", schedule=[RAW]):
    BashTask("clean", "true", outlets=[CLEAN])

with DAG("report", schedule=CLEAN):
    BashTask("report", "true")
"""


def assert_invariant(cli: Cli) -> None:
    for dag_id in ("ingest", "clean", "report"):
        timeline(cli, dag_id)


def web_text(cli: Cli, *paths: str) -> list[str]:
    """The pages as a person reads them (tags dropped, blanks collapsed); a path under /api/v1: its JSON text."""
    settings = load_settings({"LEDGER_HOME": str(cli.home)})
    texts = []
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, response.text
            texts.append(response.text if path.startswith("/api/") else text_of(response.text))
    return texts


def live(cli: Cli, dag_id: str) -> dict[str, dict[str, Any]]:
    return {r["logical_date"][:10]: r for r in timeline(cli, dag_id) if r["state"] != "overridden"}


def test_a_chain_catches_up_partition_by_partition_with_each_partitions_interval(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("chain.py", CHAIN)
    schedule(cli)
    for dag_id in ("ingest", "clean", "report"):
        runs = live(cli, dag_id)
        assert sorted(runs) == ["2024-03-01", "2024-03-02", "2024-03-03"], (dag_id, runs)
        assert all(r["state"] == "success" for r in runs.values())
    report = live(cli, "report")["2024-03-02"]
    assert report["run_type"] == "dataset_triggered"
    assert (report["data_interval_start"], report["data_interval_end"]) == (
        "2024-03-02T00:00:00+00:00", "2024-03-03T00:00:00+00:00")
    shown = cli.json("runs", "show", report["run_id"])
    (consumed,) = shown["consumed"]
    assert (consumed["dataset"], consumed["partition"]) == ("sales_clean", "2024-03-02")
    assert consumed["written_by"]["dag_id"] == "clean"
    listed = {d["dataset"]: d for d in cli.json("datasets", "list")}
    api_list, api_one = web_text(cli, "/api/v1/datasets", "/api/v1/datasets/sales_clean")
    assert json.loads(api_list) == cli.json("datasets", "list")
    assert json.loads(api_one) == cli.json("datasets", "show", "sales_clean")
    assert [r["consumers"] for r in json.loads(api_one)["matrix"]] == [{"report": "current"}] * 3
    assert listed["sales_raw"]["producers"] == ["ingest.load"] and listed["sales_raw"]["consumers"] == ["clean"]
    assert listed["sales_clean"]["events"] == 3


def test_upstream_rewrites_mark_consumer_runs_stale_and_downstream_reruns_them_in_order(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("chain.py", CHAIN)
    schedule(cli)
    cli.ok("backfill", "ingest", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed", "--yes")
    assert_invariant(cli)
    stale = cli.json("lineage", "--stale")
    assert [(s["dag_id"], s["logical_date"][:10]) for s in stale] == [("clean", "2024-03-02")]
    assert stale[0]["stale_because"]["written_by"]["dag_id"] == "ingest"
    assert live(cli, "clean")["2024-03-02"]["stale"] is True
    assert live(cli, "clean")["2024-03-01"]["stale"] is False
    web = web_text(cli, "/datasets/sales_raw", "/dags/clean", f"/runs/{live(cli, 'clean')['2024-03-02']['run_id']}")
    assert re.search(r"2024-03-03 \d+ current 2024-03-02 \d+ stale 2024-03-01 \d+ current", web[0]), web[0]
    assert "⚠ stale: sales_raw 2024-03-02 rewritten by run" in web[1]
    assert re.search(r"dataset events this run consumed .* sales_raw 2024-03-02 \d+ ingest.load run", web[2])
    assert "stale" in cli.ok("timeline", "clean")
    schedule(cli)  # `mark` (the default): nothing re-runs
    assert len(timeline(cli, "clean")) == 3
    assert_invariant(cli)
    # a clear rewrites too: its new try's event makes the report run of that date stale
    cli.ok("tasks", "clear", "clean", live(cli, "clean")["2024-03-01"]["run_id"])
    schedule(cli)
    assert [(s["dag_id"], s["logical_date"][:10]) for s in cli.json("lineage", "--stale")] == [
        ("clean", "2024-03-02"), ("report", "2024-03-01")]
    assert_invariant(cli)
    # with --downstream, the consumers re-run as overrides, in dependency order, each naming its cause
    before = {d: live(cli, d)["2024-03-02"]["run_id"] for d in ("clean", "report")}
    plan = cli.json("backfill", "ingest", "--start", "2024-03-02", "--end", "2024-03-03", "--reprocess",
                    "completed", "--downstream", "--dry-run", "--json")
    assert [(p["dag_id"], p["logical_date"][:10]) for p in plan["downstream"]] == [
        ("clean", "2024-03-02"), ("clean", "2024-03-03"), ("report", "2024-03-02"), ("report", "2024-03-03")]
    cli.ok("backfill", "ingest", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed",
           "--downstream", "--yes")
    assert_invariant(cli)
    assert [b["downstream"] for b in cli.json("backfill", "list")] == [True, False]  # newest first
    schedule(cli)
    assert_invariant(cli)
    # re-run down the chain: what is left stale is the run outside the backfill's range (the clear's)
    left = cli.json("lineage", "--stale")
    assert [(s["dag_id"], s["logical_date"][:10]) for s in left] == [("report", "2024-03-01")]
    for dag_id in ("clean", "report"):
        runs = timeline(cli, dag_id)
        assert len(runs) == 4
        now = live(cli, dag_id)["2024-03-02"]
        assert now["run_id"] != before[dag_id] and now["state"] == "success"
        (why,) = [e for e in cli.json("events", "--run", now["run_id"]) if e["kind"] == "dataset_rerun"]
        (cause,) = why["details"]["cause"]
        upstream = "ingest" if dag_id == "clean" else "clean"
        assert cause["written_by"]["dag_id"] == upstream
        assert (cause["written_by"]["backfill_id"] is not None) == (upstream == "ingest")  # the backfill's write
        assert cause["partition"] == "2024-03-02"
    clean_rerun = live(cli, "clean")["2024-03-02"]["run_id"]
    (why,) = [e for e in cli.json("events", "--run", live(cli, "report")["2024-03-02"]["run_id"])
              if e["kind"] == "dataset_rerun"]
    (cause,) = why["details"]["cause"]
    assert cause["written_by"]["run_id"] == clean_rerun


READING = CHAIN.replace('BashTask("report", "true")', 'BashTask("report", "true", inlets=[CLEAN])')


def caught_up(cli: Cli, dag_file: str) -> Cli:
    """`cli` with the chain of `dag_file` written and caught up by a scheduler."""
    cli.write_dag("chain.py", dag_file)
    schedule(cli)
    return cli


def matrix(cli: Cli, dataset: str) -> dict[str, dict[str, str]]:
    return {r["partition"]: r["consumers"] for r in cli.json("datasets", "show", dataset)["matrix"]}


def test_a_cleared_consumer_run_that_reads_the_rewritten_partition_is_current_again(ready_cli: Cli) -> None:
    cli = caught_up(ready_cli, READING)
    cli.ok("tasks", "clear", "clean", live(cli, "clean")["2024-03-03"]["run_id"])  # rewrites sales_clean 03-03
    schedule(cli)
    report = live(cli, "report")["2024-03-03"]["run_id"]
    (stale,) = cli.json("lineage", "--stale")
    assert (stale["dag_id"], stale["run_id"]) == ("report", report)
    newest = stale["stale_because"]["event_id"]
    assert stale["read"]["event_id"] != newest
    assert matrix(cli, "sales_clean")["2024-03-03"] == {"report": "stale"}
    assert live(cli, "report")["2024-03-03"]["stale"] is True
    cli.ok("tasks", "clear", "report", report)  # the re-run reads the newest event of its partition
    schedule(cli)
    read = cli.json("runs", "show", report)["inlets_read"]
    assert [(r["try_number"], r["event_id"]) for r in read] == [(1, stale["read"]["event_id"]), (2, newest)]
    assert cli.json("lineage", "--stale") == []
    assert matrix(cli, "sales_clean")["2024-03-03"] == {"report": "current"}
    assert live(cli, "report")["2024-03-03"]["stale"] is False
    (page,) = web_text(cli, "/datasets/sales_clean")
    assert "stale" not in page, page
    assert len(timeline(cli, "report")) == 3  # current, so nothing re-runs it


def test_lineage_of_a_dataset_written_through_outlets_names_each_partitions_run_try_and_version(
        ready_cli: Cli) -> None:
    cli = caught_up(ready_cli, CHAIN)
    clean = live(cli, "clean")["2024-03-02"]["run_id"]
    cli.ok("tasks", "clear", "clean", clean)
    schedule(cli)
    (part,) = cli.json("lineage", "sales_clean", "--partition", "2024-03-02")
    first, second = part["history"]
    assert part["current"] == second
    assert [(w["source"], w["run_id"], w["task_id"], w["try_number"]) for w in (first, second)] == [
        ("event", clean, "clean", 1), ("event", clean, "clean", 2)]
    assert second["event_id"] == cli.json("datasets", "show", "sales_clean")["matrix"][1]["event_id"]
    assert second["dag_version"] == cli.json("dags", "versions", "clean")[-1]["version"]
    assert [p["partition"] for p in cli.json("lineage", "sales_clean")] == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert f"run {clean} v " in cli.ok("lineage", "sales_clean")  # the earlier write, and the try it came from
    # a dataset whose tries record writes too lists each write once, with its rows
    raw = cli.json("lineage", "sales_raw", "--partition", "2024-03-02")
    assert [(w["source"], w["rows"]) for w in raw[0]["history"]] == [("write", 10)]
    missing = cli.fails("lineage", "sales_clean", "--partition", "2024-04-01").stderr
    assert "no recorded write of partition '2024-04-01' of dataset 'sales_clean'; `ledger lineage sales_clean`" \
        in missing
    assert "known datasets: sales_clean, sales_raw" in cli.fails("lineage", "nope").stderr


def test_a_manual_run_replacing_a_consumer_run_is_the_partitions_run_and_goes_stale_on_a_rewrite(
        ready_cli: Cli) -> None:
    cli = caught_up(ready_cli, CHAIN)
    old = live(cli, "report")["2024-03-02"]["run_id"]
    out = cli.ok("trigger", "report", "--logical-date", "2024-03-02", "--replace")
    assert "(interval 2024-03-02T00:00:00+00:00 to 2024-03-03T00:00:00+00:00)" in out
    schedule(cli)
    manual = live(cli, "report")["2024-03-02"]
    assert (manual["run_type"], manual["state"]) == ("manual", "success") and manual["run_id"] != old
    (consumed,) = cli.json("runs", "show", manual["run_id"])["consumed"]
    assert (consumed["dataset"], consumed["partition"], consumed["cause"]) == ("sales_clean", "2024-03-02", False)
    assert matrix(cli, "sales_clean")["2024-03-02"] == {"report": "current"}
    cli.ok("tasks", "clear", "clean", live(cli, "clean")["2024-03-02"]["run_id"])  # a rewrite of its partition
    schedule(cli)
    assert [s["run_id"] for s in cli.json("lineage", "--stale")] == [manual["run_id"]]
    assert matrix(cli, "sales_clean")["2024-03-02"] == {"report": "stale"}


AIRFLOW_STYLE = """
import pendulum
from ledger import DAG, BashTask, PythonTask, Dataset, DatasetAlias, DatasetOrTimeSchedule

A, B = Dataset("s3://bucket/a"), Dataset("s3://bucket/b")

def produce_a(context):
    context.outlet_events[A].extra = {"rows": 5}

with DAG("make_a", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("a", produce_a, outlets=[A])

LATE = DatasetAlias("late")

def produce_b(context):
    context.outlet_events[LATE].add(Dataset("s3://bucket/late"), extra={"n": 1})

with DAG("make_b", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("b", produce_b, outlets=[B, LATE])

with DAG("via_alias", schedule=LATE):
    BashTask("t", "true")

def read_events(context):
    events = context.triggering_dataset_events
    context.xcom_push("seen", {uri: [e["extra"] for e in evs] for uri, evs in events.items()})

with DAG("on_both", schedule=A & B):
    PythonTask("t", read_events)

def read_inlets(*, inlet_events=None):  # Airflow 2.10+'s way: the inlets' events, oldest first
    return {"extra": inlet_events[A][-1].extra, "count": len(inlet_events[A]), "late": len(inlet_events[LATE])}

with DAG("on_either", schedule=A | B):
    BashTask("t", "true")
    PythonTask("r", read_inlets, inlets=[A, LATE])

with DAG("daily_or_a", schedule=DatasetOrTimeSchedule(timetable="@daily", datasets=[A]),
         start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), end_date=pendulum.datetime(2024, 3, 2, tz="UTC"),
         catchup=True):
    BashTask("t", "true")
"""


def test_unpartitioned_datasets_trigger_as_in_airflow(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("af.py", AIRFLOW_STYLE)
    schedule(cli)
    cli.ok("trigger", "make_a")
    schedule(cli)
    assert len(timeline(cli, "on_either")) == 1 and timeline(cli, "on_both") == []
    with db(cli) as conn:  # the fast path: the transaction that recorded the event made the run and queued its task
        ((recorded, queued),) = conn.execute(
            "SELECT e.created_at, ti.queued_at FROM dataset_event e JOIN dataset_consumed c ON c.event_id = e.id "
            "JOIN task_instance ti ON ti.run_id = c.run_id "
            "WHERE c.dag_id = 'on_either' AND ti.task_id = 't'").fetchall()
    assert queued == recorded
    assert [r["run_type"] for r in timeline(cli, "daily_or_a")] == ["scheduled", "scheduled", "dataset_triggered"]
    cli.ok("trigger", "make_b")
    schedule(cli)
    (both,) = timeline(cli, "on_both")
    (aliased,) = timeline(cli, "via_alias")
    (late,) = cli.json("runs", "show", aliased["run_id"])["consumed"]
    assert (late["dataset"], late["alias"], late["extra"]) == ("s3://bucket/late", "late", {"n": 1})
    assert len(timeline(cli, "on_either")) == 2
    second = timeline(cli, "on_either")[-1]["run_id"]
    (value,) = [x["value"] for x in cli.json("tasks", "xcom", "on_either", second, "r") if x["key"] == "return_value"]
    assert value == {"extra": {"rows": 5}, "count": 1, "late": 1}  # what the inlets had when the try was queued
    read = cli.json("runs", "show", second)["inlets_read"]
    assert [(r["task_id"], r["try_number"], r["inlet"], r["dataset"]) for r in read] == [
        ("r", 1, "s3://bucket/a", "s3://bucket/a"), ("r", 1, "late", "s3://bucket/late")]
    assert "what its tries read (inlets)" in cli.ok("runs", "show", second)
    (page,) = web_text(cli, f"/runs/{second}")
    assert "what its tries read (inlets) task try inlet partition event written by r 1 s3://bucket/a" in page
    consumed = cli.json("runs", "show", both["run_id"])["consumed"]
    (seen,) = [x["value"] for x in cli.json("tasks", "xcom", "on_both", both["run_id"], "t") if x["key"] == "seen"]
    assert seen == {"s3://bucket/a": [{"rows": 5}], "s3://bucket/b": [{}]}  # the try saw what made its run
    assert [c["dataset"] for c in consumed] == ["s3://bucket/a", "s3://bucket/b"]
    assert consumed[0]["extra"] == {"rows": 5}
    assert (both["data_interval_start"], both["data_interval_end"]) == (consumed[0]["at"], consumed[1]["at"])
    shown = cli.json("datasets", "show", "s3://bucket/a")
    assert shown["consumers"] == ["daily_or_a", "on_both", "on_either"]
    assert json.dumps(shown["events"][0]["extra"]) == '{"rows": 5}'


HOURLY = """
import pendulum
from ledger import DAG, BashTask, Dataset, TimePartitions

HOURS = TimePartitions("hourly", timezone="Europe/Berlin")
METER = Dataset("meter", partitions=HOURS)
USAGE = Dataset("usage", partitions=HOURS)

with DAG("meter", schedule="@hourly", start_date=pendulum.datetime(2024, 10, 27, tz="Europe/Berlin"),
         end_date=pendulum.datetime(2024, 10, 27, 23, tz="Europe/Berlin"), catchup=True, max_active_runs=30):
    BashTask("read", "true", outlets=[METER])

with DAG("usage", schedule=[METER], on_upstream_rewrite="rerun", max_active_runs=30):
    BashTask("sum", "true", outlets=[USAGE])
"""


def test_an_hourly_chain_across_the_berlin_fall_back_day_has_25_runs_and_reruns_a_rewritten_hour(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("hourly.py", HOURLY)
    schedule(cli)
    meter = {r["logical_date"]: r for r in timeline(cli, "meter")}
    usage = {r["logical_date"]: r for r in timeline(cli, "usage")}
    assert len(meter) == len(usage) == 25  # the day has 25 hours in Berlin, 02:00 twice
    assert sorted(usage) == sorted(meter)
    assert all(u["data_interval_start"] == meter[d]["data_interval_start"]
               and u["data_interval_end"] == meter[d]["data_interval_end"] for d, u in usage.items())
    twice = [p["partition"] for p in cli.json("datasets", "show", "meter")["matrix"] if "T02:00" in p["partition"]]
    assert twice == ["2024-10-27T02:00+02:00", "2024-10-27T02:00+01:00"]  # in time order
    # the second 02:00 (01:00 UTC) rewritten upstream: `on_upstream_rewrite="rerun"` re-runs that hour only
    cli.ok("backfill", "meter", "--start", "2024-10-27T01:00:00+00:00", "--end", "2024-10-27T01:00:00+00:00",
           "--reprocess", "completed", "--yes")
    schedule(cli)
    after = timeline(cli, "usage")
    rerun = [r for r in after if r.get("rerun_because")]
    assert [(r["logical_date"], r["state"]) for r in rerun] == [("2024-10-27T01:00:00+00:00", "success")]
    assert rerun[0]["rerun_because"][0]["partition"] == "2024-10-27T02:00+01:00"
    assert len(after) == 26 and cli.json("lineage", "--stale") == []
    timeline(cli, "meter")


def test_dataset_commands_refuse_bad_input_with_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("chain.py", CHAIN)
    cli.ok("dags", "list")
    missing = cli.fails("datasets", "show", "nope")
    assert missing.exit_code == 1 and "no dataset 'nope'; known datasets: sales_clean, sales_raw" in missing.stderr
    assert cli.fails("lineage").exit_code == 2
    bad = CHAIN.replace('schedule=CLEAN)', 'schedule=CLEAN, on_upstream_rewrite="later")')
    cli.write_dag("chain.py", bad)
    assert "on_upstream_rewrite must be one of mark, rerun" in cli.ok("dags", "errors")


CYCLE = """
import pendulum
from ledger import DAG, BashTask, Dataset, TimePartitions

DAILY = TimePartitions("daily", timezone="UTC")
X = Dataset("x", partitions=DAILY)
Y = Dataset("y", partitions=DAILY)

with DAG("seed", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         end_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=True):
    BashTask("write", "true", outlets=[X])

with DAG("ping", schedule=[X], on_upstream_rewrite="rerun"):
    BashTask("t", "true", outlets=[Y])

with DAG("pong", schedule=[Y], on_upstream_rewrite="rerun"):
    BashTask("t", "true", outlets=[X])
"""


def test_two_dags_on_each_others_datasets_do_not_re_run_each_other_for_their_own_writes(ready_cli: Cli) -> None:
    """ping reads x and writes y, pong reads y and writes x: pong's write of x makes ping's run stale, but that
    write came from ping's own; the scheduler does not re-run it (it would go on for ever) and says why, once.
    A rewrite of x from outside the cycle re-runs each of them once."""
    cli = ready_cli
    cli.write_dag("cycle.py", CYCLE)
    result = cli.run("scheduler", "--exit-when-idle", timeout=120)  # for ever, before
    assert result.exit_code == 0, result.output
    assert [r["state"] for r in timeline(cli, "ping")] == ["success"]
    assert [r["state"] for r in timeline(cli, "pong")] == ["success"]
    refused = cli.json("events", "--kind", "dataset_rerun_refused", "--json")
    assert len(refused) == 1 and refused[0]["dag_id"] == "ping"
    assert refused[0]["details"]["cycle"] == ["ping", "pong"]
    assert refused[0]["details"]["cause"]["written_by"]["dag_id"] == "pong"
    cli.ok("backfill", "seed", "--start", "2024-03-01", "--end", "2024-03-01", "--reprocess", "completed", "--yes")
    schedule(cli)
    assert [r["state"] for r in timeline(cli, "ping") if r["state"] != "overridden"] == ["success"]
    assert len(timeline(cli, "ping")) == len(timeline(cli, "pong")) == 2  # each re-ran once
    assert len(cli.json("events", "--kind", "dataset_rerun_refused", "--json")) == 2
