"""`ledger backfill` scenarios through the real console script: splicing, policies, locks, the scheduler."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.timeline import ChainRun, chain_violations
from tests import launcher
from tests.conftest import LEDGER, Cli

D = "2024-03-0{}T00:00:00+00:00".format  # D(2) == "2024-03-02T00:00:00+00:00"
FAST = {"LEDGER_POLL_INTERVAL": "0.2"}


def dag_source(dag_id: str = "d", *, start: int = 1, end: int | None = None, catchup: bool = True,
               command: str = "true", depends_on_past: bool = False, max_active_runs: int = 16) -> str:
    """A daily DAG starting 2024-03-<start> UTC: task a (`command`) >> task b."""
    end_date = f"pendulum.datetime(2024, 3, {end}, tz='UTC')" if end is not None else "None"
    return (
        "import pendulum\n"
        "from ledger import DAG, BashTask\n\n"
        f"with DAG({dag_id!r}, schedule='@daily', start_date=pendulum.datetime(2024, 3, {start}, tz='UTC'),\n"
        f"         end_date={end_date}, catchup={catchup}, max_active_runs={max_active_runs}) as dag:\n"
        f"    a = BashTask('a', {command!r}, depends_on_past={depends_on_past})\n"
        "    b = BashTask('b', 'true')\n"
        "    a >> b\n"
    )


def held_until(release: Path) -> str:
    """A bash command that waits until the test creates `release` (at most 120 s), so that what the test does
    meanwhile happens while the task runs, whatever the machine's load."""
    return f'for i in $(seq 2400); do [ -e {str(release)!r} ] && exit 0; sleep 0.05; done; exit 1'


def fails_on(day: int) -> str:
    """A bash command that fails only in the run of 2024-03-<day>."""
    return f'[ "$LEDGER_LOGICAL_DATE" != "{D(day)}" ]'


def timeline(cli: Cli, dag_id: str = "d") -> list[dict[str, Any]]:
    """The DAG's runs (overridden ones included), after asserting that the timeline invariant holds."""
    runs: list[dict[str, Any]] = cli.json("timeline", dag_id)

    def num(value: str | None) -> int | None:
        return None if value is None else int(value)

    chain = [ChainRun(int(r["run_id"]), datetime.fromisoformat(r["logical_date"]), num(r["previous_run_id"]),
                      r["state"] != "overridden", num(r["overridden_by"])) for r in runs]
    assert chain_violations(chain) == [], runs
    return runs


def live_by_date(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["logical_date"]: r for r in runs if r["state"] != "overridden"}


def backfill(cli: Cli, start: int, end: int, *args: str, dag_id: str = "d") -> Any:
    return cli.run("backfill", dag_id, "--start", f"2024-03-0{start}", "--end", f"2024-03-0{end}", *args)


def plan(cli: Cli, start: int, end: int, *args: str, dag_id: str = "d") -> list[dict[str, Any]]:
    out = cli.ok("backfill", dag_id, "--start", f"2024-03-0{start}", "--end", f"2024-03-0{end}", *args,
                 "--dry-run", "--json")
    result: list[dict[str, Any]] = json.loads(out)
    return result


def schedule(cli: Cli, **env: str) -> str:
    return cli.ok("scheduler", "--exit-when-idle", **{**FAST, **env})


@contextmanager
def db(cli: Cli) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection on the LEDGER_HOME database (committed and closed on exit)."""
    conn = sqlite3.connect(cli.home / "ledger.db", timeout=30)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def query(cli: Cli, sql: str) -> list[tuple[Any, ...]]:
    """The rows of `sql` on the Cli's database: the PostgreSQL one LEDGER_DATABASE_URL names, else the SQLite
    file in LEDGER_HOME. A connection per call (no pool), so that nothing is left open when the test ends."""
    url = cli.env.get("LEDGER_DATABASE_URL")
    if url is None:
        with db(cli) as conn:
            return conn.execute(sql).fetchall()
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def sqlite_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def task_states(cli: Cli, run_id: str) -> dict[str, tuple[str, int]]:
    """{task_id: (state, try_number)} of a run's task instances, read straight from the database."""
    with db(cli) as conn:
        rows = conn.execute("SELECT task_id, state, try_number FROM task_instance WHERE run_id = ?", (int(run_id),))
        return {task_id: (state, tries) for task_id, state, tries in rows}


def wait_until(condition: Callable[[], bool], timeout: float = 180.0, what: str = "condition") -> None:
    """Poll until `condition` holds; the limit is generous because a loaded CI machine starts processes slowly
    (a pass returns as soon as the condition holds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def start_scheduler(cli: Cli, **env: str) -> subprocess.Popen[str]:
    """`ledger scheduler` in the background, its output in $LEDGER_HOME/scheduler.log."""
    with open(cli.home / "scheduler.log", "w") as log:
        return launcher.popen([LEDGER, "scheduler"], env={**cli.env, **FAST, **env}, cwd=cli.home, text=True,
                              stdout=log, stderr=subprocess.STDOUT)


def stop_scheduler(proc: subprocess.Popen[str], cli: Cli) -> str:
    """SIGTERM: the scheduler must stop cleanly with exit status 0. Returns its output."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = (cli.home / "scheduler.log").read_text()
    assert proc.returncode == 0, out
    return out


