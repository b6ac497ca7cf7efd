"""A real `ledger webserver` process on a free loopback port, read over HTTP and in headless Chromium.

Each page Chromium loads is saved as a screenshot under $LEDGER_TEST_ARTIFACTS (default: artifacts/web in
the repository, git-ignored). Without Chromium the browser test is skipped, except in CI (CI=true), where
.ci/run installs it."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli
from tests.web.conftest import served

ARTIFACTS = Path(os.environ.get("LEDGER_TEST_ARTIFACTS") or REPO / "artifacts") / "web"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def webserver(cli: Cli) -> AbstractContextManager[str]:
    """A `ledger webserver` on `cli`'s ledger, on a free loopback port, once it answers: its base URL."""
    return served(cli, path="/api/v1/dags")


@pytest.fixture(scope="module")
def server(ledger_home: Cli) -> Iterator[str]:
    with webserver(ledger_home) as base:
        yield base


def test_a_real_webserver_serves_the_pages_and_the_api(server: str, ledger_home: Cli) -> None:
    trap = ledger_home.dags / "trap.py"  # a DAG file the server must never import
    marker = ledger_home.home / "trap-imported"
    trap.write_text(f"open({str(marker)!r}, 'w').close()\n")
    try:
        for path in ("/", "/dags/web", "/runs/4", "/api/v1/dags", "/api/v1/import-errors"):
            assert fetch(server + path)[0] == 200, path
    finally:
        trap.unlink()
    assert not marker.exists()
    status, body = fetch(server + "/")
    assert status == 200 and 'href="/dags/web"' in body
    assert fetch(server + "/api/v1/runs/4")[0] == 200
    status, body = fetch(server + "/api/v1/runs/999")
    assert status == 404 and '"message"' in body
    request = urllib.request.Request(server + "/api/v1/dags", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def chromium_or_skip() -> str:
    """Chromium's binary; the test is skipped without it, except in CI (where .ci/run installs it)."""
    binary = chromium()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing in CI: .ci/run installs it")
        pytest.skip("chromium is not installed")
    return binary


def browse(binary: str, url: str, name: str) -> str:
    """The page as headless Chromium rendered it (the DOM after its scripts ran); its screenshot is saved."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    done = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1400,1000", f"--screenshot={shot}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 1000
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", done.stdout)).split())


@pytest.mark.browser
def test_headless_chromium_shows_overrides_the_version_change_tries_and_lineage(server: str) -> None:
    binary = chromium_or_skip()
    timeline = browse(binary, server + "/dags/web", "timeline")
    assert "overridden by run 4" in timeline and "overridden by run 5" in timeline
    assert re.search(r"run 4 backfill success .* replaced run 2 \(scheduled", timeline)
    assert re.search(r"◆ version [0-9a-f]{8} → [0-9a-f]{8}", timeline)
    run = browse(binary, server + "/runs/4", "run")
    assert "flaky success 1/2 failed" in run and "flaky success 2/2 success" in run
    lineage = browse(binary, server + "/lineage/sales_clean", "lineage")
    assert re.search(r"2024-03-02 current run 4 \(backfill\) write · try 1 success", lineage)
    assert "earlier run 2 (scheduled)" in lineage and "overridden by run 4" in lineage
    current = json.loads(fetch(server + "/api/v1/dags")[1])[0]["version"]
    version = browse(binary, f"{server}/dags/web/versions/{current}", "version")
    assert "diff against the version before" in version and "rows=11" in version
    for path, name in (("/", "dags"), ("/backfills", "backfills"), ("/events?dag=web", "events"),
                       ("/signals", "signals"), ("/runs/1/tasks/write/tries/1/log", "log")):
        shown = browse(binary, server + path, name)
        assert "read-only" in shown
    assert "<script>alert('x')</script>" in browse(binary, server + "/runs/5", "run_conf")  # shown as text
