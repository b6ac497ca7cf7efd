"""The write API and the action pages, in process on a real ledger (made with the real CLI): each action does
what the CLI does and records the user as its actor; each refusal changes nothing and says why, in the CLI's
words; roles, sign-in, CSRF and the Host header guard them."""

from __future__ import annotations

import re
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import PASSWORD, copy_ops, served


@pytest.fixture(scope="module")
def ops(tmp_path_factory: pytest.TempPathFactory, ops_template: Path) -> Cli:
    return copy_ops(ops_template, tmp_path_factory.mktemp("ops") / "home")


@pytest.fixture(scope="module")
def web(ops: Cli) -> Iterator[TestClient]:
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        yield c


def token(cli: Cli, user: str, name: str) -> dict[str, str]:
    made = cli.ok("users", "token", user, "--name", name).strip()
    assert made.startswith("ldg_")
    return {"Authorization": f"Bearer {made}"}


def events(cli: Cli, *kinds: str) -> list[dict[str, Any]]:
    return cli.json("events", "--dag", "ops", *[a for k in kinds for a in ("--kind", k)])


def refused_like_the_cli(cli: Cli, response: Any, status: int, *args: str) -> None:
    """The API refused with `status` and the one line `ledger ARGS` prints (without its `error: ` prefix)."""
    assert response.status_code == status, response.text
    line = cli.fails(*args).stderr.strip()
    assert response.json()["message"] in line, (response.json(), line)


def test_an_operator_triggers_with_params_and_is_the_actor(ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "trigger")
    made = web.post("/api/v1/dags/ops/runs", json={"logical_date": "2024-03-05", "conf": {"who": "ada"}},
                    headers=op)
    assert made.status_code == 201, made.text
    run = ops.json("runs", "show", made.json()["run_id"])
    assert run["conf"] == {"who": "ada"} and run["state"] == "queued"
    created = [e for e in events(ops, "run_created") if e["run_id"] == made.json()["run_id"]]
    assert created[0]["actor"] == "api:op"
    before = ops.json("timeline", "ops")
    bad = web.post("/api/v1/dags/ops/runs", json={"logical_date": "2024-03-06", "conf": {"n": "x"}}, headers=op)
    refused_like_the_cli(ops, bad, 400, "trigger", "ops", "--logical-date", "2024-03-06", "--conf", '{"n": "x"}')
    assert ops.json("timeline", "ops") == before  # nothing changed


def test_a_viewer_is_refused_every_write_and_nothing_changes(ops: Cli, web: TestClient) -> None:
    vi = token(ops, "vi", "writes")
    before = ops.json("timeline", "ops")
    for path, body in (("/dags/ops/runs", {}), ("/runs/1/cancel", {}), ("/runs/1/mark", {"state": "failed"}),
                       ("/runs/1/clear", {}), ("/dags/ops/pause", {}), ("/backfills/1/cancel", None),
                       ("/backfills", {"dag_id": "ops", "start": "2024-03-01", "end": "2024-03-02"})):
        refused = web.post("/api/v1" + path, json=body, headers=vi)
        assert refused.status_code == 403, (path, refused.text)
        assert "needs the operator role; you are signed in as api:vi (viewer)" in refused.json()["message"]
    assert web.get("/api/v1/runs/1", headers=vi).status_code == 200
    assert ops.json("timeline", "ops") == before


def test_clear_mark_and_cancel_act_as_the_cli_and_refuse_as_it_does(ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "runs")
    cleared = web.post("/api/v1/runs/1/clear", json={"tasks": ["b"]}, headers=op)
    assert cleared.status_code == 200 and cleared.json()["cleared"] == ["b"] and cleared.json()["state"] == "queued"
    assert events(ops, "tasks_cleared")[-1]["actor"] == "api:op"
    refused_like_the_cli(ops, web.post("/api/v1/runs/1/clear", json={"tasks": ["nope"]}, headers=op), 400,
                         "tasks", "clear", "ops", "1", "--task", "nope")
    marked = web.post("/api/v1/runs/2/mark", json={"state": "failed", "reason": "bad data"}, headers=op)
    assert marked.status_code == 200 and marked.json()["state"] == "failed"
    assert events(ops, "run_marked")[-1]["actor"] == "api:op"
    refused_like_the_cli(ops, web.post("/api/v1/runs/2/mark", json={"state": "failed"}, headers=op), 400,
                         "runs", "mark-failed", "2")
    cancelled = web.post("/api/v1/runs/1/cancel", json={"reason": "enough"}, headers=op)
    assert cancelled.status_code == 200 and cancelled.json()["state"] in ("failed", "success")
    refused_like_the_cli(ops, web.post("/api/v1/runs/1/cancel", headers=op), 409, "runs", "cancel", "1")
    assert web.post("/api/v1/runs/99999/cancel", headers=op).status_code == 404
    assert web.post("/api/v1/runs/1/mark", json={"state": "running"}, headers=op).status_code == 400


