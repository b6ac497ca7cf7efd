"""The task duration chart (issue 41, part 5): in process on tests/web/conftest.py's ledger (DAG `web`: live runs
of tasks write and flaky, two of them run, flaky failing its first try; the third queued), and its pure rule with a
fixed clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from fastapi.testclient import TestClient

from ledger.web.views import CHART_HEIGHT, durations
from tests.conftest import Cli


def series(markup: str) -> dict[str, list[str]]:
    """Task -> the titles of its bars, oldest run first."""
    out = {}
    for task, body in re.findall(r'<div class="duration-series" data-task="([^"]+)">(.*?)</div>\n</div>', markup, re.S):
        out[task] = re.findall(r"<title>([^<]+)</title>", body)
    return out


def test_the_chart_draws_each_tasks_latest_try_in_each_run(client: TestClient, ledger_home: Cli) -> None:
    page = client.get("/dags/web/durations")
    assert page.status_code == 200
    shown = series(page.text)
    assert list(shown) == ["the whole run", "write", "flaky"]
    ran = [r["run_id"] for r in ledger_home.json("timeline", "web")  # oldest first; the queued run has no try yet
           if r["state"] not in ("overridden", "queued")]
    for task, titles in shown.items():
        assert [re.search(r"in run (\d+)", t).group(1) for t in titles] == ran, task  # type: ignore[union-attr]
    assert all(t.endswith("success") for t in shown["flaky"])  # its latest try, not the failed first one
    two = client.get("/dags/web/durations", params={"limit": 2}).text  # the queued run and the one before
    assert [t.split(" (")[0] for t in series(two)["flaky"]] == [f"flaky in run {ran[-1]}"] and 'rel="next"' in two
    assert client.get("/dags/nope/durations").status_code == 404
    assert client.get("/dags/web/durations", params={"limit": 0}).status_code == 400


def test_bars_are_scaled_to_the_longest_and_a_running_try_counts_until_now() -> None:
    t0 = datetime(2024, 3, 1, tzinfo=UTC)
    now = t0 + timedelta(seconds=40)
    runs = [SimpleNamespace(id=i, logical_date=t0 + timedelta(days=i), started_at=None, ended_at=None, state="success")
            for i in (3, 2, 1)]  # newest first, as the grid reads them
    spans = [(1, "a", "success", t0, t0 + timedelta(seconds=10)),
             (2, "a", "running", t0, None),  # running: 40 s by now
             (1, "m", "success", t0, t0 + timedelta(seconds=2)), (1, "m", "failed", t0, t0 + timedelta(seconds=5)),
             (3, "a", None, None, None)]  # not started: no bar
    drawn, width = durations(runs, spans, ["a", "m"], now)
    assert [s.task_id for s in drawn] == ["a", "m"] and width == 3 * 18
    a, m = drawn
    assert [(b.x, b.height, b.state) for b in a.bars] == [(0, CHART_HEIGHT / 4, "success"),
                                                          (18, CHART_HEIGHT, "running")]
    assert (a.longest, m.longest) == (40.0, 5.0) and m.bars[0].state == "failed"  # a mapped task: its longest
    assert a.bars[1].href == "/runs/2#ti-a" and "40.0s" in a.bars[1].title