# -- splicing into the timeline ------------------------------------------------------------------------

def test_a_backfill_into_an_empty_timeline_creates_one_chain_of_backfill_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    result = backfill(cli, 1, 3, "--yes")
    assert result.exit_code == 0, result.output
    assert "3 new, 0 override, 0 skip" in result.stdout
    runs = timeline(cli)
    assert [r["logical_date"] for r in runs] == [D(1), D(2), D(3)]
    assert {(r["run_type"], r["state"]) for r in runs} == {("backfill", "success")}
    assert [r["previous_run_id"] for r in runs] == [None, runs[0]["run_id"], runs[1]["run_id"]]
    (row,) = cli.json("backfill", "list")
    assert {r["backfill_id"] for r in runs} == {row["backfill_id"]}
    assert (row["state"], row["runs"], row["runs_done"], row["runs_failed"], row["reprocess"]) == (
        "success", 3, 3, 0, "none")
    for r in runs:
        assert task_states(cli, r["run_id"]) == {"a": ("success", 1), "b": ("success", 1)}
    shown = cli.json("runs", "show", runs[0]["run_id"])
    assert [(ti["task_id"], ti["state"]) for ti in shown["task_instances"]] == [("a", "success"), ("b", "success")]
    kinds = [e["kind"] for e in cli.json("events", "--dag", "d")]
    assert kinds.count("backfill_created") == 1 and kinds.count("backfill_finished") == 1


def test_a_backfill_before_the_first_run_becomes_the_new_head(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(start=3, end=4))
    schedule(cli)
    old = timeline(cli)
    assert [(r["logical_date"], r["run_type"], r["state"]) for r in old] == [
        (D(3), "scheduled", "success"), (D(4), "scheduled", "success")]
    cli.write_dag("d.py", dag_source(start=1, end=4))  # the DAG's history now starts earlier
    result = backfill(cli, 1, 2, "--yes")
    assert result.exit_code == 0, result.output
    runs = live_by_date(timeline(cli))
    assert list(runs) == [D(1), D(2), D(3), D(4)]
    assert runs[D(1)]["previous_run_id"] is None
    assert runs[D(2)]["previous_run_id"] == runs[D(1)]["run_id"]
    assert runs[D(3)]["run_id"] == old[0]["run_id"]  # the old head is the same run, relinked
    assert runs[D(3)]["previous_run_id"] == runs[D(2)]["run_id"]
    assert runs[D(3)]["state"] == "success" and runs[D(3)]["dag_version"] == old[0]["dag_version"]
    spliced = [e for e in cli.json("events", "--dag", "d") if e["kind"] == "run_spliced"]
    assert {e["run_id"] for e in spliced} == {old[0]["run_id"]}  # relinked as each earlier date came in
    assert spliced[-1]["details"]["previous_run_id"] == runs[D(2)]["run_id"]


