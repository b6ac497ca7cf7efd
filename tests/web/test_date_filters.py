"""A date filter's end given as a date includes that whole day, in the DAG's time zone: `ledger timeline --end`,
the API's timeline and the DAG page. DAG `berlin` (tests/web/conftest.py) runs at 06:00 Europe/Berlin."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.conftest import Cli


def test_timeline_end_given_as_a_date_includes_the_runs_of_that_day(views_home: Cli,
                                                                     views_client: TestClient) -> None:
    everything = views_home.json("timeline", "berlin")
    first_day = [r["run_id"] for r in everything if r["logical_date"].startswith("2024-03-01")]
    assert first_day
    shown = views_home.json("timeline", "berlin", "--end", "2024-03-01")
    assert [r["run_id"] for r in shown] == first_day
    assert [r["run_id"] for r in views_home.json("timeline", "berlin", "--end", "2024-03-01T05:00")] == []
    api = views_client.get("/api/v1/dags/berlin/timeline", params={"end": "2024-03-01"}).json()
    assert [r["run_id"] for r in api] == first_day
    page = views_client.get("/dags/berlin", params={"start": "2024-03-01", "end": "2024-03-01"}).text
    assert set(re.findall(r'href="/runs/(\d+)"', page)) >= set(first_day)