def test_pause_and_unpause_are_recorded_with_the_user(ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "pause")
    assert web.post("/api/v1/dags/ops/pause", json={"stop_queued": True}, headers=op).json()["changed"]
    assert ops.json("dags", "list")[0]["stop_queued"] is True
    assert web.post("/api/v1/dags/ops/unpause", headers=op).json()["changed"]
    assert [e["actor"] for e in events(ops, "dag_paused", "dag_unpaused")] == ["api:op", "api:op"]
    refused_like_the_cli(ops, web.post("/api/v1/dags/nope/pause", headers=op), 404, "dags", "pause", "nope")


def test_a_backfill_is_planned_as_dry_run_prints_it_then_submitted_cancelled_and_not_resumed(
        ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "backfill")
    body = {"dag_id": "ops", "start": "2024-03-01", "end": "2024-03-04", "reprocess": "failed"}
    plan = web.post("/api/v1/backfills", json={**body, "dry_run": True}, headers=op)
    assert plan.status_code == 200
    assert plan.json()["plan"] == ops.json("backfill", "ops", "--start", "2024-03-01", "--end", "2024-03-04",
                                           "--reprocess", "failed", "--dry-run")
    made = web.post("/api/v1/backfills", json=body, headers=op)
    assert made.status_code == 201 and made.json()["state"] == "submitted"
    backfill_id = made.json()["backfill_id"]
    shown = ops.json("backfill", "show", backfill_id)
    assert shown["requested_by"] == "api:op" and shown["state"] == "running"
    assert web.post(f"/api/v1/backfills/{backfill_id}/resume", headers=op).status_code == 400  # not interrupted
    assert web.post(f"/api/v1/backfills/{backfill_id}/cancel", headers=op).json()["state"] == "cancelled"
    refused_like_the_cli(ops, web.post(f"/api/v1/backfills/{backfill_id}/cancel", headers=op), 400,
                         "backfill", "cancel", backfill_id)
    backwards = web.post("/api/v1/backfills", json={**body, "start": "2024-03-04", "end": "2024-03-01"}, headers=op)
    assert backwards.status_code == 400 and "the range is backwards" in backwards.json()["message"]


