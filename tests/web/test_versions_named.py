"""Versions named by number and date, with a diff between any two (issue 41, part 5), in process on
tests/web/conftest.py's ledger (DAG `web`: version 1 writes 10 rows, version 2 writes 11)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.web.test_pages import page, text_of


def test_versions_are_named_by_number_and_date_on_the_timeline_and_their_page(client: TestClient) -> None:
    versions = client.get("/api/v1/dags/web/versions").json()
    names = [f"v{i} · {v['created_at'][:10]}" for i, v in enumerate(versions, start=1)]
    timeline = text_of(page(client, "/dags/web"))
    assert all(n in timeline for n in names)
    shown = text_of(page(client, f"/dags/web/versions/{versions[1]['version']}"))
    assert shown.startswith(f"{names[1]} of web") or f"{names[1]} of web" in shown


def diff_of(markup: str) -> list[str]:
    return re.findall(r'<span class="(?:add|del)">([^<]*)</span>', markup)


def test_a_version_is_diffed_against_any_other_by_name_or_hash(client: TestClient) -> None:
    old, new = (v["version"] for v in client.get("/api/v1/dags/web/versions").json())
    default = page(client, f"/dags/web/versions/{new}")
    assert any("rows=11" in line and line.startswith("+") for line in diff_of(default))
    assert diff_of(page(client, f"/dags/web/versions/{new}?against=v1")) == diff_of(default)
    assert diff_of(page(client, f"/dags/web/versions/{new}?against={old[:10]}")) == diff_of(default)
    backwards = page(client, f"/dags/web/versions/{old}?against=v2")  # from v2 back to v1
    assert "diff from v2" in text_of(backwards)
    assert any("rows=10" in line and line.startswith("+") for line in diff_of(backwards))
    assert f'<option value="{new}" selected>' in backwards  # the form names what is compared
    assert client.get(f"/dags/web/versions/{new}?against=v9").status_code == 404
