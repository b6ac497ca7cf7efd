"""The dataset graph (issue 41, part 5): one page for what were the Datasets and Lineage pages, each dataset with its
producers, consumers (DAGs scheduled on it, tasks reading it as an inlet) and partitions written, drawn as SVG by the
server; the old Lineage URLs lead to it. In process on a ledger built by the real CLI (a chain of DAGs over two
partitioned datasets, each write also recorded as lineage), and the drawing's pure layout."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.store.dataset_graph import Newest, Written
from ledger.web.dataset_graph import Dataset, drawing
from tests.conftest import Cli
from tests.web.conftest import app_client, cli_on
from tests.web.test_pages import text_of


@pytest.fixture(scope="module")
def client(datasets_home: Cli) -> Iterator[TestClient]:
    yield from app_client(datasets_home)


def live_run(cli: Cli, dag_id: str, day: str) -> str:
    (run,) = [r["run_id"] for r in cli.json("timeline", dag_id)
              if r["logical_date"].startswith(day) and r["state"] != "overridden"]
    return str(run)


def test_the_dataset_graph_shows_each_dataset_with_producers_consumers_and_partitions_written(
        client: TestClient, datasets_home: Cli) -> None:
    page = client.get("/datasets")
    assert page.status_code == 200
    shown = text_of(page.text)
    # the newest write: of the run that finished last (the scheduler runs two at a time), of its logical date
    found = re.search(r"sales_raw ingest\.load clean \(schedule\), audit\.check \(inlet\) 3 (2024-03-0\d) by run "
                      r"(\d+) of ingest at 20\d\d-", shown)
    assert found is not None, shown
    day, newest = found.groups()
    assert live_run(datasets_home, "ingest", day) == newest
    assert re.search(r"sales_clean clean\.clean report \(schedule\) 3 2024-03-0\d by run \d+ of clean", shown), shown
    assert re.search(r"audit_log audit\.check - 1 all by run \d+ of audit", shown), shown  # a recorded write only
    svg = page.text[page.text.index("<svg"):page.text.index("</svg>")]
    names = re.findall(r'<a href="([^"]+)"><g class="node kind-(\w+)">', svg)
    assert sorted(names) == sorted([
        ("/dags/ingest", "dag"), ("/dags/clean", "dag"), ("/dags/report", "dag"), ("/dags/audit", "dag"),
        ("/datasets/sales_raw", "dataset"), ("/datasets/sales_clean", "dataset"), ("/datasets/audit_log", "dataset")])
    labels = re.findall(r'<text class="edge-label"[^>]*>([^<]+)</text>', svg)
    assert sorted(labels) == ["check", "clean", "inlet check", "load", "schedule", "schedule"]
    assert svg.count('<path class="edge"') == 6
    assert f'href="/runs/{newest}"' in page.text and f"3 partition(s) · newest {day}" in svg


def test_the_graph_is_laid_out_from_producers_to_consumers() -> None:
    newest = Newest("2024-03-02", "a", 7, "w", datetime(2024, 3, 2, tzinfo=UTC))
    found = [Dataset("x", producers=[("a", "w")], scheduled=["b"], written=Written(2, 0, 2, newest)),
             Dataset("y", producers=[("b", "v")], inlets=[("b", "r")])]  # b reads what it writes: no loop forever
    d = drawing(found)
    column = {n.key: n.x for n in d.nodes}
    assert column["dag:a"] < column["dataset:x"] < column["dag:b"] < column["dataset:y"]
    notes = {n.key: n.note for n in d.nodes}
    assert notes["dataset:x"] == "2 partition(s) · newest 2024-03-02" and notes["dataset:y"] == "nothing written yet"
    assert [e.label for e in d.edges] == ["w", "v", "schedule", "inlet r"]
    assert d.width >= max(n.x for n in d.nodes) + d.node_width and d.height >= max(n.y for n in d.nodes) + 44


def test_a_datasets_page_holds_its_graph_matrix_and_recorded_writes(client: TestClient, datasets_home: Cli) -> None:
    page = client.get("/datasets/sales_raw")
    assert page.status_code == 200
    shown = text_of(page.text)
    assert "partitioned daily in UTC" in shown and "producers ingest.load" in shown
    assert "consumers clean (schedule), audit.check (inlet)" in shown
    assert "written 3 partition(s) · 3 event(s) · 3 recorded write(s)" in shown
    assert re.search(r"2024-03-03 \d+ current 2024-03-02 \d+ current 2024-03-01 \d+ current", shown), shown
    assert "recorded writes: the newest 50 partitions written" in shown
    rows = re.findall(r"(2024-03-0\d) current run (\d+) \(scheduled\) load · try 1 success", shown)
    assert sorted(day for day, _run in rows) == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert '<svg class="dag-graph dataset-graph"' in page.text and 'href="/dags/clean"' in page.text
    one = text_of(client.get("/datasets/sales_raw", params={"partition": "2024-03-02"}).text)
    assert "every write of partition 2024-03-02" in one and "2024-03-01 current" not in one
    assert f"2024-03-02 current run {live_run(datasets_home, 'ingest', '2024-03-02')} (scheduled)" in one
    only_writes = text_of(client.get("/datasets/audit_log").text)
    assert "recorded writes only" in only_writes and "all current run" in only_writes


def test_the_old_lineage_pages_lead_to_the_dataset_graph(client: TestClient) -> None:
    moved = client.get("/lineage", follow_redirects=False)
    assert (moved.status_code, moved.headers["location"]) == (301, "/datasets")
    one = client.get("/lineage/sales_raw", params={"partition": "2024-03-02"}, follow_redirects=False)
    assert (one.status_code, one.headers["location"]) == (301, "/datasets/sales_raw?partition=2024-03-02#writes")
    followed = client.get("/lineage/sales_raw?partition=2024-03-02")
    assert followed.status_code == 200 and "every write of partition 2024-03-02" in text_of(followed.text)
    assert client.get("/lineage/audit_log").status_code == 200


def test_an_unknown_dataset_is_a_404_naming_the_known_ones(client: TestClient) -> None:
    missing = client.get("/datasets/nope")
    assert missing.status_code == 404
    assert "no dataset 'nope'; known datasets: audit_log, sales_clean, sales_raw" in text_of(missing.text)


def test_an_empty_ledger_has_an_empty_graph(tmp_path: Path, migrated_sqlite: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for c in app_client(cli_on(home, migrated_sqlite)):
        page = c.get("/datasets")
        assert page.status_code == 200 and "<svg" not in page.text
        assert "no DAG writes or is scheduled on a dataset" in text_of(page.text)