def test_a_backfill_into_a_gap_links_both_neighbours_whatever_their_type(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("trigger", "d", "--logical-date", "2024-03-01")
    cli.ok("trigger", "d", "--logical-date", "2024-03-05")
    first, last = timeline(cli)
    assert last["previous_run_id"] == first["run_id"]
    result = backfill(cli, 2, 4, "--yes")
    assert result.exit_code == 0, result.output
    runs = live_by_date(timeline(cli))
    assert list(runs) == [D(1), D(2), D(3), D(4), D(5)]
    assert [runs[D(i)]["run_type"] for i in range(1, 6)] == ["manual", "backfill", "backfill", "backfill", "manual"]
    assert runs[D(2)]["previous_run_id"] == first["run_id"]
    assert runs[D(5)]["run_id"] == last["run_id"] and runs[D(5)]["previous_run_id"] == runs[D(4)]["run_id"]
    assert runs[D(1)]["state"] == runs[D(5)]["state"] == "queued"  # the backfill left the manual runs alone


# -- over completed runs: the reprocess policies -------------------------------------------------------

@pytest.fixture
def completed(ready_cli: Cli) -> tuple[Cli, dict[str, dict[str, Any]]]:
    """Four scheduled runs 03-01..03-04, 03-02's failed (task a); then the DAG is fixed (a new version)."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=4, command=fails_on(2)))
    schedule(cli)
    before = live_by_date(timeline(cli))
    assert [(d, r["state"]) for d, r in before.items()] == [
        (D(1), "success"), (D(2), "failed"), (D(3), "success"), (D(4), "success")]
    cli.write_dag("d.py", dag_source(end=4))
    return cli, before


def test_reprocess_none_skips_every_date_that_has_a_live_run(completed: tuple[Cli, dict[str, Any]]) -> None:
    cli, before = completed
    events_before = cli.ok("events", "--json")
    assert [(p["action"], p["reason"]) for p in plan(cli, 1, 4)] == [
        ("skip", "succeeded; reprocess=none"), ("skip", "failed; reprocess=none"),
        ("skip", "succeeded; reprocess=none"), ("skip", "succeeded; reprocess=none")]
    result = backfill(cli, 3, 4, "--yes")
    assert result.exit_code == 0, result.output
    assert "nothing to do" in result.stdout
    assert live_by_date(timeline(cli)) == before
    assert cli.json("backfill", "list") == []
    new_events = json.loads(cli.ok("events", "--json"))[len(json.loads(events_before)):]
    assert all(e["kind"] == "version_registered" for e in new_events), new_events  # only the fixed DAG


def test_reprocess_failed_overrides_only_the_failed_run_which_keeps_its_history(
        completed: tuple[Cli, dict[str, Any]]) -> None:
    cli, before = completed
    result = backfill(cli, 1, 4, "--reprocess", "failed", "--yes")
    assert result.exit_code == 0, result.output
    assert "0 new, 1 override, 3 skip" in result.stdout
    runs = timeline(cli)
    live = live_by_date(runs)
    old = before[D(2)]
    new = live[D(2)]
    assert new["run_type"] == "backfill" and new["state"] == "success" and new["run_id"] != old["run_id"]
    assert new["dag_version"] != old["dag_version"]  # the fixed DAG
    for day in (1, 3, 4):
        assert live[D(day)]["run_id"] == before[D(day)]["run_id"]
    assert live[D(3)]["previous_run_id"] == new["run_id"]
    assert new["previous_run_id"] == before[D(1)]["run_id"]
    shown = cli.json("runs", "show", old["run_id"])
    assert (shown["state"], shown["overridden_by"], shown["dag_version"]) == (
        "overridden", new["run_id"], old["dag_version"])
    assert shown["previous_run_id"] == before[D(1)]["run_id"]  # it keeps the previous it had
    assert {ti["task_id"]: ti["state"] for ti in shown["task_instances"]} == {"a": "failed", "b": "upstream_failed"}
    assert f"replaced run {old['run_id']}" in cli.ok("timeline", "d")


def test_reprocess_completed_overrides_every_finished_run(completed: tuple[Cli, dict[str, Any]]) -> None:
    cli, before = completed
    result = backfill(cli, 1, 4, "--reprocess", "completed", "--yes")
    assert result.exit_code == 0, result.output
    assert "0 new, 4 override, 0 skip" in result.stdout
    runs = timeline(cli)
    live = live_by_date(runs)
    assert {r["run_type"] for r in live.values()} == {"backfill"}
    assert {r["state"] for r in live.values()} == {"success"}
    shown_text = cli.ok("timeline", "d")
    for day, old in before.items():
        assert live[day]["run_id"] != old["run_id"]
        replaced = next(r for r in runs if r["run_id"] == old["run_id"])
        assert (replaced["state"], replaced["overridden_by"]) == ("overridden", live[day]["run_id"])
        assert replaced["dag_version"] == old["dag_version"] != live[day]["dag_version"]
        assert task_states(cli, old["run_id"])["a"] == ("failed" if day == D(2) else "success", 1)
        assert f"replaced run {old['run_id']}" in shown_text
    shown = cli.json("runs", "show", before[D(4)]["run_id"])
    assert (shown["state"], shown["overridden_by"], shown["dag_version"]) == (
        "overridden", live[D(4)]["run_id"], before[D(4)]["dag_version"])
    assert [(ti["task_id"], ti["state"], ti["try_number"]) for ti in shown["task_instances"]] == [
        ("a", "success", 1), ("b", "success", 1)]
    assert sum(r["state"] == "overridden" for r in runs) == 4


# -- a run in flight -----------------------------------------------------------------------------------

def test_a_run_locked_by_a_live_job_is_skipped_as_in_flight(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=3))
    schedule(cli)
    before = live_by_date(timeline(cli))
    held = before[D(2)]["run_id"]
    with db(cli) as conn:
        now = sqlite_now()
        job_id = conn.execute("INSERT INTO job (job_type, state, hostname, pid, started_at, latest_heartbeat) "
                              "VALUES ('SchedulerJob', 'running', 'elsewhere', 4242, ?, ?)", (now, now)).lastrowid
        conn.execute("UPDATE dag_run SET lock_holder = ? WHERE id = ?", (job_id, int(held)))
    planned = plan(cli, 1, 3, "--reprocess", "completed")
    assert [(p["action"], p["reason"]) for p in planned] == [
        ("override", "succeeded; reprocess=completed"), ("skip", f"in flight: locked by job {job_id}"),
        ("override", "succeeded; reprocess=completed")]
    result = backfill(cli, 1, 3, "--reprocess", "completed", "--yes")
    assert result.exit_code == 0, result.output
    assert f"in flight: locked by job {job_id}" in result.stdout
    live = live_by_date(timeline(cli))
    assert live[D(2)]["run_id"] == held and live[D(2)]["run_type"] == "scheduled"
    assert live[D(1)]["run_type"] == live[D(3)]["run_type"] == "backfill"
    assert live[D(3)]["previous_run_id"] == held


# -- the plan and the exit status ----------------------------------------------------------------------

def test_dry_run_json_prints_the_plan_and_changes_nothing(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    assert backfill(cli, 1, 2, "--yes").exit_code == 0
    old = live_by_date(timeline(cli))
    events_before = cli.ok("events", "--json")
    planned = plan(cli, 1, 3, "--reprocess", "completed")
    assert [{k: p[k] for k in ("logical_date", "action", "reason", "replaces_run_id")} for p in planned] == [
        {"logical_date": D(1), "action": "override", "reason": "succeeded; reprocess=completed",
         "replaces_run_id": old[D(1)]["run_id"]},
        {"logical_date": D(2), "action": "override", "reason": "succeeded; reprocess=completed",
         "replaces_run_id": old[D(2)]["run_id"]},
        {"logical_date": D(3), "action": "new", "reason": "no live run at this date", "replaces_run_id": None},
    ]
    assert plan(cli, 1, 3, "--backwards")[0]["logical_date"] == D(3)
    text = cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--dry-run")
    assert "1 new, 0 override, 2 skip" in text
    assert cli.ok("events", "--json") == events_before
    assert live_by_date(timeline(cli)) == old


def test_the_exit_status_is_non_zero_when_a_task_failed(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(command=fails_on(2)))
    result = backfill(cli, 1, 3, "--yes")
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    assert "failed" in result.stdout
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2, 3)] == ["success", "failed", "success"]
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["runs_done"], row["runs_failed"]) == ("failed", 3, 1)
    assert task_states(cli, live[D(2)]["run_id"]) == {"a": ("failed", 1), "b": ("upstream_failed", 0)}


def test_backfill_json_reports_the_outcome_and_the_conf_reaches_the_runs(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--yes",
                            "--conf", '{"k": 1}', "--json"))
    assert out["state"] == "success" and out["runs"] == {"total": 2, "done": 2, "failed": 0, "adopted": 0}
    assert out["tasks"] == {"success": 4}
    assert [p["action"] for p in out["plan"]] == ["new", "new"]
    assert [p["result"]["state"] for p in out["plan"]] == ["success", "success"]  # what each date came to
    for r in timeline(cli):
        assert cli.json("runs", "show", r["run_id"])["conf"] == {"k": 1}


# -- left to the scheduler -----------------------------------------------------------------------------

def test_submit_leaves_the_runs_queued_for_the_scheduler_which_runs_them(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=3))
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--submit",
                            "--yes", "--json"))
    assert out["state"] == "submitted"
    runs = timeline(cli)
    assert {(r["run_type"], r["state"], r["backfill_id"]) for r in runs} == {("backfill", "queued", out["backfill_id"])}
    with db(cli) as conn:
        assert conn.execute("SELECT count(*) FROM dag_run WHERE lock_holder IS NOT NULL").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM task_try").fetchone() == (0,)
    (row,) = cli.json("backfill", "list")
    assert (row["backfill_id"], row["state"], row["submit"], row["runs_done"]) == (out["backfill_id"], "running",
                                                                                   True, 0)
    schedule(cli)
    after = timeline(cli)
    assert [(r["run_id"], r["run_type"], r["state"]) for r in after] == [
        (r["run_id"], "backfill", "success") for r in runs]  # the scheduler created no run of its own
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["runs_done"], row["runs_failed"]) == ("success", 3, 0)


def test_the_scheduler_fast_forwards_past_a_backfill_and_does_not_fill_the_gap(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=2))
    schedule(cli)
    assert [r["logical_date"] for r in timeline(cli)] == [D(1), D(2)]
    cli.write_dag("d.py", dag_source(end=7))
    assert backfill(cli, 5, 5, "--yes").exit_code == 0
    schedule(cli)
    runs = timeline(cli)
    assert [(r["logical_date"], r["run_type"], r["state"]) for r in runs] == [
        (D(1), "scheduled", "success"), (D(2), "scheduled", "success"), (D(5), "backfill", "success"),
        (D(6), "scheduled", "success"), (D(7), "scheduled", "success")]
    assert runs[3]["previous_run_id"] == runs[2]["run_id"]


def test_backwards_with_max_active_runs_one_runs_the_newest_date_first_one_at_a_time(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(command="sleep 0.2"))
    result = backfill(cli, 1, 4, "--backwards", "--max-active-runs", "1", "--yes")
    assert result.exit_code == 0, result.output
    assert len(timeline(cli)) == 4
    with db(cli) as conn:
        spans = conn.execute("SELECT logical_date, started_at, ended_at FROM dag_run ORDER BY started_at").fetchall()
    assert [d[:10] for d, _, _ in spans] == ["2024-03-04", "2024-03-03", "2024-03-02", "2024-03-01"]
    for (_, _, ended), (_, started, _) in zip(spans, spans[1:], strict=False):
        assert started >= ended


# -- depends_on_past along the chain -------------------------------------------------------------------

def test_depends_on_past_in_a_backfill_runs_the_dates_in_chain_order(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(command="sleep 0.2", depends_on_past=True))
    result = backfill(cli, 1, 4, "--yes")
    assert result.exit_code == 0, result.output
    assert len(timeline(cli)) == 4
    with db(cli) as conn:
        spans = conn.execute("SELECT t.started_at, t.ended_at FROM task_try t "
                             "JOIN task_instance ti ON ti.id = t.task_instance_id "
                             "JOIN dag_run r ON r.id = ti.run_id WHERE ti.task_id = 'a' "
                             "ORDER BY r.logical_date").fetchall()
    assert len(spans) == 4
    for (_, ended), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= ended


def test_depends_on_past_across_a_backfill_follows_the_chain_whatever_the_run_type(ready_cli: Cli) -> None:
    cli = ready_cli
    flag = cli.home / "broken"
    flag.touch()
    cli.write_dag("d.py", dag_source(end=3, depends_on_past=True,
                                     command=f'{fails_on(2)} || [ ! -e "{flag}" ]'))
    cli.ok("dags", "pause", "d")  # only the runs we make
    cli.ok("trigger", "d", "--logical-date", "2024-03-02")
    schedule(cli)
    (manual,) = timeline(cli)
    assert (manual["run_type"], manual["state"]) == ("manual", "failed")

    # 03-03 follows the failed manual run of 03-02: its task a must not start
    result = backfill(cli, 1, 3, "--yes")
    assert result.exit_code != 0, result.output
    assert "failed; reprocess=none" in result.stdout
    live = live_by_date(timeline(cli))
    assert live[D(1)]["state"] == "success" and live[D(1)]["previous_run_id"] is None
    assert live[D(3)]["previous_run_id"] == manual["run_id"]
    assert live[D(3)]["state"] in ("queued", "running")
    assert task_states(cli, live[D(3)]["run_id"])["a"] == ("scheduled", 0)
    # it does not wait for ever: it says which run is blocked by what, and how to go on
    assert f"depends_on_past: its previous run {manual['run_id']} (manual) failed" in result.stderr, result.output
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "interrupted"

    # re-running the failed date relinks 03-03 to the new run, after which 03-03 can go
    flag.unlink()
    result = backfill(cli, 2, 2, "--reprocess", "failed", "--yes")
    assert result.exit_code == 0, result.output
    live = live_by_date(timeline(cli))
    assert live[D(2)]["run_type"] == "backfill" and live[D(2)]["state"] == "success"
    assert live[D(3)]["previous_run_id"] == live[D(2)]["run_id"]
    schedule(cli)  # picks up the unfinished run the first backfill left behind
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2, 3)] == ["success", "success", "success"]
    assert task_states(cli, live[D(3)]["run_id"]) == {"a": ("success", 1), "b": ("success", 1)}
    assert [r["state"] for r in reversed(cli.json("backfill", "list"))] == ["success", "success"]


# -- cancel ---------------------------------------------------------------------------------------------

def test_cancel_fails_the_unfinished_runs_of_a_submitted_backfill_and_skips_their_tasks(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=3))
    cli.ok("trigger", "d", "--logical-date", "2024-03-01")
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--submit",
                            "--yes", "--json"))
    backfill_id = out["backfill_id"]
    assert "2 run(s) will not run" in cli.ok("backfill", "cancel", backfill_id)
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["runs_failed"]) == ("cancelled", 2)
    assert cli.fails("backfill", "cancel", backfill_id).stderr.count("already cancelled") == 1
    assert "no backfill 99" in cli.fails("backfill", "cancel", "99").stderr
    schedule(cli)
    live = live_by_date(timeline(cli))
    assert [(live[D(i)]["run_type"], live[D(i)]["state"]) for i in (1, 2, 3)] == [
        ("manual", "success"), ("backfill", "failed"), ("backfill", "failed")]
    for day in (2, 3):  # nothing of them is left waiting for ever
        assert task_states(cli, live[D(day)]["run_id"]) == {"a": ("skipped", 0), "b": ("skipped", 0)}
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "cancelled"
    (changed,) = [e for e in cli.json("events", "--kind", "run_state_changed") if str(e["run_id"]) == str(
        live[D(2)]["run_id"])]
    assert changed["details"]["reason"] == "backfill 1 cancelled; skipped a, b (run cancelled)", changed


def test_a_cancelled_backfills_run_whose_tasks_had_all_succeeded_keeps_success(ready_cli: Cli) -> None:
    """Its tasks all succeeded before the job that held it finished it (it died): the cancel ends it as its own
    rules say, success, and fails only what the cancel cut short."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=3))
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--submit",
                            "--yes", "--json"))
    live = live_by_date(timeline(cli))
    with db(cli) as conn:
        conn.execute("UPDATE task_instance SET state = 'success', try_number = 1 WHERE run_id = ?",
                     (int(live[D(1)]["run_id"]),))
        conn.execute("UPDATE dag_run SET state = 'running' WHERE id = ?", (int(live[D(1)]["run_id"]),))
    cli.ok("backfill", "cancel", out["backfill_id"])
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2)] == ["success", "failed"]
    assert task_states(cli, live[D(2)]["run_id"]) == {"a": ("skipped", 0), "b": ("skipped", 0)}


