"""A backfill finishes what it starts: it waits for runs it cannot start yet and says why, an interrupted one
says how to resume and `backfill resume` finishes it, its dates are local days, and `backfill list` keeps
its history. After each scenario the timeline invariant holds and no task instance ran twice."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from typing import Any

import pytest

from tests import launcher
from tests.backfill.test_backfill_cli import (
    FAST,
    dag_source,
    fails_on,
    held_until,
    live_by_date,
    query,
    timeline,
    wait_until,
)
from tests.conftest import LEDGER, Cli


def assert_each_task_instance_ran_once(cli: Cli) -> None:
    twice = query(cli, "SELECT task_instance_id, count(*) FROM task_try GROUP BY task_instance_id "
                       "HAVING count(*) > 1")
    assert twice == []


def assert_no_try_ran_twice(cli: Cli, *, cut_short: int | None = None) -> None:
    """For scenarios that kill a backfill while a try runs: each try (task instance, try number) ran once and
    none is left `running`; `cut_short` (when given) tries were lost, those the kill cut short, which their
    task instances then ran again as their next try, spending no retry; none failed."""
    tries = query(cli, "SELECT task_instance_id, try_number, state FROM task_try")
    assert len({(t[0], t[1]) for t in tries}) == len(tries), f"a try was started twice: {tries}"
    states = [t[2] for t in tries]
    assert "running" not in states, tries
    assert cut_short is None or (states.count("lost"), states.count("failed")) == (cut_short, 0), tries


def start_backfill(cli: Cli, start: int, end: int, *args: str, log: str = "bf.log",
                   errors: str | None = None) -> subprocess.Popen[str]:
    """`ledger backfill d` in the background, in a session of its own. Its output goes, unbuffered, to `log` in
    LEDGER_HOME (a test reads the progress lines while it runs), its stderr too unless `errors` names a file."""
    argv = [LEDGER, "backfill", "d", "--start", f"2024-03-0{start}", "--end", f"2024-03-0{end}", "--yes", *args]
    with open(cli.home / log, "w") as out, open(cli.home / (errors or os.devnull), "w") as err:
        return launcher.popen(argv, env={**cli.env, **FAST, "PYTHONUNBUFFERED": "1"}, cwd=cli.home, text=True,
                              stdout=out, stderr=err if errors else subprocess.STDOUT, start_new_session=True)


def held_until_released(cli: Cli) -> str:
    """A task command that runs until the test creates the file `release` in LEDGER_HOME: what a scenario
    must see while tries run does not depend on how fast the machine starts processes."""
    return held_until(cli.home / "release")


def release(cli: Cli) -> None:
    """Lets the tries held_until_released end, and the later ones run at once."""
    (cli.home / "release").touch()


def printed(cli: Cli, log: str) -> str:
    return (cli.home / log).read_text()


def running_tries(cli: Cli) -> int:
    return int(query(cli, "SELECT count(*) FROM task_try WHERE state = 'running'")[0][0])


def test_a_backfill_waits_for_max_active_runs_says_why_and_finishes(each_db_cli: Cli) -> None:
    cli = each_db_cli
    cli.write_dag("d.py", dag_source(command=held_until_released(cli), max_active_runs=1))
    cli.ok("dags", "pause", "d")
    first = start_backfill(cli, 4, 4)
    wait_until(lambda: running_tries(cli) > 0, what="the first backfill's try")
    second = start_backfill(cli, 5, 5, log="bf2.log")
    wait_until(lambda: "waiting: max_active_runs 1 reached by run 1 of backfill 1" in printed(cli, "bf2.log"),
               what="the second backfill saying why it waits")
    release(cli)
    assert first.wait(timeout=300) == 0, printed(cli, "bf.log")
    assert second.wait(timeout=300) == 0, printed(cli, "bf2.log")
    assert "backfill 2 success" in printed(cli, "bf2.log")
    runs = timeline(cli)
    assert [r["state"] for r in runs] == ["success", "success"]
    assert_each_task_instance_ran_once(cli)


def test_two_overlapping_backfills_at_once_leave_each_date_to_one_of_them_say_so_and_both_finish(
        each_db_cli: Cli) -> None:
    """Backfill 1 covers 03-01..03-05 and is running when backfill 2 asks for 03-04..03-07: the second
    leaves 03-04 and 03-05 to the first (in flight), says so per date and in its summary, creates the other
    two and waits for them; both finish, each date has one live run, no task instance ran twice."""
    cli = each_db_cli
    cli.write_dag("d.py", dag_source(command=held_until_released(cli), max_active_runs=2))
    cli.ok("dags", "pause", "d")
    first = start_backfill(cli, 1, 5)
    wait_until(lambda: running_tries(cli) > 0, what="the first backfill's try")
    second = start_backfill(cli, 4, 7, log="bf2.log")
    wait_until(lambda: "waiting: max_active_runs 2 reached" in printed(cli, "bf2.log"),
               what="the second backfill created and waiting")
    release(cli)
    assert first.wait(timeout=300) == 0, printed(cli, "bf.log")
    assert second.wait(timeout=300) == 0, printed(cli, "bf2.log")
    shown = printed(cli, "bf2.log")
    for day in ("2024-03-04", "2024-03-05"):
        (row,) = [line for line in shown.splitlines() if day in line and "skip" in line]
        assert "in flight: locked by job" in row, shown
    assert "backfill 2 created: 2 new, 0 override, 2 skip" in shown, shown
    assert "backfill 2 success" in shown, shown
    runs = timeline(cli)
    assert [(r["logical_date"][:10], r["state"], r["backfill_id"]) for r in runs] == [
        (f"2024-03-0{day}", "success", "1" if day <= 5 else "2") for day in range(1, 8)]
    assert_each_task_instance_ran_once(cli)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_an_interrupted_backfill_releases_its_locks_says_how_to_resume_and_resume_finishes_it(
        ready_cli: Cli, signum: int, status: int) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) or SIGTERM to the backfill's process alone (`kill PID`,
    as a service manager stops it): the try it runs gets the grace period and finishes, the job releases its
    locks and ends, the backfill is `interrupted` (not `running`), the exit status is 128 + the signal and one
    line on stderr says how to resume; `backfill resume` then finishes it without running anything twice."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source(command=held_until_released(cli), max_active_runs=1))
    cli.ok("dags", "pause", "d")
    proc = start_backfill(cli, 1, 3, errors="bf.err")
    wait_until(lambda: running_tries(cli) > 0, what="a running try")
    (os.killpg if signum == signal.SIGINT else os.kill)(proc.pid, signum)
    release(cli)  # the try that runs ends within the grace period the signal began
    assert proc.wait(timeout=120) == status, printed(cli, "bf.log") + printed(cli, "bf.err")
    (line,) = printed(cli, "bf.err").splitlines()
    assert line.startswith("backfill 1 interrupted with ") and "`ledger backfill resume 1` finishes them" in line
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "interrupted" and row["unfinished"] > 0, row
    assert query(cli, "SELECT id FROM dag_run WHERE lock_holder IS NOT NULL") == []
    assert query(cli, "SELECT state FROM job WHERE job_type = 'BackfillJob' AND ended_at IS NOT NULL") == [
        ("success",)]
    tries = [state for (state,) in query(cli, "SELECT state FROM task_try")]
    assert tries and set(tries) == {"success"}, tries  # the running try was let finish, not killed
    kinds = [e["kind"] for e in cli.json("events", "--dag", "d")]
    assert "locks_released" in kinds and kinds.count("backfill_interrupted") == 1, kinds
    resumed = cli.run("backfill", "resume", "1", timeout=180, **FAST)
    assert resumed.exit_code == 0, resumed.output
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "success" and row["succeeded"] == 3 and row["unfinished"] == 0, row
    assert [r["state"] for r in timeline(cli)] == ["success"] * 3
    assert_each_task_instance_ran_once(cli)


LONG_LEASE = {"LEDGER_LOCK_TIMEOUT": "3600"}
"""A lock timeout far longer than a test: what takes over the runs of a killed backfill within the test can only
be the same-host check that its process is gone, not the lease running out."""


def no_retries_dag(cli: Cli) -> str:
    """Task `a` held until the test releases it (held_until_released), then `b`; no retries, one run at a time."""
    return f"""
