"""The JSON API: the same documents as `ledger ... --json`, cursor pages, errors as JSON, GET only."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import sqlalchemy
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli


def api(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(f"/api/v1{path}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.timeout(1800)  # some forty real CLI commands: slow on a loaded machine
def test_the_api_returns_the_documents_of_the_cli(ledger_home: Cli, client: TestClient) -> None:
    cli = ledger_home
    runs = cli.json("timeline", "web")
    assert api(client, "/dags/web/timeline") == runs
    assert api(client, "/dags/web/timeline", start="2024-03-02", end="2024-03-03") == \
        cli.json("timeline", "web", "--start", "2024-03-02", "--end", "2024-03-03")
    for run in runs:
        assert api(client, f"/runs/{run['run_id']}") == cli.json("runs", "show", run["run_id"])
    versions = cli.json("dags", "versions", "web")
    assert api(client, "/dags/web/versions") == versions
    old = versions[0]["version"]
    assert api(client, f"/dags/web/versions/{old[:10]}", source="true") == \
        cli.json("dags", "show", "web", "--version", old[:10], "--source")
    assert api(client, "/dags/web/versions/" + old) == cli.json("dags", "show", "web", "--version", old)
    assert api(client, "/lineage/sales_clean") == cli.json("lineage", "sales_clean")
    assert api(client, "/lineage/sales_clean", partition="2024-03-02") == \
        cli.json("lineage", "sales_clean", "--partition", "2024-03-02")
    assert api(client, "/backfills") == cli.json("backfill", "list")
    assert api(client, "/backfills/1") == cli.json("backfill", "show", "1")
    assert api(client, "/events", dag="web", kind=["run_overridden", "run_created"]) == \
        cli.json("events", "--dag", "web", "--kind", "run_overridden", "--kind", "run_created")
    assert api(client, "/events", limit=5) == cli.json("events", "--limit", "5")
    assert api(client, "/signals", key="web.ready") == cli.json("signal", "list", "web.ready")
    assert api(client, "/dags") == cli.json("dags", "list")
    assert api(client, "/import-errors") == cli.json("dags", "errors")


def test_the_diff_of_a_version_is_against_the_version_before(client: TestClient) -> None:
    old, new = (v["version"] for v in api(client, "/dags/web/versions"))
    diff = api(client, f"/dags/web/versions/{new}/diff")
    assert (diff["old"], diff["new"]) == (old, new)
    assert "+    context.record_write(\"sales_clean\", context.logical_date.date().isoformat(), rows=11" in diff["diff"]
    assert api(client, f"/dags/web/versions/{old}/diff")["diff"] is None  # the first version


def test_a_timeline_is_read_a_page_at_a_time_with_a_cursor(client: TestClient) -> None:
    everything = api(client, "/dags/web/timeline")
    pages, url = [], "/api/v1/dags/web/timeline?limit=2"
    while url:
        response = client.get(url)
        assert response.status_code == 200
        pages.append(response.json())
        following = response.headers.get("link")
        assert (following is None) == (response.headers.get("x-next-cursor") is None)
        url = following.split(">", 1)[0].lstrip("<") if following else ""
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [r for p in pages for r in p] == everything
    cursor = pages[0][-1]["run_id"]
    assert api(client, "/dags/web/timeline", cursor=cursor, limit=10) == everything[2:]


@pytest.mark.parametrize(("path", "status", "words"), [
    ("/runs/999", 404, "no DAG run '999'"),
    ("/runs/abc", 400, "run id must be a number"),
    ("/dags/nope/timeline", 404, "no DAG named 'nope'"),
    ("/dags/web/timeline?start=2024-13-45", 400, "invalid --start"),
    ("/dags/web/timeline?start=2024-03-03&end=2024-03-01", 400, "is before"),
    ("/dags/web/timeline?limit=0", 400, "limit"),
    ("/dags/web/timeline?cursor=999", 400, "cursor 999"),
    ("/dags/web/versions/ffffffff", 404, "no version of DAG 'web'"),
    ("/backfills/77", 404, "no backfill 77"),
    ("/lineage/nope", 404, "known datasets: sales_clean"),
    ("/events?dag=nope", 404, "no DAG named"),
    ("/nothing/here", 404, "no page"),
])
def test_errors_are_json_with_a_message_and_400_or_404(client: TestClient, path: str, status: int,
                                                        words: str) -> None:
    response = client.get(f"/api/v1{path}")
    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    assert words in response.json()["message"]


def test_only_the_actions_write_and_other_methods_are_refused(client: TestClient) -> None:
    from ledger.web import actions, worker_api

    documented = client.get("/api/openapi.json").json()["paths"]
    writes = {(path, m.upper()) for path, ops in documented.items() for m in ops if m != "get"}
    # the write API's actions, and the tries' own calls on the worker API (a signal, a trigger; worker token only)
    acting = {(r.path, m) for router in (actions.api, worker_api.router)
              for r in router.routes for m in r.methods if m not in ("GET", "HEAD")}  # type: ignore[attr-defined]
    assert writes == acting and all(m == "POST" for _p, m in writes)
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)("/api/v1/runs/1")
        assert response.status_code == 405
        assert f"{method.upper()} is not answered at /api/v1/runs/1" == response.json()["message"]


def test_the_server_s_sessions_cannot_write(client: TestClient) -> None:
    with client.app.state.reader.session() as session, pytest.raises(  # type: ignore[attr-defined]
            sqlalchemy.exc.OperationalError, match="readonly database"):
        session.execute(sqlalchemy.text("CREATE TABLE written (a int)"))


def test_openapi_describes_the_api(client: TestClient) -> None:
    spec = client.get("/api/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/api/v1/runs/{run_id}", "/api/v1/dags/{dag_id}/timeline", "/api/v1/lineage/{dataset}"} <= paths
    assert not any(p.startswith("/dags") for p in paths)  # pages are not API
    assert client.get("/api/docs").status_code == 200


def test_a_token_guards_every_request_when_set(ledger_home: Cli) -> None:
    app = create_app(load_settings({"LEDGER_HOME": str(ledger_home.home)}), token="s3cret")
    with TestClient(app, base_url="http://localhost") as c:
        assert c.get("/api/v1/dags").status_code == 401
        assert "token" in c.get("/api/v1/dags").json()["message"]
        assert c.get("/api/v1/dags", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/v1/dags", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        shown = c.get("/", params={"token": "s3cret"}, follow_redirects=False)  # never read from a URL
        assert shown.status_code == 303 and shown.headers["location"].startswith("/login?next=")
        assert "ledger_token" not in c.cookies
        signed = c.post("/login", data={"token": "s3cret", "next": "/runs/1", "csrf": c.cookies["ledger_csrf"]},
                        follow_redirects=False)
        assert signed.status_code == 303 and signed.headers["location"] == "/runs/1"
        assert c.get("/runs/1").status_code == 200  # the token, as an HttpOnly cookie
        assert c.post("/api/v1/dags/web/pause").status_code == 403  # the shared token reads only


def test_a_workers_token_reads_a_versions_code_and_nothing_else(ledger_home: Cli) -> None:
    app = create_app(load_settings({"LEDGER_HOME": str(ledger_home.home)}), token="s3cret", worker_token="w0rker")
    as_worker = {"Authorization": "Bearer w0rker"}
    with TestClient(app, base_url="http://localhost") as c:
        version = c.get("/api/v1/dags", headers={"Authorization": "Bearer s3cret"}).json()[0]["version"]
        code = f"/api/v1/worker/code/web/{version}"
        assert c.get(code).status_code == 401
        assert c.get(code, headers={"Authorization": "Bearer wrong"}).status_code == 401
        sent = c.get(code, headers=as_worker)
        assert sent.status_code == 200
        doc = sent.json()
        assert doc["entry"] == "web.py" and set(doc["files"]) == set(doc["sha256"]) == {"web.py"}
        assert "record_write" in base64.b64decode(doc["files"]["web.py"]).decode()
        assert c.get(code, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/api/v1/dags", headers=as_worker).status_code == 401  # the worker's token reads code only
        assert c.get("/", headers=as_worker, follow_redirects=False).status_code == 303  # (to sign in)
        missing = c.get("/api/v1/worker/code/web/" + "0" * 64, headers=as_worker)
        assert missing.status_code == 404 and "no version" in missing.json()["message"]
        # a worker names the webserver as its network does (compose's `http://webserver:8793`): its token decides
        fleet = {**as_worker, "Host": "webserver:8793"}
        assert c.get(code, headers=fleet).status_code == 200
        assert c.get(code, headers={"Host": "webserver:8793"}).status_code == 401
        assert c.get("/api/v1/dags", headers={"Authorization": "Bearer s3cret", "Host": "webserver:8793"}
                     ).status_code == 400  # everything else keeps the Host check


def test_the_webserver_refuses_another_address_without_a_token_and_a_missing_database(ledger_home: Cli,
                                                                                       cli: Cli) -> None:
    result = ledger_home.fails("webserver", "--host", "0.0.0.0", "--port", "1")
    assert "LEDGER_WEB_TOKEN" in result.stderr and "0.0.0.0" in result.stderr
    assert "ledger db upgrade" in cli.fails("webserver", "--port", "1").stderr


def test_without_a_broker_the_workers_page_and_api_say_there_are_none(client: TestClient,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEDGER_CELERY_BROKER_URL", raising=False)
    monkeypatch.delenv("LEDGER_CELERY_RESULT_BACKEND", raising=False)
    assert api(client, "/workers") == []
    page = client.get("/workers")
    assert page.status_code == 200 and "no LEDGER_CELERY_BROKER_URL" in page.text
