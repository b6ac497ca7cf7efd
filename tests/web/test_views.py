"""The views of issue 32, in process on a real ledger (tests/web/conftest.py build_views: a Europe/Berlin DAG with
tags, a task group, a mapped task, a log in ANSI colours, a secret in a template and in a passed value, a
backfill that replaced its two runs, a DAG file that fails to import): the grid, the graph, the Gantt, logs in
pages, the home page, local time, the backfill page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.web import pages
from ledger.web.logview import CHUNK, ansi_html, read_page
from tests.conftest import Cli
from tests.web.test_pages import page, text_of


def test_the_home_page_counts_each_dags_runs_by_state_and_shows_its_last_run_in_local_time(
        views_client: TestClient) -> None:
    shown = text_of(page(views_client, "/"))
    assert "overridden 2 success 2" in shown  # berlin: the two scheduled runs, replaced by the backfill's two
    # the last live run by logical date: 2024-03-02 06:00 in Berlin (05:00 UTC), as `ledger timeline` prints it
    assert re.search(r"run 4 success 2024-03-02 06:00:00\+01:00", shown)


@pytest.mark.parametrize("query, found", [("finance", ["berlin"]), ("FIN", []), ("daily", ["berlin"]),
                                          ("slo", ["slow"]), ("erl", ["berlin"]), ("nothing", [])])
def test_the_home_page_finds_dags_by_id_or_tag(views_client: TestClient, query: str, found: list[str]) -> None:
    markup = page(views_client, f"/?q={query}")
    assert re.findall(r'<td><a href="/dags/(\w+)">', markup) == found
    if not found:
        assert f"no DAG id or tag matches {query}" in text_of(markup)


def test_import_errors_have_a_page(views_client: TestClient) -> None:
    home = text_of(page(views_client, "/"))
    assert "1 DAG file(s) failed to import: import errors" in home
    shown = text_of(page(views_client, "/import-errors"))
    assert "broken.py" in shown and "this DAG file is broken on purpose" in shown


def test_the_grid_shows_a_square_per_task_and_live_run_and_reaches_the_runs_they_replaced(
        views_client: TestClient) -> None:
    markup = page(views_client, "/dags/berlin/grid")
    runs = [r for r in views_client.get("/api/v1/dags/berlin/timeline").json()]
    live = [r["run_id"] for r in runs if r["state"] != "overridden"]
    assert re.findall(r'class="run-head state-success" title="run (\d+)', markup) == live  # oldest on the left
    tasks = re.findall(r'<tr(?: class="in-group depth-\d")?><th class="task-col">([^<]+)</th><td', markup)
    assert tasks == ["colours", "load.extract", "load.copy", "fan"]  # graph order
    squares = re.findall(r'<a class="sq state-(\w+)" href="([^"]+)"', markup)
    assert len(squares) == len(tasks) * len(live) and {s for s, _ in squares} == {"success"}
    # a square opens the detail panel of its task instance (tests/web/test_grid_detail.py)
    assert f"/dags/berlin/grid?run={live[0]}&amp;task=colours#detail" in [h for _, h in squares]
    assert f"/dags/berlin/grid?run={live[0]}&amp;task=fan#detail" in [h for _, h in squares]
    for r in runs:
        if r["state"] == "overridden":  # each replaced run linked from the column of the run that replaced it
            assert f'href="/runs/{r["run_id"]}" title="replaced run {r["run_id"]} (scheduled)"' in markup


def test_the_grid_reads_a_page_of_runs_and_links_the_older_ones(views_client: TestClient) -> None:
    first = page(views_client, "/dags/berlin/grid?limit=1")
    assert re.findall(r'title="run (\d+) backfill', first) == ["4"]
    older = re.search(r'<a href="([^"]+)" rel="next">older runs', first)
    assert older is not None and "before=4" in older.group(1)
    second = page(views_client, older.group(1).replace("&amp;", "&"))
    assert re.findall(r'title="run (\d+) backfill', second) == ["3"] and 'rel="next"' not in second
    assert views_client.get("/dags/berlin/grid?before=999").status_code == 400
    assert views_client.get("/dags/berlin/grid?limit=0").status_code == 400
    assert views_client.get("/dags/nope/grid").status_code == 404


def test_the_run_graph_draws_an_edge_per_dependency_a_box_per_group_and_each_task_in_its_state(
        views_client: TestClient) -> None:
    markup = page(views_client, "/runs/3")
    structure = views_client.get("/api/v1/runs/3").json()["graph"]["tasks"]
    assert markup.count('<path class="edge"') == sum(len(t["upstream"]) for t in structure) == 3
    assert re.findall(r'<g class="node state-(\w+)" data-task="([^"]+)"', markup) == [
        ("success", "colours"), ("success", "load.extract"), ("success", "load.copy"), ("success", "fan")]
    assert re.findall(r'<text class="group-label"[^>]*>([^<]+)</text>', markup) == ["load"]
    assert "bash x2 mapped · success" in text_of(markup)
    # the state rule is more specific than the box's default: the box is coloured whatever the rules' order
    css = (Path(pages.__file__).parent / "static" / "ledger.css").read_text()
    assert ".dag-graph .node-box { fill: #fff;" in css and ".dag-graph .state-success .node-box { fill: #d8f3dc;" in css


def test_the_version_page_draws_the_graph_with_groups_but_no_states(views_client: TestClient) -> None:
    version = views_client.get("/api/v1/dags").json()[0]["version"]
    markup = page(views_client, f"/dags/berlin/versions/{version}")
    assert markup.count('<path class="edge"') == 3 and 'class="node state-none"' in markup
    assert "bash x? mapped" in text_of(markup)


def test_the_gantt_draws_each_try_from_its_start_to_its_end(views_client: TestClient) -> None:
    markup = page(views_client, "/runs/3/gantt")
    doc = views_client.get("/api/v1/runs/3").json()
    tries = [(ti["label"], t["try_number"]) for ti in doc["task_instances"] for t in ti["tries"]]
    bars = re.findall(r'<a href="/runs/3/tasks/([^/]+)/tries/(\d+)/log"><rect class="bar state-success" '
                      r'x="([\d.]+)" y="\d+" width="([\d.]+)"', markup)
    assert [(label, int(n)) for label, n, _, _ in bars] == tries
    # colours ran first (the others wait for it): its bar starts the chart, the others start after it ends
    starts = {label: float(x) for label, _, x, _ in bars}
    assert starts["colours"] == 220.0 and all(starts[k] > 220.0 for k in starts if k != "colours")
    assert re.search(r"\d\d:\d\d:\d\d", text_of(markup))  # the time axis, in Berlin time


def test_a_log_shows_ansi_colours_as_spans_and_escapes_the_rest(views_client: TestClient) -> None:
    markup = page(views_client, "/runs/3/tasks/colours/tries/1/log")
    assert '<span class="ansi-fg-1">red alert</span> plain <span class="ansi-bold ansi-fg-2">bold green</span>' \
        in markup
    assert "&lt;b&gt;x&lt;/b&gt;" in markup and "\x1b" not in markup
    shown = text_of(markup)
    assert "key *** on 2024-03-01" in shown and "s3cr3t-value" not in shown
    assert "tries: colours #1" in shown and "download" in shown


@pytest.mark.parametrize("text, expected", [
    ("\x1b[31mred\x1b[0m", '<span class="ansi-fg-1">red</span>'),
    ("\x1b[1;94;41mx\x1b[39mY", '<span class="ansi-bold ansi-fg-12 ansi-bg-1">x</span>'
                                 '<span class="ansi-bold ansi-bg-1">Y</span>'),
    ("\x1b[38;5;196mno 256\x1b[0m <&>", "no 256 &lt;&amp;&gt;"),
    ("\x1b[2Kcleared\x07 line", "cleared line"),
    ("a\x1b[mb", "ab"),
])
def test_ansi_sequences_become_spans_with_classes(text: str, expected: str) -> None:
    assert str(ansi_html(text)) == expected


def test_the_log_page_of_a_mapped_instance_switches_between_instances_and_tries(views_client: TestClient) -> None:
    shown = text_of(page(views_client, "/runs/3/tasks/fan%5B1%5D/tries/1/log"))
    assert "tries: fan[0] #1 fan[1] #1" in shown and "echo two" in shown
    assert views_client.get("/runs/3/tasks/fan%5B2%5D/tries/1/log").status_code == 404
    assert views_client.get("/runs/3/tasks/colours/tries/2/log").status_code == 404


def test_rendered_templates_and_xcom_of_a_try_show_secrets_as_stars(
        views_client: TestClient, views_home: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_HOME", str(views_home.home))  # where the server finds the key of stored secrets
    shown = text_of(page(views_client, "/runs/3/tasks/load.extract/tries/1/log"))
    assert 'XCom (try 1) key value at return_value {"rows": 3, "token": "***"}' in shown
    # (its log holds what the task printed, as `ledger tasks logs` shows it: the try never read the variable)
    assert "s3cr3t-value" not in shown.partition("rendered templates (try 1)")[2]
    colours = text_of(page(views_client, "/runs/3/tasks/colours/tries/1/log"))
    assert "rendered templates (try 1) field value bash_command" in colours
    assert "echo 'key *** on 2024-03-01'" in colours


def big_log(views_home: Cli) -> Path:
    """The log of fan[0] in run 4 grown to 2.5 MB of numbered lines (and its original first line kept)."""
    path = views_home.home / "logs" / "berlin" / "run_4" / "fan" / "map_0" / "try_1.log"
    if path.stat().st_size < CHUNK:
        with path.open("a") as f:
            for i in range(50_000):
                f.write(f"line {i:06d} \x1b[32m{'x' * 40}\x1b[0m\n")
    return path


def test_a_big_log_is_served_a_megabyte_at_a_time_from_the_end(views_client: TestClient, views_home: Cli) -> None:
    path = big_log(views_home)
    size = path.stat().st_size
    markup = page(views_client, "/runs/4/tasks/fan%5B0%5D/tries/1/log")
    assert len(markup) < CHUNK * 2
    first = re.search(r"bytes (\d+) to (\d+) of (\d+)", text_of(markup))
    assert first is not None and int(first.group(2)) == int(first.group(3)) == size
    start = int(first.group(1))
    assert size - CHUNK <= start < size - CHUNK + 60  # the last MB, from the start of a line
    assert "line 049999" in markup and re.search(r">line \d{6} ", markup)
    older = page(views_client, f"/runs/4/tasks/fan%5B0%5D/tries/1/log?before={start}")
    second = re.search(r"bytes (\d+) to (\d+) of", text_of(older))
    assert second is not None and int(second.group(2)) == start
    oldest = page(views_client, f"/runs/4/tasks/fan%5B0%5D/tries/1/log?before={second.group(1)}")
    assert "bytes 0 to " in text_of(oldest) and "[ledger]" in oldest and 'rel="prev"' not in oldest


def test_the_log_api_reads_by_offset_and_before_and_the_download_is_the_whole_file(
        views_client: TestClient, views_home: Cli) -> None:
    path = big_log(views_home)
    data = path.read_bytes()
    api = "/api/v1/runs/4/tasks/fan%5B0%5D/tries/1/log"
    last = views_client.get(api).json()
    assert last["ended"] is True and last["size"] == len(data) and last["next_offset"] == len(data)
    assert last["text"].encode() == data[last["offset"]:]
    head = views_client.get(api, params={"offset": 0, "limit": 1000}).json()
    assert head["offset"] == 0 and head["text"].encode() == data[:head["next_offset"]]
    assert head["text"].endswith("\n") and head["next_offset"] <= 1000
    following = views_client.get(api, params={"offset": head["next_offset"], "limit": 1000}).json()
    assert following["offset"] == head["next_offset"]
    before = views_client.get(api, params={"before": 5000, "limit": 1000}).json()
    assert before["next_offset"] == 5000 and data[before["offset"] - 1:before["offset"]] == b"\n"
    assert views_client.get(api, params={"offset": 0, "before": 10}).status_code == 400
    assert views_client.get(api, params={"limit": CHUNK + 1}).status_code == 400
    assert views_client.get("/api/v1/runs/4/tasks/nope/tries/1/log").status_code == 404
    download = views_client.get("/runs/4/tasks/fan%5B0%5D/tries/1/log/download")
    assert download.status_code == 200 and download.content == data
    assert download.headers["content-disposition"] == 'attachment; filename="berlin_run4_fan_0_try1.log"'


def test_the_follow_returns_only_whole_lines_appended_after_an_offset(tmp_path: Path) -> None:
    log = tmp_path / "try_1.log"
    log.write_bytes(b"one\ntwo\nthr")
    part = read_page(log, after=4)
    assert (part.text, part.start, part.end) == ("two\n", 4, 8)  # "thr" is still being written
    assert read_page(log, after=8).text == ""
    assert read_page(log, after=8, whole_lines=False).text == "thr"  # the try has ended: the rest
    with log.open("ab") as f:
        f.write(b"ee\nfour\n")
    assert read_page(log, after=8).text == "three\nfour\n"


def test_the_follow_fragment_of_the_log_page(views_client: TestClient) -> None:
    live = views_client.get("/runs/3/tasks/colours/tries/1/log?after=0", headers={"X-Ledger-Live": "1"})
    assert live.status_code == 200 and live.text.startswith('<span data-next="')
    assert 'data-done="1"' in live.text and '<span class="ansi-fg-1">red alert</span>' in live.text
    # an ended try's page does not follow
    assert "data-follow" not in page(views_client, "/runs/3/tasks/colours/tries/1/log")


def test_times_are_in_the_dags_timezone_and_the_page_offers_the_other_zones(views_client: TestClient) -> None:
    markup = page(views_client, "/runs/3")
    assert "<td>2024-03-01 06:00:00+01:00</td>" in markup and "05:00:00Z" not in markup  # one format per page
    assert '<form class="tz-form" method="post" action="/timezone"' in markup and 'id="tz-browser"' in markup


def test_the_backfill_page_shows_its_runs_in_pages_and_a_progress_bar_of_its_live_runs(
        views_client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    markup = page(views_client, "/backfills/1")
    assert "{'run_id'" not in markup and "[{" not in markup
    assert '<progress max="2" value="2"></progress> 2/2 runs done' in markup
    monkeypatch.setattr(pages, "BACKFILL_RUNS", 1)
    first = page(views_client, "/backfills/1")
    assert re.findall(r'<tr><td><a href="/runs/(\d+)">', first) == ["3"]
    assert "runs 1 to 1 of the 2 it created" in text_of(first) and 'href="?offset=1" rel="next"' in first
    second = page(views_client, "/backfills/1?offset=1")
    assert re.findall(r'<tr><td><a href="/runs/(\d+)">', second) == ["4"] and 'rel="next"' not in second
    assert views_client.get("/backfills/1?offset=-1").status_code == 400


@pytest.mark.parametrize("path, part", [("/dags/berlin/grid", '<table class="grid">'),
                                        ("/runs/3/gantt", '<svg class="gantt"'),
                                        ("/backfills/1", '<table class="backfill-runs">')])
def test_the_live_part_of_the_grid_gantt_and_backfill_pages(views_client: TestClient, path: str, part: str) -> None:
    live = views_client.get(path, headers={"X-Ledger-Live": "1"})
    assert live.status_code == 200 and part in live.text and "<html" not in live.text
    assert '<div id="live" data-live="2000">' in page(views_client, path)


def test_the_api_gives_a_trys_rendered_templates_and_xcom_with_secrets_as_stars(
        views_client: TestClient, views_home: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_HOME", str(views_home.home))
    extract = views_client.get("/api/v1/runs/3/tasks/load.extract/tries/1").json()
    assert (extract["run_id"], extract["task_id"], extract["try_number"], extract["state"]) == (
        "3", "load.extract", 1, "success")
    assert [(x["key"], x["value"]) for x in extract["xcom"]] == [("return_value", {"rows": 3, "token": "***"})]
    colours = views_client.get("/api/v1/runs/3/tasks/colours/tries/1").json()
    assert colours["rendered"]["bash_command"].endswith("echo 'key *** on 2024-03-01'") and colours["xcom"] == []
    assert views_client.get("/api/v1/runs/3/tasks/colours/tries/2").status_code == 404