import pendulum
from ledger import DAG, BashTask

with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), max_active_runs=1,
         default_args={{"retries": 0}}) as dag:
    BashTask("a", {held_until_released(cli)!r}) >> BashTask("b", "true")
"""


def test_resume_takes_over_the_runs_of_a_backfill_killed_with_sigkill(each_db_cli: Cli) -> None:
    cli = each_db_cli
    cli.write_dag("d.py", no_retries_dag(cli))
    cli.ok("dags", "pause", "d")
    proc = start_backfill(cli, 1, 4)
    wait_until(lambda: running_tries(cli) > 0, what="a running try")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    release(cli)  # the next tries run at once (and the killed try's command, in a group of its own, ends)
    assert [r["state"] for r in cli.json("backfill", "list")] == ["running"]  # nothing was left to mark it
    # (with LONG_LEASE, a resume that waited for the dead job's lease would run into its timeout)
    resumed = cli.run("backfill", "resume", "1", timeout=180, **FAST, **LONG_LEASE)
    assert resumed.exit_code == 0, resumed.output
    assert [r["state"] for r in timeline(cli)] == ["success"] * 4
    assert_no_try_ran_twice(cli, cut_short=1)  # the try the kill cut short was lost and ran again, no retry spent
    assert_the_lost_try_then_its_success_show(cli)
    (row,) = cli.json("backfill", "list")
    assert row["state"] == "success" and row["unfinished"] == 0


def test_running_the_same_command_again_adopts_the_runs_of_a_killed_backfill(each_db_cli: Cli) -> None:
    cli = each_db_cli
    cli.write_dag("d.py", no_retries_dag(cli))
    cli.ok("dags", "pause", "d")
    proc = start_backfill(cli, 1, 4)
    wait_until(lambda: running_tries(cli) > 0, what="a running try")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    release(cli)  # the next tries run at once (and the killed try's command, in a group of its own, ends)
    again = cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-04", "--yes", timeout=180,
                    **FAST, **LONG_LEASE)
    assert again.exit_code == 0, again.output
    assert "adopted: run" in again.stdout and "of backfill 1, whose process is gone" in again.stdout, again.stdout
    # the summary counts the adopted dates apart from the skipped ones: it finishes them
    adopted = again.stdout.count("adopted: run")
    created = re.search(rf"created: (\d+) new, (\d+) override, {adopted} adopted, \d+ skip", again.stdout)
    assert adopted and created, again.stdout
    # its progress counts every run it finishes, its own and the adopted ones
    total = int(created[1]) + int(created[2]) + adopted
    assert f"backfill 2: runs {total}/{total} done · tasks {2 * total} succeeded / 0 failed" in again.stdout, \
        again.stdout
    assert [r["state"] for r in timeline(cli)] == ["success"] * 4
    rows = {r["backfill_id"]: r for r in cli.json("backfill", "list")}
    assert rows["1"]["state"] == "success" and rows["1"]["unfinished"] == 0, rows
    assert any(e["kind"] == "backfill_adopted" for e in cli.json("events", "--dag", "d"))
    assert_no_try_ran_twice(cli, cut_short=1)
    assert_the_lost_try_then_its_success_show(cli)


def assert_the_lost_try_then_its_success_show(cli: Cli) -> None:
    """`runs show` of the run whose try the kill cut short: try 1 lost, try 2 success, in a task with no
    retries; `tasks logs` of the lost try ends saying why it got a new try."""
    ((run_id, task_id),) = query(cli, "SELECT ti.run_id, ti.task_id FROM task_try t JOIN task_instance ti "
                                      "ON ti.id = t.task_instance_id WHERE t.state = 'lost'")
    shown = cli.json("runs", "show", str(run_id))
    (ti,) = [t for t in shown["task_instances"] if t["task_id"] == task_id]
    assert [(t["try_number"], t["state"]) for t in ti["tries"]] == [(1, "lost"), (2, "success")], ti
    log = cli.ok("tasks", "logs", "d", str(run_id), task_id, "--try", "1")
    assert "try 1/2: lost" in log and "it gets a new try (a lost try spends no retry)" in log, log


def test_a_backfill_over_the_queued_runs_of_a_submitted_one_finishes_them_without_calling_it_dead(
        ready_cli: Cli) -> None:
    """A `--submit` backfill never had a process of its own: a self-executing backfill over its dates adopts the
    runs no scheduler has taken yet, and says so truthfully (not "whose process is gone"); both end success."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("dags", "pause", "d")
    cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--submit", "--yes")
    again = cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes", timeout=180, **FAST)
    assert again.exit_code == 0, again.output
    for run in (1, 2):
        assert f"adopted: run {run} of submitted backfill 1, which no live job holds, is finished by this " \
               "backfill" in again.stdout, again.stdout
    assert "process is gone" not in again.stdout, again.stdout
    assert "backfill 2 created: 1 new, 0 override, 2 adopted, 0 skip" in again.stdout, again.stdout
    assert "backfill 2: runs 3/3 done · tasks 6 succeeded / 0 failed" in again.stdout, again.stdout
    assert [r["state"] for r in timeline(cli)] == ["success"] * 3
    assert {r["backfill_id"]: r["state"] for r in cli.json("backfill", "list")} == {"1": "success", "2": "success"}
    assert_each_task_instance_ran_once(cli)