def test_cancel_stops_an_executing_backfill_once_its_running_try_has_finished(ready_cli: Cli) -> None:
    cli = ready_cli
    release = cli.home / "release"  # 03-01's task a runs until the test has cancelled: the cancel lands while it runs
    cli.write_dag("d.py", dag_source(command=held_until(release)))
    proc = launcher.popen([LEDGER, "backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes",
                           "--max-active-runs", "1"], env={**cli.env, **FAST}, cwd=cli.home, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def started() -> bool:
            with db(cli) as conn:
                return bool(conn.execute("SELECT count(*) FROM dag_run WHERE state = 'running'").fetchone()[0] > 0)

        wait_until(started, what="the backfill to start its first run")
        with db(cli) as conn:
            assert conn.execute("SELECT count(*) FROM dag_run WHERE state = 'running'").fetchone() == (1,)
        said = cli.ok("backfill", "cancel", "1")  # 03-01 runs; 03-02 and 03-03 wait, held by the backfill's job
        assert "backfill 1 cancelled: 2 run(s) will not run; 1 running run(s) are being stopped by their job" in said
        release.touch()
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out
    assert "Traceback" not in out and "backfill 1 cancelled" in out
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2, 3)] == ["failed", "failed", "failed"]
    assert task_states(cli, live[D(1)]["run_id"]) == {"a": ("success", 1), "b": ("skipped", 0)}  # let finish
    for day in (2, 3):
        assert task_states(cli, live[D(day)]["run_id"]) == {"a": ("skipped", 0), "b": ("skipped", 0)}
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["runs_done"], row["runs_failed"]) == ("cancelled", 3, 3)
    with db(cli) as conn:
        (cancelled_at,) = conn.execute("SELECT ended_at FROM backfill").fetchone()
        late = conn.execute("SELECT * FROM task_try WHERE started_at > ?", (cancelled_at,)).fetchall()
    assert late == []  # nothing started once the cancellation was recorded


