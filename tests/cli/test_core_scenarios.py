"""Scenarios through the real `ledger` command on a temporary LEDGER_HOME."""

from __future__ import annotations

import json

from tests.conftest import DAILY_DAG, Cli


def test_db_upgrade_creates_the_database_and_check_confirms_head(cli: Cli) -> None:
    assert cli.run("db", "check").exit_code != 0
    assert "upgraded" in cli.ok("db", "upgrade")
    assert (cli.home / "ledger.db").exists()
    assert "head" in cli.ok("db", "check")
    assert "already" in cli.ok("db", "upgrade")


def test_commands_on_a_missing_database_say_so_in_one_line(cli: Cli) -> None:
    cli.write_dag("daily.py", DAILY_DAG)
    for args in (("dags", "list"), ("timeline", "daily"), ("trigger", "daily"), ("events",)):
        result = cli.fails(*args)
        assert "ledger db upgrade" in result.stderr
    assert not (cli.home / "ledger.db").exists()


def test_an_outdated_database_is_refused_until_upgraded(ready_cli: Cli) -> None:
    ready_cli.ok("db", "downgrade", "base")
    result = ready_cli.fails("events")
    assert "ledger db upgrade" in result.stderr
    ready_cli.ok("db", "upgrade")
    ready_cli.ok("events")