def test_the_json_result_of_a_backfill_that_adopts_runs_counts_them_and_gives_each_adopted_date_its_result(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("dags", "pause", "d")
    cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--submit", "--yes")
    out = json.loads(cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes", "--json",
                            **FAST))
    assert out["state"] == "success" and out["runs"] == {"total": 3, "done": 3, "failed": 0, "adopted": 2}, out
    assert out["tasks"] == {"success": 6}, out
    assert [(p["adopts_backfill"], p["result"]) for p in out["plan"]] == [
        ("1", {"run_id": "1", "state": "success"}), ("1", {"run_id": "2", "state": "success"}),
        (None, {"run_id": "3", "state": "success"})], out["plan"]
    timeline(cli)
    assert_each_task_instance_ran_once(cli)


def test_a_backfill_interrupted_with_adopted_runs_left_says_which_backfill_resumes_them(ready_cli: Cli) -> None:
    """Adopted runs stay their backfill's (`backfill_id`): interrupted, the adopting backfill counts them with its
    own and says that `backfill resume` of their backfill finishes them; resuming both finishes everything."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source(command=held_until_released(cli), max_active_runs=1))
    cli.ok("dags", "pause", "d")
    cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--submit", "--yes")
    proc = start_backfill(cli, 1, 3, errors="bf.err")  # adopts runs 1 and 2, creates run 3
    wait_until(lambda: running_tries(cli) > 0, what="a running try")
    os.killpg(proc.pid, signal.SIGINT)
    release(cli)
    assert proc.wait(timeout=120) == 130, printed(cli, "bf.log") + printed(cli, "bf.err")
    assert "backfill 2 created: 1 new, 0 override, 2 adopted, 0 skip" in printed(cli, "bf.log")
    left = dict(query(cli, "SELECT backfill_id, count(*) FROM dag_run WHERE state IN ('queued', 'running') "
                           "GROUP BY backfill_id"))
    assert left.get(1), left  # run 1 was cut short, run 2 not started
    (line,) = printed(cli, "bf.err").splitlines()
    assert line.startswith(f"backfill 2 interrupted with {sum(left.values())} run(s) unfinished: "), line
    for backfill_id, n in left.items():
        assert f"{n} of backfill {backfill_id}: `ledger backfill resume {backfill_id}` finishes them" in line, line
    for backfill_id in (1, 2):  # in chain order: max_active_runs 1
        resumed = cli.run("backfill", "resume", str(backfill_id), timeout=180, **FAST)
        assert resumed.exit_code == 0, resumed.output
    assert [r["state"] for r in timeline(cli)] == ["success"] * 3
    assert {r["backfill_id"]: r["state"] for r in cli.json("backfill", "list")} == {"1": "success", "2": "success"}
    assert_each_task_instance_ran_once(cli)


def test_resume_executes_the_queued_runs_of_a_submitted_backfill_to_the_end(each_db_cli: Cli) -> None:
    """`ledger backfill resume ID` on a `--submit` backfill whose runs no scheduler has taken: it runs them here,
    each task instance once, and the backfill ends `success`."""
    cli = each_db_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("dags", "pause", "d")
    cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--submit", "--yes")
    assert [(r["state"], r["backfill_id"]) for r in timeline(cli)] == [("queued", "1")] * 3
    resumed = cli.run("backfill", "resume", "1", timeout=180, **FAST)
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.startswith("resuming backfill 1\n"), resumed.stdout
    assert "backfill 1: runs 3/3 done · tasks 6 succeeded / 0 failed" in resumed.stdout, resumed.stdout
    assert resumed.stdout.rstrip().endswith("backfill 1 success"), resumed.stdout
    assert [(r["state"], r["backfill_id"]) for r in timeline(cli)] == [("success", "1")] * 3
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["succeeded"], row["failed"], row["unfinished"]) == ("success", 3, 0, 0), row
    assert query(cli, "SELECT id FROM dag_run WHERE lock_holder IS NOT NULL") == []
    kinds = [e["kind"] for e in cli.json("events", "--dag", "d")]
    assert kinds.count("backfill_resumed") == 1 and kinds.count("backfill_finished") == 1, kinds
    assert_each_task_instance_ran_once(cli)


def test_an_operator_ending_the_last_unfinished_run_of_a_backfill_by_hand_ends_the_backfill(
        ready_cli: Cli) -> None:
    """`runs cancel` / `runs mark-success` on a backfill's last unfinished run set the backfill's state, as a job
    finishing that run does; before, the backfill stayed `running` for ever, since no job had a run left to
    finish it."""
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("dags", "pause", "d")
    cli.ok("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-02", "--submit", "--yes")
    cli.ok("runs", "mark-success", "1")
    assert [r["state"] for r in cli.json("backfill", "list")] == ["running"]  # run 2 has not finished
    cli.ok("runs", "cancel", "2")
    (row,) = cli.json("backfill", "list")
    assert (row["state"], row["succeeded"], row["failed"], row["unfinished"]) == ("failed", 1, 1, 0), row
    cli.ok("backfill", "d", "--start", "2024-03-03", "--end", "2024-03-03", "--submit", "--yes")
    cli.ok("runs", "mark-success", "3")
    assert {r["backfill_id"]: r["state"] for r in cli.json("backfill", "list")} == {"1": "failed", "2": "success"}
    kinds = [e["kind"] for e in cli.json("events", "--dag", "d")]
    assert kinds.count("backfill_finished") == 2, kinds
    timeline(cli)


@pytest.mark.parametrize(("tz", "cron", "start", "end", "expected"), [
    ("America/New_York", "0 6 * * *", "2026-11-10", "2026-11-12",
     ["2026-11-10T06:00:00-05:00", "2026-11-11T06:00:00-05:00", "2026-11-12T06:00:00-05:00"]),
    ("Europe/Berlin", "@daily", "2024-10-27", "2024-10-27", ["2024-10-27T00:00:00+02:00"]),
])
def test_bare_dates_are_whole_local_days(ready_cli: Cli, tz: str, cron: str, start: str, end: str,
                                         expected: list[str]) -> None:
    cli = ready_cli
    cli.write_dag("z.py", f"""