def test_cancel_stops_the_remaining_runs_of_a_submitted_backfill_that_a_scheduler_holds(ready_cli: Cli) -> None:
    cli = ready_cli
    release = cli.home / "release"  # the first run's task a runs until the cancel is recorded
    cli.write_dag("d.py", dag_source(end=3, command=held_until(release), max_active_runs=1))
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--submit",
                            "--yes", "--json"))
    proc = start_scheduler(cli)
    try:
        def holding() -> bool:
            with db(cli) as conn:
                sql = "SELECT count(*) FROM dag_run WHERE lock_holder IS NOT NULL AND state = 'queued'"
                return bool(conn.execute(sql).fetchone()[0] > 0)

        wait_until(holding, what="the scheduler to hold a queued run of the backfill")
        cli.ok("backfill", "cancel", out["backfill_id"])
        release.touch()

        def settled() -> bool:
            with db(cli) as conn:
                sql = "SELECT count(*) FROM dag_run WHERE state IN ('queued', 'running')"
                return bool(conn.execute(sql).fetchone()[0] == 0)

        wait_until(settled, what="every run of the backfill to end")
    finally:
        stop_scheduler(proc, cli)
    live = live_by_date(timeline(cli))
    assert live[D(3)]["state"] == "failed"  # it never started: cancelling must keep it from running
    assert task_states(cli, live[D(3)]["run_id"]) == {"a": ("skipped", 0), "b": ("skipped", 0)}
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "cancelled"


