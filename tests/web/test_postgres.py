"""The web view on PostgreSQL: the same documents as the CLI, and the pages."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.web.conftest import build


@pytest.mark.postgres
def test_the_web_view_reads_a_postgresql_ledger(tmp_path: Path, postgres_url: str) -> None:
    cli = build(tmp_path, None, LEDGER_DATABASE_URL=postgres_url)
    settings = load_settings({"LEDGER_HOME": str(tmp_path), "LEDGER_DATABASE_URL": postgres_url})
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        runs = cli.json("timeline", "web")
        assert client.get("/api/v1/dags/web/timeline").json() == runs
        page = client.get("/api/v1/dags/web/timeline", params={"limit": 2})
        following = client.get("/api/v1/dags/web/timeline", params={"limit": 10,
                                                                     "cursor": page.headers["x-next-cursor"]})
        assert page.json() + following.json() == runs
        assert client.get("/api/v1/runs/4").json() == cli.json("runs", "show", "4")
        assert client.get("/api/v1/lineage/sales_clean").json() == cli.json("lineage", "sales_clean")
        assert client.get("/api/v1/backfills").json() == cli.json("backfill", "list")
        for path in ("/", "/dags/web", "/runs/4", "/backfills", "/events", "/signals", "/lineage/sales_clean",
                     "/dags/web/grid", "/dags/web/grid?limit=1&before=4", "/runs/4/gantt", "/backfills/1",
                     "/runs/4/tasks/flaky/tries/2/log", "/api/v1/runs/4/tasks/flaky/tries/2/log", "/?q=web"):
            assert client.get(path).status_code == 200, path
        assert client.get("/dags/web/grid").text.count('<a class="sq state-') == 2 * 3  # 2 tasks x 3 runs
        assert "overridden by" in client.get("/dags/web").text
        with client.app.state.reader.session() as session, pytest.raises(  # type: ignore[attr-defined]
                sqlalchemy.exc.InternalError, match="read-only transaction"):
            session.execute(sqlalchemy.text("CREATE TABLE written (a int)"))
