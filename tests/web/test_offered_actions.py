"""The actions pages offer only what can apply. A run's: nothing on an overridden run (it is history), no cancel on a
finished run, no mark to the state the run is in already. A backfill's: cancel while it is running or interrupted,
resume only once it is interrupted, nothing once it is cancelled (the service's own rules,
ledger.core.backfill_state)."""

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
    cli = copy_ops(ops_template, tmp_path_factory.mktemp("offered") / "home")  # runs 1 and 2: success
    cli.ok("trigger", "ops", "--logical-date", "2024-03-01", "--replace")  # run 3 (queued) overrides run 1
    return cli


def buttons(web: TestClient, run_id: int) -> list[str]:
    page = web.get(f"/runs/{run_id}/actions")
    assert page.status_code == 200, page.text
    return [b.split("</button>")[0] for b in page.text.split("<button>")[1:] if not b.startswith("sign out")]


def test_only_the_actions_that_can_apply_are_offered(ops: Cli) -> None:
    runs = {(r["logical_date"][:10], r["state"]): int(r["run_id"]) for r in ops.json("timeline", "ops", "--all")}
    old, new, done = runs["2024-03-01", "overridden"], runs["2024-03-01", "queued"], runs["2024-03-02", "success"]
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        web = signed_in(c, "op")
        assert buttons(web, old) == []
        assert f'overridden by <a href="/runs/{new}">run {new}</a>' in web.get(f"/runs/{old}/actions").text
        assert buttons(web, done) == ["clear…", "mark failed"]  # success: no cancel, no mark success
        assert buttons(web, new) == ["clear…", "mark success", "mark failed", "cancel the run"]  # queued


def test_the_grid_has_a_legend_and_failure_states_have_colours_of_their_own(ops: Cli) -> None:
    import re
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "ledger" / "web" / "static" / "ledger.css").read_text()
    light = css.split("@media (prefers-color-scheme: dark)")[0]

    def colour(rule: str) -> str:
        found = re.search(r"(?:^|[\s}])" + re.escape(rule) + r" \{ background: (#[0-9a-f]{6});", light)
        assert found is not None, rule
        return found.group(1)

    for kind in (".state-", ".sq.state-"):
        colours = [colour(kind + s) for s in ("failed", "upstream_failed", "up_for_retry", "lost")]
        assert len(set(colours)) == 4, (kind, colours)
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        grid = signed_in(c, "op").get("/dags/ops/grid").text
    for s in ("failed", "upstream_failed", "up_for_retry", "up_for_reschedule", "lost"):
        assert f'<span class="sq state-{s}"></span>{s}' in grid


STOPPING_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("stops", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), catchup=False,
         default_args={"depends_on_past": True}):
    BashTask("a", "exit 1")
"""


def test_a_backfill_is_offered_cancel_while_in_progress_resume_once_interrupted_and_nothing_once_cancelled(
        tmp_path: Path, ops_template: Path) -> None:
    ops = copy_ops(ops_template, tmp_path / "home")
    ops.ok("backfill", "ops", "--start", "2024-03-05", "--end", "2024-03-06", "--submit", "--yes")  # backfill 1
    ops.write_dag("stops.py", STOPPING_DAG)
    # its first date fails, so the second (depends_on_past) can never start: the backfill job stops, interrupted
    assert ops.run("backfill", "stops", "--start", "2024-03-01", "--end", "2024-03-02", "--yes",
                   LEDGER_POLL_INTERVAL="0.2").exit_code == 1
    assert [(b["backfill_id"], b["state"]) for b in ops.json("backfill", "list")] == [("2", "interrupted"),
                                                                                     ("1", "running")]
    with TestClient(create_app(load_settings({"LEDGER_HOME": str(ops.home)})), base_url="http://localhost") as c:
        web = signed_in(c, "op")

        def offered(backfill_id: int) -> tuple[list[str], str]:
            page = web.get(f"/backfills/{backfill_id}/actions")
            assert page.status_code == 200, page.text
            return re.findall(r"<button>(\w+):", page.text), text_of(page.text)

        assert offered(2)[0] == ["cancel", "resume"]
        running, says = offered(1)
        assert running == ["cancel"] and "backfill 1 is running: its job or a scheduler runs its runs" in says
        refused = web.post("/backfills/1/resume", data={"csrf": web.cookies["ledger_csrf"]})  # as the page said
        assert refused.status_code == 400 and "backfill 1 is running: there is nothing to resume" in refused.text
        ops.ok("backfill", "cancel", "1")
        cancelled, says = offered(1)
        assert cancelled == [] and "what a cancel does" not in says
        assert "backfill 1 is cancelled: it can be neither cancelled nor resumed" in says