import pendulum
from ledger import DAG, BashTask

with DAG("z", schedule="{cron}", start_date=pendulum.datetime(2024, 1, 1, tz="{tz}"), catchup=False) as dag:
    BashTask("a", "true")
""")
    rows = cli.json("backfill", "z", "--start", start, "--end", end, "--dry-run")
    import pendulum

    got = [pendulum.parse(r["logical_date"]).in_timezone(tz).isoformat() for r in rows]
    assert got == expected


def test_backfill_list_and_show_keep_the_history_of_an_overridden_backfill(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("d.py", dag_source())
    cli.ok("dags", "pause", "d")
    assert cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes", **FAST).exit_code == 0
    assert cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes", "--reprocess",
                   "completed", **FAST).exit_code == 0
    rows: list[dict[str, Any]] = {r["backfill_id"]: r for r in cli.json("backfill", "list")}  # type: ignore[assignment]
    first = rows["1"]  # type: ignore[index]
    assert (first["planned"], first["created"], first["overridden_later"], first["succeeded"], first["failed"]) == \
        (3, 3, 3, 3, 0), first
    shown = cli.json("backfill", "show", "1")
    assert [r["state"] for r in shown["runs"]] == ["overridden"] * 3
    assert all(r["overridden_by"] is not None for r in shown["runs"])
    assert "no backfill 9" in cli.fails("backfill", "show", "9").stderr
    assert "nothing to resume" in cli.fails("backfill", "resume", "1").stderr
    timeline(cli)
    assert_each_task_instance_ran_once(cli)


@pytest.mark.postgres
def test_on_postgresql_an_interrupted_backfill_is_resumed_and_a_second_one_waits_its_turn(
        cli: Cli, migrated_postgres_url: str) -> None:
    cli.env["LEDGER_DATABASE_URL"] = migrated_postgres_url
    cli.write_dag("d.py", no_retries_dag(cli))
    cli.ok("dags", "pause", "d")
    proc = start_backfill(cli, 1, 3)
    wait_until(lambda: running_tries(cli) > 0, what="a running try")
    os.killpg(proc.pid, signal.SIGINT)
    release(cli)
    assert proc.wait(timeout=120) == 130, (cli.home / "bf.log").read_text()
    second = start_backfill(cli, 4, 4, log="bf2.log")  # waits: max_active_runs 1, and the first resumes
    resumed = cli.run("backfill", "resume", "1", timeout=180, **FAST)
    assert resumed.exit_code == 0, resumed.output
    assert second.wait(timeout=180) == 0, (cli.home / "bf2.log").read_text()
    states = {r["backfill_id"]: r["state"] for r in cli.json("backfill", "list")}
    assert states == {"1": "success", "2": "success"}
    assert_no_try_ran_twice(cli)
    timeline(cli)


def test_overriding_finished_runs_after_a_failed_previous_run_with_depends_on_past_is_refused(
        ready_cli: Cli) -> None:
    """Issue 12: `--reprocess completed` after a failed previous date replaced two successful runs with runs
    that could never start. Now the backfill is refused before it changes anything, with the way out."""
    cli = ready_cli
    flag = cli.home / "broken"
    flag.touch()
    command = f'{fails_on(1)} || [ ! -e "{flag}" ]'
    cli.write_dag("d.py", dag_source(end=3, command=command))
    cli.ok("dags", "pause", "d")
    assert cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--yes",
                   **FAST).exit_code == 1  # 03-01 failed, 03-02 and 03-03 succeeded
    cli.write_dag("d.py", dag_source(end=3, command=command, depends_on_past=True))
    before = timeline(cli)
    refused = cli.run("backfill", "d", "--start", "2024-03-02", "--end", "2024-03-03", "--reprocess", "completed",
                      "--yes", **FAST)
    assert refused.exit_code == 1 and "Traceback" not in refused.output, refused.output
    assert refused.stderr.startswith("Error: the backfill would replace 2 finished run(s) with runs that could "
                                     "never start: task(s) a depend on the past"), refused.stderr
    assert "start the range at 2024-03-01T00:00:00+00:00 with --reprocess failed" in refused.stderr
    assert timeline(cli) == before and len(cli.json("backfill", "list")) == 1  # nothing changed
    flag.unlink()  # the way out it names: re-run from the failed date
    fixed = cli.run("backfill", "d", "--start", "2024-03-01", "--end", "2024-03-03", "--reprocess", "completed",
                    "--yes", timeout=180, **FAST)
    assert fixed.exit_code == 0, fixed.output
    assert [r["state"] for r in live_by_date(timeline(cli)).values()] == ["success"] * 3
    assert_each_task_instance_ran_once(cli)
