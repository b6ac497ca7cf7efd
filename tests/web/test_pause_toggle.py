"""The one-click pause toggle on the DAG list (issue 41, part 5), in process on a ledger made with the real CLI: an
operator pauses and unpauses a DAG from the list and stays on it, told what was done; a viewer sees whether a DAG
is paused and no toggle."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import copy_ops
from tests.web.test_actions import signed_in
from tests.web.test_pages import text_of


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path_factory.mktemp("pause-toggle") / "home")


def toggle(markup: str) -> tuple[str, str]:
    """(the form's action, its button) of the DAG list's pause toggle."""
    found = re.search(r'<form class="inline toggle" method="post" action="([^"]+)">.*?<button[^>]*>(\w+)</button>',
                      markup)
    assert found is not None
    return found.group(1), found.group(2)


def test_a_dag_is_paused_and_unpaused_from_the_dag_list_in_one_click(ops: Cli) -> None:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        web = signed_in(c, "op")
        action, label = toggle(web.get("/").text)
        assert (action, label) == ("/dags/ops/pause", "pause")
        done = web.post(action, data={"csrf": web.cookies["ledger_csrf"], "back": "/"}, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"] == "/"
        home = web.get("/").text
        assert "paused ops" in text_of(home) and toggle(home) == ("/dags/ops/unpause", "unpause")
        assert ops.json("dags", "list")[0]["is_paused"] is True
        assert ops.json("events", "--kind", "dag_paused")[-1]["actor"] == "web:op"
        web.post("/dags/ops/unpause", data={"csrf": web.cookies["ledger_csrf"], "back": "/"})
        assert ops.json("dags", "list")[0]["is_paused"] is False
        # from the DAG's actions page (no `back`) it ends on the DAG's page, as before
        elsewhere = web.post("/dags/ops/pause", data={"csrf": web.cookies["ledger_csrf"]}, follow_redirects=False)
        assert elsewhere.headers["location"] == "/dags/ops"
        web.post("/dags/ops/unpause", data={"csrf": web.cookies["ledger_csrf"]})

        viewer = signed_in(c, "vi").get("/").text
        assert 'class="inline toggle"' not in viewer and re.search(r'<td class="paused">no</td>', viewer)
