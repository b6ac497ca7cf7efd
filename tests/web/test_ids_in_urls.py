"""An id in a URL that no database can hold (beyond 64 bits, or below 1) is a 400 with a short message, as other
bad input, never a 500 (the SQLite driver's OverflowError)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import _run_in_process, copy_migrated

TOO_BIG = str(2**63)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, migrated_sqlite: Path) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("ids") / "home"
    copy_migrated(migrated_sqlite, home / "ledger.db")
    app = create_app(load_settings({"LEDGER_HOME": str(home)}))
    with TestClient(app, raise_server_exceptions=False, base_url="http://localhost") as client:
        yield client


@pytest.mark.parametrize("path", [
    f"/runs/{TOO_BIG}", f"/runs/{TOO_BIG}/tasks/a/tries/1/log", f"/backfills/{TOO_BIG}", f"/events?run={TOO_BIG}",
    f"/dags/d?cursor={TOO_BIG}", f"/signals?before={TOO_BIG}", "/runs/0", "/runs/-1",
])
def test_a_page_with_an_id_beyond_64_bits_is_a_400(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 400, (path, response.status_code, response.text[:200])
    assert "text/html" in response.headers["content-type"]


@pytest.mark.parametrize(("path", "words"), [
    (f"/runs/{TOO_BIG}", f"run id {TOO_BIG} is out of range"),
    ("/runs/0", "run id 0 is out of range"),
    ("/runs/abc", "run id must be a number"),
    (f"/backfills/{TOO_BIG}", "invalid backfill_id"),
    (f"/events?run={TOO_BIG}", "invalid run"),
    (f"/dags/d/timeline?cursor={TOO_BIG}", "invalid cursor"),
    (f"/signals?since={TOO_BIG}", "invalid since"),
])
def test_the_api_answers_an_id_beyond_64_bits_with_400_and_a_message(client: TestClient, path: str,
                                                                       words: str) -> None:
    response = client.get(f"/api/v1{path}")
    assert response.status_code == 400, (path, response.status_code, response.text[:200])
    assert words in response.json()["message"]


def test_an_id_in_range_that_does_not_exist_is_still_a_404(client: TestClient) -> None:
    assert client.get(f"/api/v1/runs/{2**63 - 1}").status_code == 404
    assert client.get(f"/api/v1/backfills/{2**63 - 1}").status_code == 404



@pytest.fixture(scope="module")
def admin(client: TestClient) -> dict[str, str]:
    """The headers of an admin's API token, made with the CLI in the client's LEDGER_HOME."""
    home = client.app.state.settings.home  # type: ignore[attr-defined]
    env = {**os.environ, "LEDGER_HOME": str(home)}
    assert _run_in_process(["users", "create", "ada", "--role", "admin"], env, "a long secret\n", home).exit_code == 0
    made = _run_in_process(["users", "token", "ada"], env, None, home).stdout.strip()
    return {"Authorization": f"Bearer {made}"}


@pytest.mark.parametrize("path", [
    f"/runs/{TOO_BIG}/cancel", f"/runs/{TOO_BIG}/mark", f"/runs/{TOO_BIG}/tasks/mark", f"/runs/{TOO_BIG}/clear",
    f"/backfills/{TOO_BIG}/cancel", f"/backfills/{TOO_BIG}/resume", "/runs/0/cancel",
])
def test_an_action_on_an_id_beyond_64_bits_is_a_400_for_a_user_who_may_act(client: TestClient, admin: dict[str, str],
                                                                             path: str) -> None:
    response = client.post(f"/api/v1{path}", json={"state": "success", "task_ids": ["a"]}, headers=admin)
    assert response.status_code == 400, (path, response.status_code, response.text[:200])
    assert "invalid run_id" in response.json()["message"] or "invalid backfill_id" in response.json()["message"]
