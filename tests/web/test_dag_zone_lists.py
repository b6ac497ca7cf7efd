"""The pages that list runs or backfills of any DAG, the backfill plan to confirm and the cancel preview print a DAG's
dates in its own time zone, as the timeline and the grid do (decision 0276), or in the zone the viewer chose; a
range's end kept as a day's last instant (an end typed as a date) reads as that date. In process on a copy of the
operators' ledger with a DAG in Europe/Berlin (UTC+01:00 in March): its midnight is 23:00 UTC the day before, which
printed in UTC read as a day early."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import copy_ops
from tests.web.test_actions import signed_in
from tests.web.test_explicit_actions import field
from tests.web.test_pages import text_of
from tests.web.test_viewer_zone import times

BERLIN_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("berlin", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="Europe/Berlin"), catchup=False):
    BashTask("a", "true")
"""
MIDNIGHTS = ["2024-03-04 00:00:00+01:00", "2024-03-05 00:00:00+01:00"]


@pytest.fixture
def ops(tmp_path: Path, ops_template: Path) -> Cli:
    cli = copy_ops(ops_template, tmp_path / "home")
    cli.write_dag("berlin.py", BERLIN_DAG)
    cli.ok("backfill", "berlin", "--start", "2024-03-04", "--end", "2024-03-05", "--submit", "--yes")  # backfill 1
    return cli


@pytest.fixture
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        yield signed_in(c, "op")


def test_lists_previews_and_the_plan_print_a_dags_dates_in_its_zone(web: TestClient) -> None:
    listed = text_of(web.get("/backfills").text)
    assert f"{MIDNIGHTS[0]} → 2024-03-05 none running" in listed  # the range as typed: the end's whole day
    assert f"{MIDNIGHTS[0]} → 2024-03-05 · reprocess none" in text_of(web.get("/backfills/1").text)  # its own page
    assert times(web.get("/backfills/1/actions").text) == MIDNIGHTS  # the cancel preview
    assert sorted(times(web.get("/runs", params={"dag": "berlin"}).text)) == MIDNIGHTS
    page = web.get("/dags/berlin/actions").text
    plan = web.post("/dags/berlin/backfill/plan", data={"csrf": field(page, "csrf"), "start": "2024-03-06",
                                                        "end": "2024-03-07", "reprocess": "none"})
    assert plan.status_code == 200 and times(plan.text) == ["2024-03-06 00:00:00+01:00", "2024-03-07 00:00:00+01:00"]


def test_the_zone_the_viewer_chose_applies_to_them_too(web: TestClient) -> None:
    web.cookies.set("ledger_tz", "utc")
    assert "2024-03-03 23:00:00Z → 2024-03-05 22:59:59.999999Z" in text_of(web.get("/backfills").text)
    assert times(web.get("/backfills/1/actions").text) == ["2024-03-03 23:00:00Z", "2024-03-04 23:00:00Z"]
    assert sorted(times(web.get("/runs", params={"dag": "berlin"}).text)) == ["2024-03-03 23:00:00Z",
                                                                             "2024-03-04 23:00:00Z"]