# -- refusals -------------------------------------------------------------------------------------------

def test_bad_backfill_requests_are_refused_in_one_line_and_change_nothing(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source(start=2, end=5))
    cli.write_dag("dop.py", dag_source("dop", depends_on_past=True))
    cli.ok("trigger", "d", "--logical-date", "2024-03-03")
    events_before = cli.ok("events", "--json")
    timeline_before = timeline(cli)
    soon = pendulum.now("UTC").add(days=2).to_date_string()
    cases: list[tuple[tuple[str, ...], str]] = [
        (("backfill", "nope", "--start", "2024-03-02", "--end", "2024-03-03"), "no DAG named 'nope'"),
        (("backfill", "d", "--start", "2024-03-04", "--end", "2024-03-02"), "backwards"),
        (("backfill", "dop", "--start", "2024-03-02", "--end", soon), "past the last interval"),
        (("backfill", "d", "--start", "2024-02-01", "--end", "2024-02-20"), "before DAG 'd' starts"),
        (("backfill", "d", "--start", "2024-03-06", "--end", "2024-03-08"), "after DAG 'd' ends"),
        (("backfill", "dop", "--start", "2024-03-01", "--end", "2024-03-02", "--backwards"), "--backwards"),
        (("backfill", "d", "--start", "2024-03-02", "--end", "2024-03-03", "--reprocess", "all"), "--reprocess"),
        (("backfill", "d", "--start", "2024-03-02", "--end", "2024-03-03", "--conf", "{nope"), "--conf"),
        (("backfill", "d", "--start", "yesterday", "--end", "2024-03-03"), "--start"),
    ]
    for i, (args, words) in enumerate(cases):
        result = cli.fails(*args, "--dry-run" if i % 2 else "--yes")
        assert words in result.stderr, (args, result.stderr)
    assert cli.ok("events", "--json") == events_before
    assert timeline(cli) == timeline_before
    assert cli.json("backfill", "list") == []


