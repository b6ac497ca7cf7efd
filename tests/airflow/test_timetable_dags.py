"""Airflow DAG files scheduled by timetables (tests/airflow_corpus/af2_*timetable*.py, af3_timetables.py), loaded
unchanged: `ledger dags next-runs` lists exactly the runs the scheduler then creates, and the tasks see their
intervals."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"
FAST = {"LEDGER_POLL_INTERVAL": "0.2"}


def _copy(cli: Cli, *names: str) -> None:
    cli.dags.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(CORPUS / name, cli.dags / name)
    plugins = str(CORPUS / "plugins")  # the custom timetable's module, as Airflow's plugins folder
    cli.env["PYTHONPATH"] = os.pathsep.join([cli.env.get("PYTHONPATH", ""), plugins]).strip(os.pathsep)


def _intervals(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return [(r["logical_date"], r["data_interval_start"], r["data_interval_end"]) for r in rows]


def test_timetable_dags_run_what_next_runs_lists(ready_cli: Cli) -> None:
    cli = ready_cli
    _copy(cli, "af2_timetable_cron_trigger.py", "af3_timetables.py", "af2_custom_timetable.py")
    dags = {d["dag_id"]: d for d in cli.json("dags", "list")}
    assert sorted(dags) == ["af2_custom_timetable", "af2_timetable_cron_trigger", "af3_timetable_events",
                            "af3_timetable_multiple"]  # every DAG of the three files loaded
    assert dags["af2_timetable_cron_trigger"]["schedule"] == "trigger 0 2 * * * over 2:00:00"
    assert dags["af3_timetable_events"]["schedule"] == "three matches"
    assert dags["af2_custom_timetable"]["schedule"] == "workdays but Fridays"
    listed = {d: _intervals(cli.json("dags", "next-runs", d, "-n", "10")) for d in dags}

    # 02:00 Berlin, [00:00, 02:00]; on 2024-03-31 02:00 does not exist: 03:00 CEST (01:00 UTC)
    assert listed["af2_timetable_cron_trigger"] == [
        ("2024-03-28T23:00:00+00:00", "2024-03-28T23:00:00+00:00", "2024-03-29T01:00:00+00:00"),
        ("2024-03-29T23:00:00+00:00", "2024-03-29T23:00:00+00:00", "2024-03-30T01:00:00+00:00"),
        ("2024-03-30T23:00:00+00:00", "2024-03-30T23:00:00+00:00", "2024-03-31T01:00:00+00:00"),
        ("2024-03-31T22:00:00+00:00", "2024-03-31T22:00:00+00:00", "2024-04-01T00:00:00+00:00"),
    ]
    assert [d for d, _, _ in listed["af3_timetable_events"]] == [
        "2024-02-01T18:00:00+00:00", "2024-03-01T18:00:00+00:00", "2024-04-01T18:00:00+00:00"]
    assert [e for _, _, e in listed["af3_timetable_multiple"]] == [
        "2024-01-05T06:00:00+00:00", "2024-01-06T12:00:00+00:00", "2024-01-08T06:00:00+00:00"]
    # Wednesday 3rd, Thursday 4th, (no Friday, weekend) Monday 8th, Tuesday 9th
    assert [d[:10] for d, _, _ in listed["af2_custom_timetable"]] == ["2024-01-03", "2024-01-04", "2024-01-08",
                                                                     "2024-01-09"]

    cli.ok("scheduler", "--exit-when-idle", **FAST)
    for dag_id, expected in listed.items():
        runs = sorted(cli.json("timeline", dag_id, "--all"), key=lambda r: r["logical_date"])
        assert _intervals(runs) == expected, dag_id
        assert {r["state"] for r in runs} == {"success"}, dag_id
        assert {r["run_type"] for r in runs} == {"scheduled"}

    first = sorted(cli.json("timeline", "af2_timetable_cron_trigger", "--all"), key=lambda r: r["logical_date"])[2]
    xcom = cli.json("tasks", "xcom", "af2_timetable_cron_trigger", first["run_id"], "report")
    assert json.dumps(xcom).count("2024-03-30T23:00:00+00:00") >= 1 and "2024-03-31T01:00:00+00:00" in json.dumps(xcom)


def test_a_custom_timetable_defined_in_the_dag_file_is_refused_with_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("inline_timetable.py", """
        import pendulum
        from airflow import DAG
        from airflow.timetables.base import DagRunInfo, Timetable

        class Daily(Timetable):
            def next_dagrun_info(self, *, last_automated_data_interval, restriction):
                return None

        with DAG("inline_timetable", schedule=Daily(), start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
            pass
    """)
    [error] = cli.json("dags", "errors")
    assert "\n" not in error["error"]
    assert "the timetable class Daily is defined in the DAG file" in error["error"]
    assert "PYTHONPATH" in error["error"]


def test_a_timetable_from_the_dags_folder_is_pinned_with_the_version(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True, exist_ok=True)
    for name in ("af2_custom_timetable.py", "plugins/workday_timetable.py"):  # the module in the DAGs folder
        shutil.copy(CORPUS / name, cli.dags / Path(name).name)
    listed = _intervals(cli.json("dags", "next-runs", "af2_custom_timetable", "-n", "10"))
    version = cli.json("dags", "show", "af2_custom_timetable")
    assert version["structure"]["schedule"]["module_file"] == "workday_timetable.py"
    (cli.dags / "workday_timetable.py").unlink()  # the DAG file no longer imports: its last version stays
    cli.ok("scheduler", "--exit-when-idle", **FAST)
    [error] = cli.json("dags", "errors")
    assert "workday_timetable" in error["error"]
    runs = sorted(cli.json("timeline", "af2_custom_timetable", "--all"), key=lambda r: r["logical_date"])
    assert _intervals(runs) == listed and [d[:10] for d, _, _ in listed] == [
        "2024-01-03", "2024-01-04", "2024-01-08", "2024-01-09"]  # planned with the version's copy of the module
    assert {r["state"] for r in runs} == {"success"}
