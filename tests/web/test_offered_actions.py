"""The run actions page offers only what can apply: nothing on an overridden run (it is history), no cancel on a
finished run, no mark to the state the run is in already."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli
from tests.web.conftest import copy_ops
from tests.web.test_actions import signed_in


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