# -- side by side with a scheduler ---------------------------------------------------------------------

def assert_each_task_ran_once(rows: list[tuple[Any, ...]], tries: list[tuple[int, int]]) -> None:
    """rows: (task instance id, try_number, max_tries) of the live runs, all finished; tries: the task_try rows
    as (task instance id, try number). Each task instance has exactly tries 1..try_number, and no retries here."""
    assert len(tries) == len(set(tries)), "a try was started twice"
    per_ti: dict[int, list[int]] = {}
    for ti, n in tries:
        per_ti.setdefault(ti, []).append(n)
    for ti, try_number, _ in rows:
        assert sorted(per_ti.get(ti, [])) == list(range(1, try_number + 1)), (ti, try_number, per_ti.get(ti))
        assert try_number == 1, (ti, try_number)


SIDE_BY_SIDE_RUNS = """
    SELECT ti.id, ti.try_number, ti.max_tries FROM task_instance ti JOIN dag_run r ON r.id = ti.run_id
    WHERE r.state != 'overridden'
"""
ALL_TRIES = "SELECT task_instance_id, try_number FROM task_try"


def side_by_side(cli: Cli, query: Callable[[str], list[tuple[Any, ...]]]) -> None:
    cli.write_dag("d.py", dag_source(end=6, command="sleep 0.5"))
    cli.write_dag("e.py", dag_source("e", end=6, command="sleep 0.2"))
    proc = start_scheduler(cli, LEDGER_MAX_HELD_RUNS="2")  # so that the backfill finds runs in every state
    try:
        wait_until(lambda: any(r[0] == "success" for r in query("SELECT state FROM dag_run WHERE dag_id = 'd'")),
                   what="the scheduler to finish a run")
        over = cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-06", "--reprocess",
                       "completed", "--yes")
        assert over.exit_code == 0, over.output
        assert re.search(r"\b[1-9] override", over.stdout), over.stdout
        submitted = cli.run("backfill", "e", "--start", "2024-03-01", "--end", "2024-03-04", "--reprocess",
                            "completed", "--submit", "--yes")
        assert submitted.exit_code == 0, submitted.output
        wait_until(lambda: not query("SELECT id FROM dag_run WHERE state IN ('queued', 'running')"),
                   timeout=60, what="every run to finish")
    finally:
        out = stop_scheduler(proc, cli)
    assert "Traceback" not in out, out
    for dag_id in ("d", "e"):
        runs = timeline(cli, dag_id)
        live = live_by_date(runs)
        assert list(live) == [D(i) for i in range(1, 7)]
        assert {r["state"] for r in live.values()} == {"success"}
    assert {r["run_type"] for r in live_by_date(timeline(cli, "d")).values()} >= {"backfill"}
    rows = [tuple(r) for r in query(SIDE_BY_SIDE_RUNS)]
    tries = [(int(t), int(n)) for t, n in query(ALL_TRIES)]
    assert_each_task_ran_once(rows, tries)
    overridden = query("SELECT ti.try_number FROM task_instance ti JOIN dag_run r ON r.id = ti.run_id "
                       "WHERE r.state = 'overridden'")
    assert overridden and all(n <= 1 for (n,) in overridden)
    for row in cli.json("backfill", "list"):
        assert row["state"] == "success", row


