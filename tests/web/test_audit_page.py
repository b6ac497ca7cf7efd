"""`ledger audit verify` in the web view and the API, in process on a real ledger made with the real CLI: admins
see the verdict and each break, one line each; operators and viewers are refused (403)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tests.web.conftest import PASSWORD, app_client
from tests.web.test_actions import signed_in


@pytest.fixture(scope="module")
def web(ops_home: Cli) -> Iterator[TestClient]:
    done = ops_home.run("users", "create", "auditor", "--role", "admin", input=PASSWORD + "\n")
    assert done.exit_code == 0, done.output
    yield from app_client(ops_home)


def test_an_admin_sees_the_verdict_and_each_break(ops_home: Cli, web: TestClient) -> None:
    signed_in(web, "auditor")
    page = web.get("/audit")
    assert page.status_code == 200 and '<p class="ok" id="verdict">verified: ' in page.text
    assert web.get("/api/v1/audit/verify").json()["ok"] is True
    db = sqlite3.connect(ops_home.home / "ledger.db")
    (event_id, actor), = db.execute("SELECT id, actor FROM event WHERE dag_id IS NOT NULL ORDER BY id LIMIT 1")
    try:
        with db:
            db.execute("UPDATE event SET actor = 'someone else' WHERE id = ?", (event_id,))
        answer = web.get("/api/v1/audit/verify").json()
        assert answer["ok"] is False and len(answer["breaks"]) == 1
        assert f": event {event_id} (" in answer["breaks"][0]
        assert answer["breaks"][0].endswith("was edited: its content no longer gives its hash")
        assert f"<li>{answer['breaks'][0]}</li>" in web.get("/audit").text
    finally:
        with db:
            db.execute("UPDATE event SET actor = ? WHERE id = ?", (actor, event_id))
        db.close()
    assert web.get("/api/v1/audit/verify?dag_id=nope").status_code == 404


@pytest.mark.parametrize("user", ["op", "vi"])
def test_operators_and_viewers_are_refused(web: TestClient, user: str) -> None:
    signed_in(web, user)
    assert web.get("/audit").status_code == 403
    assert web.get("/api/v1/audit/verify").status_code == 403
