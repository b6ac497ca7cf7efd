"""The runs of every DAG filtered by state, type, DAG and date: `ledger runs list` and /runs, which the home's
state counts link to. The ledger is tests/web/conftest.py's (catch-up, a backfill, a manual override)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.conftest import Cli


def ids(rows: list[dict[str, str]]) -> list[str]:
    return [r["run_id"] for r in rows]


def test_ledger_runs_list_filters_by_state_type_and_date_newest_first(ledger_home: Cli) -> None:
    everything = ledger_home.json("runs", "list", "--json")
    assert ids(everything) == sorted(ids(everything), key=int, reverse=True) and len(everything) > 3
    overridden = ledger_home.json("runs", "list", "--state", "overridden", "--json")
    assert overridden and {r["state"] for r in overridden} == {"overridden"}
    assert ids(overridden) == [r["run_id"] for r in everything if r["state"] == "overridden"]
    backfill = ledger_home.json("runs", "list", "--type", "backfill", "--json")
    assert backfill and {r["run_type"] for r in backfill} == {"backfill"}
    day = ledger_home.json("runs", "list", "--start", "2024-03-02", "--end", "2024-03-02", "--json")
    assert day and {r["logical_date"][:10] for r in day} == {"2024-03-02"}  # the end's day included
    first = ledger_home.json("runs", "list", "--limit", "2", "--json")
    older = ledger_home.json("runs", "list", "--limit", "2", "--before", first[-1]["run_id"], "--json")
    assert ids(first) + ids(older) == ids(everything)[:4]
    refused = ledger_home.fails("runs", "list", "--state", "broken")
    assert "--state 'broken' is not one of queued, running" in refused.stderr and "Traceback" not in refused.stderr


def test_the_homes_state_counts_link_to_the_runs_of_that_state(ledger_home: Cli, client: TestClient) -> None:
    home = client.get("/").text
    assert 'href="/runs?state=overridden"' in home and 'href="/runs?dag=web&amp;state=overridden"' in home
    page = client.get("/runs", params={"state": "overridden"})
    shown = re.findall(r'<tr><td><a href="/runs/(\d+)">', page.text)
    assert shown == ids(ledger_home.json("runs", "list", "--state", "overridden", "--json"))
    assert 'value="overridden" checked' in page.text
    assert client.get("/runs", params={"state": "nope"}).status_code == 400


def test_the_runs_of_a_dag_never_registered_are_refused_in_one_line_not_listed_as_none(
        ledger_home: Cli, client: TestClient) -> None:
    """A misspelled `--dag` or `?dag=` is a 404 and one line, as `/events?dag=` is: an empty list would read as
    "no failed runs". A known DAG still lists its runs."""
    refused = ledger_home.fails("runs", "list", "--dag", "wbe", "--state", "failed")
    assert refused.stderr.strip() == "Error: no DAG named 'wbe'; run `ledger dags list` to see known DAGs"
    page = client.get("/runs", params={"dag": "wbe", "state": "failed"})
    assert page.status_code == 404
    assert re.findall(r'<p class="error">([^<]*)</p>', page.text) == [
        "no DAG named &#39;wbe&#39;; run `ledger dags list` to see known DAGs"]
    assert "no runs match" not in page.text
    assert ids(ledger_home.json("runs", "list", "--dag", "web")) == [
        r["run_id"] for r in ledger_home.json("runs", "list") if r["dag_id"] == "web"]
    assert re.findall(r'<tr><td><a href="/runs/(\d+)">', client.get("/runs", params={"dag": "web"}).text)
