"""Conf and params are strict JSON (ledger/core/strict_json.py): NaN and Infinity, conf nested too deep or too long
are refused in one line by the CLI and with a 400 naming the problem by the API and the pages, changing nothing;
a conf stored before that rule is still written as valid JSON by `runs show --json` and the API."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import copy_ops
from tests.web.test_actions import signed_in, token

DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path_factory.mktemp("strict") / "home")


@pytest.fixture(scope="module")
def op(ops: Cli) -> dict[str, str]:
    return {**token(ops, "op", "strict"), "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        yield c


def strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} in the JSON printed")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(("conf", "words"), [
    ('{"x": NaN}', "holds NaN, which is not JSON"),
    ('{"x": [1, -Infinity]}', "holds -Infinity"),
    ('{"x": 1e999}', 'conf["x"] is inf'),
    ('{"x": ' + DEEP + "}", "nested more than 32 deep"),
])
def test_the_cli_refuses_a_conf_that_is_not_strict_json_in_one_line(ops: Cli, conf: str, words: str) -> None:
    before = ops.ok("events", "--json")
    for args in (("trigger", "ops", "--logical-date", "2024-03-07"),
                 ("backfill", "ops", "--start", "2024-03-05", "--end", "2024-03-05", "--yes")):
        result = ops.fails(*args, "--conf", conf)
        assert words in result.stderr, result.stderr
    assert ops.ok("events", "--json") == before


@pytest.mark.parametrize(("body", "words"), [
    ('{"logical_date": "2024-03-07", "conf": {"who": NaN}}', "conf[\"who\"] is nan"),
    ('{"logical_date": "2024-03-07", "conf": {"n": Infinity}}', "conf[\"n\"] is inf"),
    ('{"logical_date": "2024-03-07", "conf": {"who": "x", "deep": ' + "[" * 40 + "]" * 40 + "}}",
     "nested more than 32 deep"),
    ('{"logical_date": "2024-03-07", "conf": {"who": "' + "a" * 300_000 + '"}}', "at most 262144 are taken"),
])
def test_the_api_answers_400_naming_what_is_not_json(ops: Cli, web: TestClient, op: dict[str, str], body: str,
                                                     words: str) -> None:
    before = ops.ok("events", "--json")
    answer = web.post("/api/v1/dags/ops/runs", content=body, headers=op)
    assert answer.status_code == 400, answer.text
    assert words in answer.json()["message"]
    backfill = web.post("/api/v1/backfills", content=body.replace('"logical_date": "2024-03-07"',
                                                                  '"dag_id": "ops", "start": "2024-03-05", '
                                                                  '"end": "2024-03-05"'),
                        headers=op)
    assert backfill.status_code == 400 and words in backfill.json()["message"], backfill.text
    assert ops.ok("events", "--json") == before


def test_the_trigger_form_refuses_nan_with_a_400_naming_it(ops: Cli, web: TestClient) -> None:
    before = ops.ok("events", "--json")
    page = signed_in(web, "op")
    csrf = page.cookies["ledger_csrf"]
    answer = page.post("/dags/ops/trigger", data={"csrf": csrf, "logical_date": "2024-03-08",
                                                  "conf": '{"x": NaN}'})
    assert answer.status_code == 400 and "holds NaN, which is not JSON" in answer.text
    answer = page.post("/dags/ops/trigger", data={"csrf": csrf, "logical_date": "2024-03-08", "param.n": "NaN"})
    assert answer.status_code == 400 and "not valid JSON for a param of type integer" in answer.text
    assert ops.ok("events", "--json") == before


def test_a_conf_stored_with_nan_before_is_still_written_as_json(ops: Cli, web: TestClient,
                                                                 op: dict[str, str]) -> None:
    with sqlite3.connect(ops.home / "ledger.db") as conn:  # as an earlier ledger let it in
        conn.execute("""UPDATE dag_run SET conf = '{"x": NaN, "y": [Infinity, 1.5]}' WHERE id = 1""")
    conn.close()
    shown = strict(ops.ok("runs", "show", "1", "--json"))
    assert isinstance(shown, dict) and shown["conf"] == {"x": "NaN", "y": ["Infinity", 1.5]}
    answer = web.get("/api/v1/runs/1", headers=op)
    assert answer.status_code == 200 and strict(answer.text)["conf"] == {"x": "NaN", "y": ["Infinity", 1.5]}
