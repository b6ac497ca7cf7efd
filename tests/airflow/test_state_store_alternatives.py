"""What decision 0312 names instead of Airflow 3.3's asset state store, run as its line says under the real
scheduler: an asset's watermark is the extra of its newest event. Airflow's example_asset_state_store (a producer
that reads its watermark, loads what is newer and advances it; a consumer that reads what the producer loaded),
ported that way, keeps its watermark across runs and hands it to the consumer, each value an event on the
timeline."""

from __future__ import annotations

from typing import Any

from tests.conftest import Cli

PORTED = '''\
import pendulum
from airflow.sdk import DAG, Asset, Metadata, task

ORDERS = Asset(name="orders/daily", uri="s3://warehouse/orders/daily")

with DAG("orders_producer", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    @task(inlets=[ORDERS], outlets=[ORDERS])
    def load(inlet_events=None, ds=None):
        newest = inlet_events[ORDERS][-1].extra if inlet_events[ORDERS] else {}
        watermark = newest.get("watermark", "2024-01-01")
        runs = newest.get("total_runs", 0) + 1
        yield Metadata(ORDERS, {"watermark": ds, "total_runs": runs, "prev_watermark": watermark})
        return [watermark, runs]

    load()

with DAG("orders_consumer", schedule=[ORDERS], start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    @task(inlets=[ORDERS])
    def consume(inlet_events=None):
        extra = inlet_events[ORDERS][-1].extra
        return [extra["prev_watermark"], extra["watermark"], extra["total_runs"]]

    consume()
'''


def value(cli: Cli, dag_id: str, run: dict[str, Any], task_id: str) -> Any:
    [row] = [r for r in cli.json("tasks", "xcom", dag_id, str(run["run_id"]), task_id) if r["key"] == "return_value"]
    return row["value"]


def test_an_assets_watermark_kept_as_its_newest_events_extra_carries_across_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    (cli.dags / "orders.py").write_text(PORTED)
    assert cli.json("dags", "errors") == []
    for day in ("2024-03-05", "2024-03-06"):  # one run at a time: the second reads the first's event
        cli.ok("trigger", "orders_producer", "--logical-date", day)
        cli.ok("scheduler", "--exit-when-idle", LEDGER_POLL_INTERVAL="0.2")
    first, second = sorted(cli.json("timeline", "orders_producer"), key=lambda r: r["logical_date"])
    assert value(cli, "orders_producer", first, "load") == ["2024-01-01", 1]  # no event yet: the default
    assert value(cli, "orders_producer", second, "load") == ["2024-03-05", 2]  # the first run's watermark
    consumed = sorted(cli.json("timeline", "orders_consumer"), key=lambda r: r["logical_date"])
    assert [r["state"] for r in consumed] == ["success", "success"]
    assert value(cli, "orders_consumer", consumed[-1], "consume") == ["2024-03-05", "2024-03-06", 2]
