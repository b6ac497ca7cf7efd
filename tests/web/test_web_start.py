"""What a web server does when it starts, before its first request (issue 41, part 8: the first request after a
start paid for FastAPI's analysis of every route, the ORM's mappers and the thread pool's start): its lifespan walks
the router with a path no route answers, so the walk reads nothing, checks nobody and answers nothing but a 404."""

from __future__ import annotations

from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import UNANSWERED, create_app
from tests.conftest import Cli


def test_the_start_walks_every_route_with_a_path_none_answers_and_changes_nothing(ledger_home: Cli) -> None:
    before = ledger_home.json("events", "--limit", "5")
    app = create_app(load_settings({"LEDGER_HOME": str(ledger_home.home)}))
    with TestClient(app, base_url="http://localhost") as client:  # the lifespan: the walk runs here
        assert client.get(UNANSWERED).status_code == 404
        assert client.get("/dags/web/grid").status_code == 200
    assert ledger_home.json("events", "--limit", "5") == before
