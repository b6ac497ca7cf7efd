"""The grid's failed-only filter and its jump to a date (issue 41, part 4), on tests/web/conftest.py's ledger (three
days of runs of DAG `web`, one overridden by a backfill, one by a manual run)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def columns(markup: str) -> list[str]:
    """The run ids of the grid's columns, oldest on the left."""
    return re.findall(r'<th class="run-col"><a href="/runs/(\d+)"', markup)


def test_the_grid_jumps_to_a_date_and_keeps_the_runs_up_to_that_day(client: TestClient) -> None:
    everything = columns(client.get("/dags/web/grid").text)
    assert len(everything) == 3
    up_to = client.get("/dags/web/grid", params={"date": "2024-03-02"}).text
    assert columns(up_to) == everything[:2]  # the 2nd of March included, the 3rd left out
    assert 'name="date" value="2024-03-02"' in up_to
    assert client.get("/dags/web/grid", params={"date": "nonsense"}).status_code == 400


def test_the_grid_shows_failed_runs_only_when_asked(client: TestClient) -> None:
    page = client.get("/dags/web/grid", params={"failed": "true"}).text
    assert columns(page) == [] and "no runs match" in page  # none of its runs failed
    assert 'name="failed" value="true" checked' in page
