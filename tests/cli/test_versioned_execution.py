"""Every try runs the code of the version its run records, whatever the DAGs folder holds when it runs.

Scenario tests through the real CLI. After each, `assert_tries_ran_their_versions` checks the invariant on
every try: the code folder its log names, loaded again, hashes to the version the try records.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.describe import version_of
from tests.conftest import Cli
from tests.web.conftest import app_client

PIN_DAG = """
import pendulum
from ledger import DAG, BashTask, PythonTask
from common.words import WORD


def show():
    from common import words  # imported when the task runs, not when the file is parsed
    print("word", WORD, words.WORD)


with DAG("pin", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("b", "echo CODE-A; echo version=$LEDGER_DAG_VERSION") >> PythonTask("p", show)
"""


def query(cli: Cli, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(cli.home / "ledger.db") as db:
        return db.execute(sql).fetchall()


def write_helpers(cli: Cli, word: str) -> None:
    (cli.dags / "common").mkdir(parents=True, exist_ok=True)
    (cli.dags / "common" / "__init__.py").write_text("")
    (cli.dags / "common" / "words.py").write_text(f"WORD = {word!r}\n")


def log_of(cli: Cli, dag: str, run: int, task: str, attempt: int | None = None) -> str:
    return cli.ok("tasks", "logs", dag, str(run), task, *(["--try", str(attempt)] if attempt else []))


def assert_tries_ran_their_versions(cli: Cli) -> int:
    """For every try: the code folder its log names hashes to the version the try records. Returns how
    many tries were checked."""
    rows = query(cli, "SELECT ti.dag_id, ti.run_id, ti.task_id, t.try_number, t.dag_version FROM task_try t "
                      "JOIN task_instance ti ON ti.id = t.task_instance_id")
    for dag_id, run_id, task_id, number, recorded in rows:
        log = (cli.home / "logs" / str(dag_id) / f"run_{run_id}" / str(task_id) / f"try_{number}.log").read_text()
        found = re.search(r"\[ledger\] version (\w+): code (\S+)", log)
        assert found, log
        assert found.group(1) == recorded
        root = Path(found.group(2))
        entry = query(cli, f"SELECT code_entry FROM dag_version WHERE version_hash = '{recorded}'")[0][0]
        loaded = load_file(str(root / str(entry)), str(root))
        assert loaded.error is None, loaded.error
        (dag,) = [d for d in loaded.dags if d.dag_id == dag_id]
        assert version_of(dag)[0] == recorded
    return len(rows)


@pytest.fixture
def pinned(ready_cli: Cli) -> Cli:
    write_helpers(ready_cli, "alpha")
    ready_cli.write_dag("pin.py", PIN_DAG)
    return ready_cli


def test_a_run_created_before_a_change_runs_the_code_of_its_own_version(pinned: Cli) -> None:
    cli = pinned
    cli.ok("trigger", "pin", "--logical-date", "2024-03-01")
    version_a = cli.json("runs", "show", "1")["dag_version"]
    cli.write_dag("pin.py", PIN_DAG.replace("CODE-A", "CODE-B"))
    write_helpers(cli, "beta")
    cli.ok("scheduler", "--exit-when-idle")
    b_log = log_of(cli, "pin", 1, "b")
    assert "CODE-A" in b_log and "CODE-B" not in b_log
    assert f"version={version_a}" in b_log  # LEDGER_DAG_VERSION
    assert "word alpha alpha" in log_of(cli, "pin", 1, "p")  # the helper as it was, at parse and at run time
    shown = cli.json("runs", "show", "1")
    assert shown["state"] == "success" and shown["dag_version"] == version_a
    assert {t["dag_version"] for ti in shown["task_instances"] for t in ti["tries"]} == {version_a}
    assert f"version {version_a}" in log_of(cli, "pin", 1, "b").splitlines()[0]
    assert assert_tries_ran_their_versions(cli) == 2


def test_a_helper_module_change_makes_a_new_version_of_the_dags_that_import_it(pinned: Cli) -> None:
    cli = pinned
    cli.write_dag("other.py", PIN_DAG.replace('"pin"', '"other"').replace("from common.words import WORD\n", "")
                  .replace("WORD, words.WORD", "1").replace("    from common import words  # imported when the "
                                                            "task runs, not when the file is parsed\n", ""))
    assert len(cli.json("dags", "versions", "pin")) == 1
    write_helpers(cli, "beta")
    versions = cli.json("dags", "versions", "pin")
    assert len(versions) == 2
    assert versions[1]["code"]["files"] == ["common/__init__.py", "common/words.py", "pin.py"]
    assert len(cli.json("dags", "versions", "other")) == 1  # does not import the helpers
    (cli.dags / "common" / "words.py").write_text("# a comment only\nWORD = 'beta'\n")
    assert len(cli.json("dags", "versions", "pin")) == 2
    assert cli.ok("dags", "show", "pin", "--version", versions[0]["version"][:10], "--source",
                  "--file", "common/words.py") == "WORD = 'alpha'\n"


def test_clear_reruns_the_runs_own_version_by_default_and_moves_it_with_on_latest_version(pinned: Cli) -> None:
    cli = pinned
    cli.ok("trigger", "pin", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    version_a = cli.json("runs", "show", "1")["dag_version"]
    # a deploy renames task p to q and changes b
    cli.write_dag("pin.py", PIN_DAG.replace("CODE-A", "CODE-B").replace('PythonTask("p"', 'PythonTask("q"'))
    cli.ok("tasks", "clear", "pin", "1", "-t", "p")  # p exists in the run's own version
    cli.ok("tasks", "clear", "pin", "1", "-t", "b")
    cli.ok("scheduler", "--exit-when-idle")
    assert "CODE-A" in log_of(cli, "pin", 1, "b", 2)
    assert cli.json("runs", "show", "1")["dag_version"] == version_a

    refused = cli.fails("tasks", "clear", "pin", "1", "-t", "p", "--on-latest-version")
    assert "task 'p' is not in the current version" in refused.stderr
    refused = cli.fails("tasks", "clear", "pin", "1", "-t", "q", "--on-latest-version")
    assert "task 'q' is not in version" in refused.stderr and "clear the whole run" in refused.stderr
    assert cli.json("runs", "show", "1")["dag_version"] == version_a  # refused: nothing moved

    # a partial clear on the latest version: b's tries run it, the run stays on its own version
    version_b = cli.json("dags", "versions", "pin")[-1]["version"]
    out = cli.ok("tasks", "clear", "pin", "1", "-t", "b", "--on-latest-version")
    assert f"they run version {version_b[:12]} (the run stays on version {version_a[:12]})" in out
    cli.ok("scheduler", "--exit-when-idle")
    shown = cli.json("runs", "show", "1")
    assert shown["dag_version"] == version_a and shown["state"] == "success"
    assert "CODE-B" in log_of(cli, "pin", 1, "b", 3)
    tries_b = [t["dag_version"] for ti in shown["task_instances"] if ti["task_id"] == "b" for t in ti["tries"]]
    assert tries_b == [version_a, version_a, version_b]
    assert cli.json("events", "--dag", "pin", "--kind", "run_version_changed") == []
    for web in app_client(cli):  # the timeline and the run page mark a run whose tries span versions
        assert "its tries ran 2 versions" in web.get("/dags/pin").text
        assert "its tries ran 2 versions" in web.get("/runs/1").text

    # clearing the whole run on the latest version moves the run, recorded as an event
    out = cli.ok("tasks", "clear", "pin", "1", "--on-latest-version")
    assert f"moved from version {version_a[:12]} to {version_b[:12]}" in out
    cli.ok("scheduler", "--exit-when-idle")
    shown = cli.json("runs", "show", "1")
    assert shown["dag_version"] == version_b and shown["state"] == "success"
    states = {ti["task_id"]: ti["state"] for ti in shown["task_instances"]}
    assert states == {"b": "success", "p": "removed", "q": "success"}
    tries_b = [t["dag_version"] for ti in shown["task_instances"] if ti["task_id"] == "b" for t in ti["tries"]]
    assert tries_b == [version_a, version_a, version_b, version_b]
    (moved,) = cli.json("events", "--dag", "pin", "--kind", "run_version_changed")
    assert moved["run_id"] == "1"
    assert moved["details"]["from"] == version_a and moved["details"]["to"] == version_b
    assert moved["actor"].startswith("cli:")
    used = {v["version"]: (v["runs"], v["tries"]) for v in cli.json("dags", "versions", "pin")}
    assert used[version_a] == (0, 4) and used[version_b] == (1, 3)
    assert_tries_ran_their_versions(cli)


def test_on_latest_version_is_refused_while_the_dag_file_fails_to_import(pinned: Cli) -> None:
    """The DAG's current version is then the last one that imported, not what the file holds: moving the run
    there would run code the user did not ask for."""
    cli = pinned
    cli.ok("trigger", "pin", "--logical-date", "2024-03-01")
    version_a = cli.json("runs", "show", "1")["dag_version"]
    cli.write_dag("pin.py", PIN_DAG.replace("CODE-A", "CODE-B"))
    cli.ok("dags", "list")  # registers version B
    cli.write_dag("pin.py", PIN_DAG.replace("CODE-A", "CODE-C") + "\nraise RuntimeError('half-deployed')\n")
    refused = cli.fails("tasks", "clear", "pin", "1", "--on-latest-version")
    assert "fails to import" in refused.stderr and "half-deployed" in refused.stderr
    assert cli.json("runs", "show", "1")["dag_version"] == version_a  # not moved to B


RETRY_DAG = """
import pathlib
from datetime import timedelta
import pendulum
from ledger import DAG, PythonTask

MARK = "CODE-A"


def deploy_then_fail(context):
    print("ran", MARK)
    if context.try_number == 1:  # a deploy lands while the task is between its tries
        live = pathlib.Path(context.conf["live"])
        live.write_text(live.read_text().replace('MARK = "CODE-A"', 'MARK = "CODE-B"'))
        raise RuntimeError("first try fails")


with DAG("retrying", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("t", deploy_then_fail, retries=1, retry_delay=timedelta(seconds=0))
"""


def test_a_retry_after_a_deploy_runs_the_code_of_the_first_try(ready_cli: Cli) -> None:
    cli = ready_cli
    path = cli.write_dag("retrying.py", RETRY_DAG)
    cli.ok("trigger", "retrying", "--logical-date", "2024-03-01", "--conf", json.dumps({"live": str(path)}))
    cli.ok("scheduler", "--exit-when-idle")
    assert 'MARK = "CODE-B"' in path.read_text()  # the deploy happened
    assert "ran CODE-A" in log_of(cli, "retrying", 1, "t", 2)
    shown = cli.json("runs", "show", "1")
    assert shown["state"] == "success"
    assert len(cli.json("dags", "versions", "retrying")) == 2  # the scheduler saw the new version...
    assert {t["dag_version"] for t in shown["task_instances"][0]["tries"]} == {shown["dag_version"]}  # ...unused
    assert_tries_ran_their_versions(cli)


BACKFILL_DAG = """
import pathlib
import pendulum
from ledger import DAG, PythonTask

MARK = "CODE-A"


def work(context):
    print("ran", MARK)
    live = pathlib.Path(context.conf.get("live") or "/nonexistent")
    if live.exists():  # the first run deploys new code in the middle of the backfill
        live.write_text(live.read_text().replace('MARK = "CODE-A"', 'MARK = "CODE-B"'))


with DAG("bf", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), max_active_runs=1,
         catchup=False) as dag:
    PythonTask("t", work)
"""


def test_a_backfill_job_runs_its_runs_on_the_version_they_were_created_with_across_a_deploy(
        ready_cli: Cli) -> None:
    cli = ready_cli
    path = cli.write_dag("bf.py", BACKFILL_DAG)
    cli.ok("dags", "pause", "bf")
    cli.ok("backfill", "bf", "--start", "2024-03-01", "--end", "2024-03-03", "--yes",
           "--conf", json.dumps({"live": str(path)}))
    assert 'MARK = "CODE-B"' in path.read_text()
    runs = cli.json("timeline", "bf")
    assert len(runs) == 3 and {r["state"] for r in runs} == {"success"}
    assert len({r["dag_version"] for r in runs}) == 1
    for r in runs:
        assert "ran CODE-A" in log_of(cli, "bf", r["run_id"], "t")
    assert_tries_ran_their_versions(cli)


def test_versions_registered_before_code_was_captured_run_from_their_stored_file(pinned: Cli) -> None:
    """A version row from before this change has only its DAG file's text: it still runs, from that text."""
    cli = pinned
    cli.write_dag("legacy.py", """
        import pendulum
        from ledger import DAG, BashTask

        with DAG("legacy", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
            BashTask("b", "echo OLD-TEXT")
    """)
    cli.ok("trigger", "legacy", "--logical-date", "2024-03-01")
    with sqlite3.connect(cli.home / "ledger.db") as db:  # what migration 0006 leaves of an older version
        text = (cli.dags / "legacy.py").read_text()
        db.execute("UPDATE dag_version SET source_code = ?, code_entry = NULL, code_entry_sha256 = NULL, "
                   "code_bundle = NULL, code_snapshot = NULL WHERE dag_id = 'legacy'", (text,))
    (cli.dags / "legacy.py").write_text(text.replace("OLD-TEXT", "NEW-TEXT"))
    cli.ok("scheduler", "--exit-when-idle")
    assert "OLD-TEXT" in log_of(cli, "legacy", 1, "b")
    shown = cli.ok("runs", "show", "1")
    assert "helper modules" in shown
    assert cli.json("runs", "show", "1")["code"]["captured"] is False


def test_a_missing_dags_folder_is_an_error_and_deactivates_nothing(pinned: Cli) -> None:
    cli = pinned
    cli.ok("dags", "list")
    before = query(cli, "SELECT dag_id, is_active FROM dag ORDER BY dag_id")
    for args in (("scheduler", "--exit-when-idle"), ("dags", "list")):
        refused = cli.fails(*args, "--dags-folder", str(cli.home / "nowhere"))
        assert "does not exist" in refused.stderr
    assert query(cli, "SELECT dag_id, is_active FROM dag ORDER BY dag_id") == before == [("pin", 1)]


def test_a_dag_file_removed_from_the_folder_deactivates_its_dag_and_its_runs_still_run(pinned: Cli) -> None:
    cli = pinned
    cli.ok("trigger", "pin", "--logical-date", "2024-03-01")
    (cli.dags / "pin.py").unlink()
    cli.ok("scheduler", "--exit-when-idle")
    assert query(cli, "SELECT is_active FROM dag WHERE dag_id = 'pin'") == [(0,)]
    assert cli.json("runs", "show", "1")["state"] == "success"
    assert "CODE-A" in log_of(cli, "pin", 1, "b")


@pytest.mark.postgres
def test_a_second_host_with_only_the_database_runs_the_pinned_code(cli: Cli, tmp_path: Path,
                                                                      migrated_postgres_url: str) -> None:
    """Host 1 parses the DAGs folder and triggers; host 2 (its own LEDGER_HOME, an empty DAGs folder, the same
    PostgreSQL database) runs the run from the code stored in the database."""
    host1 = cli
    host1.env["LEDGER_DATABASE_URL"] = migrated_postgres_url
    write_helpers(host1, "alpha")
    host1.write_dag("pin.py", PIN_DAG)
    host1.ok("trigger", "pin", "--logical-date", "2024-03-01")
    version = host1.json("runs", "show", "1")["dag_version"]

    home2 = tmp_path / "host2"
    (home2 / "dags").mkdir(parents=True)
    host2 = Cli(home=home2, env={**host1.env, "LEDGER_HOME": str(home2)})
    host2.ok("scheduler", "--exit-when-idle")
    shown = host2.json("runs", "show", "1")
    assert shown["state"] == "success"
    assert {t["dag_version"] for ti in shown["task_instances"] for t in ti["tries"]} == {version}
    assert "CODE-A" in log_of(host2, "pin", 1, "b")
    assert "word alpha alpha" in log_of(host2, "pin", 1, "p")
    assert (home2 / "code" / "snapshots").is_dir() and not (host1.home / "code").exists()
    assert [d["dag_id"] for d in host1.json("dags", "list")] == ["pin"]  # host 2 deactivated nothing