@pytest.mark.slow
def test_a_backfill_and_a_scheduler_side_by_side_on_sqlite_run_each_task_once(ready_cli: Cli) -> None:
    cli = ready_cli

    def query(sql: str) -> list[tuple[Any, ...]]:
        with db(cli) as conn:
            return conn.execute(sql).fetchall()

    side_by_side(cli, query)


@pytest.mark.slow
@pytest.mark.postgres
def test_a_backfill_and_a_scheduler_side_by_side_on_postgres_run_each_task_once(cli: Cli,
                                                                                migrated_postgres_url: str) -> None:
    from sqlalchemy import create_engine, text

    cli.env["LEDGER_DATABASE_URL"] = migrated_postgres_url  # every command below runs on PostgreSQL
    engine = create_engine(migrated_postgres_url)

    def query(sql: str) -> list[tuple[Any, ...]]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]

    try:
        side_by_side(cli, query)
    finally:
        engine.dispose()


def test_a_depends_on_past_task_failing_part_way_stops_the_backfill_naming_the_failed_run(ready_cli: Cli) -> None:
    """a >> c, both depends_on_past; c fails on 03-02 only. On 03-03 a succeeds and c can never start: the
    backfill does not wait for ever, it stops with exit 1 and names the failed run that holds 03-03 back."""
    cli = ready_cli
    cli.write_dag("d.py", (
        "import pendulum\n"
        "from ledger import DAG, BashTask\n\n"
        "with DAG('d', schedule='@daily', start_date=pendulum.datetime(2024, 3, 1, tz='UTC'), catchup=False,\n"
        "         default_args={'depends_on_past': True}) as dag:\n"
        f"    BashTask('a', 'true') >> BashTask('c', {fails_on(2)!r})\n"))
    cli.ok("dags", "pause", "d")
    result = cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes", **FAST)
    assert result.exit_code == 1, result.output
    live = live_by_date(timeline(cli))
    assert [live[D(i)]["state"] for i in (1, 2)] == ["success", "failed"]
    assert task_states(cli, live[D(3)]["run_id"]) == {"a": ("success", 1), "c": ("scheduled", 0)}
    failed = live[D(2)]["run_id"]
    assert f"depends_on_past: its previous run {failed} (backfill) failed" in result.stderr, result.output
    assert cli.json("backfill", "list")[0]["state"] == "interrupted"
    # a scheduler that finds nothing left to do says which run it leaves waiting, and why
    said = schedule(cli)
    assert (f"left waiting: d {D(3)} run {live[D(3)]['run_id']} (running): depends_on_past: its previous run "
            f"{failed} (backfill) failed") in said, said


def _finished_before_the_cancel(cli: Cli, run_id: str, state: str) -> None:
    """The run ended `state` (its tasks too, one try each) before the backfill was cancelled."""
    with db(cli) as conn:
        conn.execute("UPDATE task_instance SET state = ?, try_number = 1, max_tries = 1 WHERE run_id = ?",
                     (state, int(run_id)))
        conn.execute("UPDATE dag_run SET state = ?, started_at = created_at, ended_at = created_at WHERE id = ?",
                     (state, int(run_id)))


@pytest.mark.parametrize("ended, act", [("failed", ("tasks", "clear", "d", "{run}")),
                                        ("success", ("runs", "mark-failed", "{run}"))])
def test_a_run_the_cancel_kept_and_an_operator_reruns_or_marks_later_is_the_operators_not_the_cancels(
        ready_cli: Cli, ended: str, act: tuple[str, ...]) -> None:
    """Run 4 of the backfill had finished when the backfill was cancelled (kept as it was). Cleared later, it runs
    (the cancel skipped its tasks at once and gave the date back to the run it had replaced); marked failed later,
    it stays the live run of its date (the cancel's restore took it)."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source(end=2))
    schedule(cli)  # runs 1 and 2 succeed
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--reprocess",
                            "completed", "--submit", "--yes", "--json"))
    kept = live_by_date(timeline(cli))[D(1)]["run_id"]
    _finished_before_the_cancel(cli, kept, ended)
    said = cli.ok("backfill", "cancel", out["backfill_id"])
    assert f"keeps run {kept} ({ended}): it had finished" in said
    (row,) = cli.json("backfill", "list")  # the run the cancel stopped before it started gave its date back: failed
    assert (row["succeeded"], row["failed"], row["overridden_later"]) == (int(ended == "success"),
                                                                          int(ended == "failed") + 1, 1)
    cli.ok(*[part.format(run=kept) for part in act])
    schedule(cli)
    live = live_by_date(timeline(cli))
    assert live[D(1)]["run_id"] == kept
    if act[0] == "tasks":
        assert live[D(1)]["state"] == "success"
        assert task_states(cli, kept) == {"a": ("success", 2), "b": ("success", 2)}
    else:
        assert live[D(1)]["state"] == "failed"
    overridden = [e for e in cli.json("events", "--kind", "run_overridden") if str(e["run_id"]) == str(kept)]
    assert overridden == []