def test_trigger_splices_a_manual_run_and_the_timeline_shows_it(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-05")
    cli.ok("trigger", "daily", "--logical-date", "2024-03-01", "--conf", '{"k": 1}')
    cli.ok("trigger", "daily", "--logical-date", "2024-03-03")
    runs = cli.json("timeline", "daily")
    assert [r["logical_date"] for r in runs] == [
        "2024-03-01T00:00:00+00:00", "2024-03-03T00:00:00+00:00", "2024-03-05T00:00:00+00:00"]
    assert [r["previous_run_id"] for r in runs] == [None, runs[0]["run_id"], runs[1]["run_id"]]
    assert {r["run_type"] for r in runs} == {"manual"}
    assert runs[0]["data_interval_end"] == "2024-03-02T00:00:00+00:00"
    assert set(runs[0]) >= {"run_id", "logical_date", "data_interval_start", "data_interval_end", "run_type",
                            "state", "previous_run_id", "dag_version", "overridden_by", "backfill_id"}


def test_trigger_refuses_a_held_date_and_replace_overrides_it(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")
    before = cli.ok("events", "--json")
    result = cli.fails("trigger", "daily", "--logical-date", "2024-03-02")
    assert "--replace" in result.stderr
    assert cli.ok("events", "--json") == before
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02", "--replace")
    runs = cli.json("timeline", "daily")
    old, new = runs
    assert old["state"] == "overridden" and old["overridden_by"] == new["run_id"]
    shown = cli.ok("timeline", "daily")
    assert f"replaced run {old['run_id']}" in shown
    kinds = [e["kind"] for e in cli.json("events", "--dag", "daily")]
    assert kinds.count("run_overridden") == 1


def test_a_new_version_is_stored_only_when_the_dag_changes(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("dags", "list")
    cli.ok("dags", "list")
    assert len(cli.json("dags", "versions", "daily")) == 1
    cli.write_dag("daily.py", DAILY_DAG.replace('"echo b"', '"echo bee"'))
    versions = cli.json("dags", "versions", "daily")
    assert len(versions) == 2 and versions[1]["current"]
    first = versions[0]["version"]
    shown = cli.json("dags", "show", "daily", "--version", first[:10])
    assert shown["version"] == first
    assert [t["definition"]["bash_command"] for t in shown["structure"]["tasks"]] == ["echo a", "echo b"]


def test_runs_show_gives_the_graph_of_the_runs_own_version(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-01")
    cli.write_dag("daily.py", DAILY_DAG + '    c = BashTask("c", "echo c")\n    b >> c\n')
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")
    old, new = cli.json("timeline", "daily")
    assert old["dag_version"] != new["dag_version"]
    shown_old = cli.json("runs", "show", old["run_id"])
    assert [t["task_id"] for t in shown_old["graph"]["tasks"]] == ["a", "b"]
    assert [ti["task_id"] for ti in shown_old["task_instances"]] == ["a", "b"]
    shown_new = cli.json("runs", "show", new["run_id"])
    assert [t["task_id"] for t in shown_new["graph"]["tasks"]] == ["a", "b", "c"]
    assert "◆ version" in cli.ok("timeline", "daily")


def test_broken_dag_files_are_recorded_and_do_not_stop_the_others(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.write_dag("syntax.py", "def broken(:\n")
    cli.write_dag("raises.py", "raise RuntimeError('boom')\n")
    cli.write_dag("cycle.py", """
        import pendulum
        from ledger import DAG, BashTask
        with DAG("cyclic", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
            a = BashTask("a", "true")
            b = BashTask("b", "true")
            a >> b >> a
    """)
    cli.write_dag("naive.py", """
        from datetime import datetime
        from ledger import DAG
        DAG("naive", schedule="@daily", start_date=datetime(2024, 1, 1))
    """)
    cli.write_dag("badcron.py", """
        import pendulum
        from ledger import DAG
        DAG("badcron", schedule="61 * * * *", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
    """)
    assert [d["dag_id"] for d in cli.json("dags", "list")] == ["daily"]
    errors = {e["file"].rsplit("/", 1)[-1]: e["error"] for e in cli.json("dags", "errors")}
    assert set(errors) == {"syntax.py", "raises.py", "cycle.py", "naive.py", "badcron.py"}
    assert "SyntaxError" in errors["syntax.py"]
    assert "RuntimeError: boom" in errors["raises.py"]
    assert "cyclic" in errors["cycle.py"] and "cycle" in errors["cycle.py"]
    assert "naive" in errors["naive.py"]
    assert "61 * * * *" in errors["badcron.py"]
    refused = cli.fails("trigger", "badcron").stderr  # its DAG is in a file that failed: says where to look
    assert "no DAG named 'badcron'" in refused and "5 DAG files failed to import: see `ledger dags errors`" in refused
    (cli.dags / "syntax.py").unlink()
    assert "syntax.py" not in json.dumps(cli.json("dags", "errors"))


def test_next_runs_continue_from_the_latest_scheduled_or_backfill_run(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    upcoming = cli.json("dags", "next-runs", "daily", "-n", "2")
    assert upcoming == [
        {"logical_date": "2024-03-01T00:00:00+00:00", "data_interval_start": "2024-03-01T00:00:00+00:00",
         "data_interval_end": "2024-03-02T00:00:00+00:00"},
        {"logical_date": "2024-03-02T00:00:00+00:00", "data_interval_start": "2024-03-02T00:00:00+00:00",
         "data_interval_end": "2024-03-03T00:00:00+00:00"},
    ]
    cli.ok("trigger", "daily", "--logical-date", "2024-03-20")  # manual runs do not move the schedule
    assert cli.json("dags", "next-runs", "daily", "-n", "1")[0]["logical_date"] == "2024-03-01T00:00:00+00:00"


def test_bad_input_is_one_line_a_non_zero_exit_and_changes_nothing(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("daily.py", DAILY_DAG)
    cli.ok("trigger", "daily", "--logical-date", "2024-03-02")
    before = cli.ok("events", "--json")
    cases = [
        ("trigger", "nope"),
        ("trigger", "daily", "--logical-date", "yesterday"),
        ("trigger", "daily", "--logical-date", "2024-02-30"),
        ("trigger", "daily", "--conf", "{not json"),
        ("trigger", "daily", "--conf", "[1, 2]"),
        ("timeline", "nope"),
        ("timeline", "daily", "--start", "2024-03-05", "--end", "2024-03-01"),
        ("timeline", "daily", "--start", "March"),
        ("dags", "show", "nope"),
        ("dags", "show", "daily", "--version", "ffff"),
        ("dags", "versions", "nope"),
        ("dags", "next-runs", "nope"),
        ("runs", "show", "999"),
        ("runs", "show", "abc"),
        ("dags", "pause", "nope"),
    ]
    for args in cases:
        result = cli.fails(*args)
        assert result.stderr.startswith("Error: "), (args, result.stderr)
    assert cli.ok("events", "--json") == before