def signed_in(web: TestClient, user: str) -> TestClient:
    web.cookies.clear()
    web.get("/login")
    answer = web.post("/login", data={"username": user, "password": PASSWORD, "next": "/",
                                      "csrf": web.cookies["ledger_csrf"]}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return web


def test_forms_need_a_signed_in_operator_and_their_csrf_token(ops: Cli, web: TestClient) -> None:
    web.cookies.clear()
    assert web.get("/runs/1", follow_redirects=False).headers["location"] == "/login?next=%2Fruns%2F1"
    assert web.get("/api/v1/runs/1").status_code == 401
    wrong = web.post("/login", data={"username": "op", "password": "nope", "csrf": web.cookies["ledger_csrf"]})
    assert wrong.status_code == 401 and "wrong user name or password" in wrong.text
    signed_in(web, "op")
    page = web.get("/runs/3/actions")
    assert page.status_code == 200 and 'action="/runs/3/clear"' in page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None and csrf.group(1) == web.cookies["ledger_csrf"]
    before = ops.json("dags", "list")
    no_token = web.post("/dags/ops/pause", data={}, follow_redirects=False)
    assert no_token.status_code == 403 and "CSRF" in no_token.text
    assert web.post("/dags/ops/pause", data={"csrf": "forged"}).status_code == 403
    assert ops.json("dags", "list") == before
    done = web.post("/dags/ops/pause", data={"csrf": csrf.group(1)}, follow_redirects=False)
    assert done.status_code == 303 and ops.json("dags", "list")[0]["is_paused"]
    assert events(ops, "dag_paused")[-1]["actor"] == "web:op"
    web.post("/dags/ops/unpause", data={"csrf": csrf.group(1)})
    # the write API with the browser's cookie needs the CSRF value in a header
    assert web.post("/api/v1/dags/ops/pause").status_code == 403
    assert web.post("/api/v1/dags/ops/unpause", headers={"X-Ledger-CSRF": csrf.group(1)}).status_code == 200


def test_a_viewer_sees_no_actions_and_is_refused_the_action_pages(web: TestClient) -> None:
    signed_in(web, "vi")
    page = web.get("/runs/1")
    assert page.status_code == 200 and "/runs/1/actions" not in page.text and "vi · viewer" in page.text
    assert web.get("/runs/1/actions").status_code == 403
    assert web.post("/runs/1/cancel", data={"csrf": web.cookies["ledger_csrf"]}).status_code == 403
    signed_in(web, "op")
    assert 'href="/runs/1/actions"' in web.get("/runs/1").text


def test_a_deleted_user_is_signed_out(ops: Cli, web: TestClient) -> None:
    assert ops.run("users", "create", "gone", "--role", "operator", input=PASSWORD + "\n").exit_code == 0
    signed_in(web, "gone")
    assert web.get("/api/v1/dags").status_code == 200
    ops.ok("users", "delete", "gone")
    assert web.get("/api/v1/dags").status_code == 401


def test_signing_out_ends_the_session_for_every_copy_of_its_cookie(ops: Cli, web: TestClient) -> None:
    signed_in(web, "op")
    copied = web.cookies["ledger_session"]  # what another tab, a proxy's log or a shared machine's history keeps
    assert web.get("/api/v1/dags").status_code == 200
    out = web.post("/logout", data={"csrf": web.cookies["ledger_csrf"]}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    web.cookies.set("ledger_session", copied)
    assert web.get("/api/v1/dags").status_code == 401
    assert web.get("/runs/1", follow_redirects=False).headers["location"] == "/login?next=%2Fruns%2F1"
    signed_in(web, "op")  # signing in again makes a session of its own
    assert web.get("/api/v1/dags").status_code == 200


def test_the_guard_refuses_a_foreign_host_answers_head_and_sets_headers(web: TestClient) -> None:
    signed_in(web, "vi")
    foreign = web.get("/api/v1/dags", headers={"Host": "attacker.example"})
    assert foreign.status_code == 400 and "LEDGER_WEB_ALLOWED_HOSTS" in foreign.json()["message"]
    head = web.head("/runs/1")
    assert head.status_code == 200 and head.content == b"" and head.headers["content-type"].startswith("text/html")
    for path in ("/", "/api/v1/dags", "/api/docs", "/static/ledger.css", "/nope"):
        answer = web.get(path)
        assert answer.headers["x-content-type-options"] == "nosniff", path
        assert "default-src 'self'" in answer.headers["content-security-policy"], path
    assert web.get("/events", params={"run": "abc"}).status_code == 400
    docs = web.get("/api/docs")
    assert "/api/docs/swagger-ui-bundle.js" in docs.text and "cdn" not in docs.text.lower()
    assert web.get("/api/docs/swagger-ui-bundle.js").status_code == 200


def test_users_are_managed_from_the_cli_with_one_line_refusals(ops: Cli) -> None:
    assert "already" in ops.fails("users", "set-role", "op", "operator").stderr
    assert "no role" in ops.run("users", "create", "x", "--role", "boss", input=PASSWORD + "\n").stderr
    assert "at least 8" in ops.run("users", "create", "short", input="abc\n").stderr
    assert "no user named" in ops.fails("users", "delete", "nobody").stderr
    ops.ok("users", "set-role", "vi", "admin")
    ops.ok("users", "set-role", "vi", "viewer")
    listed = {u["username"]: u["role"] for u in ops.json("users", "list")}
    assert listed["op"] == "operator" and listed["vi"] == "viewer"
    assert [e["details"]["to"] for e in ops.json("events", "--kind", "user_role_set")] == ["admin", "viewer"]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with `cryptography`."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False).sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_the_webserver_serves_tls_with_secure_cookies(ops: Cli, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    assert "--tls-cert and --tls-key go together" in ops.run("webserver", "--tls-cert", str(cert)).stderr
    trusted = ssl.create_default_context(cafile=str(cert))
    with served(ops, "--tls-cert", str(cert), "--tls-key", str(key), context=trusted) as base, \
            urllib.request.urlopen(base + "/login", context=trusted, timeout=10) as answer:
        cookie = answer.headers["set-cookie"]
    assert base.startswith("https://")
    assert cookie.startswith("ledger_csrf=") and "Secure" in cookie and "HttpOnly" in cookie


def test_only_an_admin_sets_and_deletes_pools(ops: Cli, web: TestClient) -> None:
    op = token(ops, "op", "pools")
    refused = web.post("/api/v1/pools/etl", json={"slots": 2}, headers=op)
    assert refused.status_code == 403 and "needs the admin role" in refused.json()["message"]
    assert ops.run("users", "create", "root", "--role", "admin", input=PASSWORD + "\n").exit_code == 0
    admin = token(ops, "root", "pools")
    assert web.post("/api/v1/pools/etl", json={"slots": 2}, headers=admin).status_code == 200
    assert {"name": "etl", "slots": 2, "used": 0, "description": ""} in ops.json("pools", "list")
    assert web.post("/api/v1/pools/etl", json={"slots": -1}, headers=admin).status_code == 400
    assert web.post("/api/v1/pools/etl/delete", headers=admin).status_code == 200
    refused_like_the_cli(ops, web.post("/api/v1/pools/etl/delete", headers=admin), 404, "pools", "delete", "etl")
    assert [e["actor"] for e in ops.json("events", "--kind", "pool_set", "--kind", "pool_deleted")] == \
        ["api:root", "api:root"]
