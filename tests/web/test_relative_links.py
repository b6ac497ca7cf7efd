"""The pages' `older »` and `« newest` links are the path and query only: the browser keeps the scheme and host it
used, which behind a proxy that ends TLS (`https://ledger.example.org`) are not the ones the server sees
(`http://...`); the API's `Link` header stays a whole URL, as docs/web.md shows it (decision 0354). In process on
tests/web/conftest.py's ledger (DAG `web`: 5 runs, its events and signals)."""

from __future__ import annotations

import html
import re

import pytest
from fastapi.testclient import TestClient

PAGED = [("/dags/web/grid", {"limit": 1}), ("/dags/web/durations", {"limit": 1}), ("/dags/web", {"limit": 2}),
         ("/runs", {"limit": 1}), ("/events", {"limit": 2}), ("/signals", {"limit": 1, "task_signals": "true"})]


def links(markup: str) -> dict[str, str]:
    """The pager's links by their text (`older »`, `« newest`), as the browser reads them."""
    pager = markup.split('<p class="pager">', 1)[1].split("</p>", 1)[0]
    return {text.strip(): html.unescape(href) for href, text in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>',
                                                                           pager)}


@pytest.mark.parametrize(("path", "params"), PAGED, ids=[p for p, _ in PAGED])
def test_pagination_links_are_the_path_and_query_only(client: TestClient, path: str, params: dict[str, object]
                                                      ) -> None:
    first = client.get(path, params=params)
    older = next(href for text, href in links(first.text).items() if text.startswith("older"))
    assert older.startswith(f"{path}?") and "limit=" in older, older
    second = client.get(older)
    assert second.status_code == 200
    newest = links(second.text)["« newest"]
    assert newest.startswith(f"{path}?") or newest.startswith("?"), newest  # the events' and signals': a query
    assert client.get(path + newest if newest.startswith("?") else newest).status_code == 200


def test_the_apis_link_header_is_the_whole_url_docs_web_md_shows(client: TestClient) -> None:
    following = client.get("/api/v1/dags/web/timeline", params={"limit": 2}).headers["link"]
    assert following == '<http://localhost/api/v1/dags/web/timeline?limit=2&cursor=2>; rel="next"'
