"""The admin pages, in process on a real ledger (made with the real CLI): an admin manages users, variables,
connections and pools through the operations the CLI runs (its events name the admin); secrets are never in a
page (masked as the CLI masks them); every form needs its CSRF token; operators and viewers get no link and 403."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import Cli
from tests.web.conftest import PASSWORD, app_client
from tests.web.test_actions import signed_in

PAGES = ("/admin/users", "/admin/variables", "/admin/connections", "/admin/pools")
SECRET = "pw-s3cret-value"


@pytest.fixture(scope="module")
def ops(ops_home: Cli) -> Iterator[Cli]:
    cli = ops_home
    assert cli.run("users", "create", "root", "--role", "admin", input=PASSWORD + "\n").exit_code == 0
    with pytest.MonkeyPatch.context() as env:  # the server's Fernet key is the ledger's (its LEDGER_HOME)
        env.setenv("LEDGER_HOME", str(cli.home))
        env.delenv("LEDGER_FERNET_KEY", raising=False)
        yield cli


@pytest.fixture(scope="module")
def web(ops: Cli) -> Iterator[TestClient]:
    yield from app_client(ops)


def post(web: TestClient, path: str, **fields: str) -> Any:
    return web.post(path, data={"csrf": web.cookies["ledger_csrf"], **fields}, follow_redirects=False)


def actors(cli: Cli, kind: str) -> list[str]:
    return [e["actor"] for e in cli.json("events", "--kind", kind)]


def test_an_admin_creates_changes_and_deletes_users(ops: Cli, web: TestClient) -> None:
    signed_in(web, "root")
    page = web.get("/admin/users")
    assert page.status_code == 200 and all(f"<td>{u}</td>" in page.text for u in ("op", "vi", "root"))
    made = post(web, "/admin/users", username="ada", password=PASSWORD, role="operator")
    assert made.status_code == 303 and made.headers["location"] == "/admin/users"
    assert post(web, "/admin/users/ada/role", role="viewer").status_code == 303
    assert {u["username"]: u["role"] for u in ops.json("users", "list")}["ada"] == "viewer"
    before = ops.json("users", "list")
    for path, fields, status, message in [
            ("/admin/users", {"username": "bob", "password": "short", "role": "viewer"}, 400, "at least 8"),
            ("/admin/users", {"username": "ada", "password": PASSWORD, "role": "viewer"}, 400, "exists already"),
            ("/admin/users/ada/role", {"role": "boss"}, 400, "no role 'boss'"),
            ("/admin/users/root/delete", {}, 400, "you cannot delete your own user"),
            ("/admin/users/root/role", {"role": "viewer"}, 400, "you cannot change the role of your own user"),
            ("/admin/users/nobody/delete", {}, 404, "no user named 'nobody'")]:
        refused = post(web, path, **fields)
        assert refused.status_code == status and message in refused.text.replace("&#39;", "'"), (path, refused.text)
    assert web.post("/admin/users/ada/delete", data={"csrf": "forged"}).status_code == 403
    assert ops.json("users", "list") == before
    assert post(web, "/admin/users/ada/delete").status_code == 303
    assert "ada" not in {u["username"] for u in ops.json("users", "list")}
    assert actors(ops, "user_created")[-1] == actors(ops, "user_deleted")[-1] == "web:root"


def test_variables_and_connections_are_set_and_deleted_and_secrets_never_shown(ops: Cli, web: TestClient) -> None:
    signed_in(web, "root")
    assert post(web, "/admin/variables", key="db_password", value=SECRET).status_code == 303
    assert post(web, "/admin/variables", key="region", value="eu-west-1", description="where").status_code == 303
    assert ops.ok("variables", "get", "db_password").strip() == SECRET  # stored as the CLI stores it
    page = web.get("/admin/variables").text
    assert "<code>eu-west-1</code>" in page and "<code>***</code>" in page and SECRET not in page
    uri = f"postgresql://etl:{SECRET}@db.example:5432/sales?sslmode=require"
    assert post(web, "/admin/connections", conn_id="warehouse", uri=uri).status_code == 303
    page = web.get("/admin/connections").text
    (shown,) = ops.json("connections", "list")
    assert shown["password"] == shown["extra"] == "***" and SECRET not in page
    row = re.search(r"<tr><td>warehouse</td>(.*?)</tr>", page, re.S)
    assert row is not None and re.findall(r"<td>([^<]*)</td>", row.group(1))[:7] == \
        ["postgresql", "db.example", "5432", "etl", "sales", "***", "***"]
    bad = post(web, "/admin/connections", conn_id="broken", uri=f"//etl:{SECRET}@db.example")
    assert bad.status_code == 400 and "is not a URI" in bad.text and SECRET not in bad.text
    assert post(web, "/admin/variables", key="no spaces", value="x").status_code == 400
    assert post(web, "/admin/variables/db_password/delete").status_code == 303
    assert post(web, "/admin/connections/warehouse/delete").status_code == 303
    assert post(web, "/admin/connections/warehouse/delete").status_code == 404
    assert [v["key"] for v in ops.json("variables", "list")] == ["region"] and ops.json("connections", "list") == []
    assert actors(ops, "variable_set") == ["web:root", "web:root"] and actors(ops, "connection_deleted") == ["web:root"]


def test_an_admin_sets_and_deletes_pools(ops: Cli, web: TestClient) -> None:
    signed_in(web, "root")
    assert post(web, "/admin/pools", name="etl", slots="3", description="loads").status_code == 303
    assert {"name": "etl", "slots": 3, "used": 0, "description": "loads"} in ops.json("pools", "list")
    assert "<td>etl</td><td>3</td>" in web.get("/admin/pools").text
    for slots in ("-1", "x", ""):
        assert post(web, "/admin/pools", name="etl", slots=slots).status_code == 400
    assert post(web, "/admin/pools/etl/delete").status_code == 303
    assert post(web, "/admin/pools/etl/delete").status_code == 404
    assert actors(ops, "pool_set") == actors(ops, "pool_deleted") == ["web:root"]


@pytest.mark.parametrize("user", ["op", "vi"])
def test_operators_and_viewers_see_no_admin_link_and_are_refused(ops: Cli, web: TestClient, user: str) -> None:
    signed_in(web, user)
    assert "/admin/" not in web.get("/").text
    before = [ops.json(*what) for what in (("users", "list"), ("variables", "list"), ("pools", "list"))]
    for path in PAGES:
        assert web.get(path).status_code == 403, path
    for path, fields in [("/admin/users", {"username": "eve", "password": PASSWORD, "role": "admin"}),
                         ("/admin/users/op/role", {"role": "admin"}), ("/admin/users/vi/delete", {}),
                         ("/admin/variables", {"key": "k", "value": "v"}), ("/admin/variables/region/delete", {}),
                         ("/admin/connections", {"conn_id": "c", "uri": "http://h"}),
                         ("/admin/pools", {"name": "p", "slots": "1"})]:
        refused = post(web, path, **fields)
        assert refused.status_code == 403 and "needs the admin role" in refused.text, path
    assert [ops.json(*what) for what in (("users", "list"), ("variables", "list"), ("pools", "list"))] == before
    signed_in(web, "root")
    assert 'href="/admin/users"' in web.get("/").text
