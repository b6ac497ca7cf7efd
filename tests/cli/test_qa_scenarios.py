"""Scenarios found by trying the newest features as an Airflow user would: each output says exactly what
happened, to the DAG it names."""

from __future__ import annotations

from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli

TWO_DAGS = """
import pendulum
from ledger import DAG, BashTask

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    BashTask("a", "echo a")
"""


def test_events_of_a_dag_leave_out_the_task_signals_of_a_dag_whose_id_it_prefixes(ready_cli: Cli) -> None:
    """Task state signals are keyed ledger.task.<dag>.<task>: DAG `ops.v2`'s start with DAG `ops`'s prefix."""
    cli = ready_cli
    cli.write_dag("ops.py", TWO_DAGS.format(dag_id="ops"))
    cli.write_dag("ops_v2.py", TWO_DAGS.format(dag_id="ops.v2"))
    cli.ok("trigger", "ops.v2")
    cli.ok("scheduler", "--exit-when-idle")
    assert {e["dag_id"] for e in cli.json("events", "--dag", "ops.v2")} == {"ops.v2"}
    assert {e["dag_id"] for e in cli.json("events", "--dag", "ops")} == {"ops"}
    assert cli.json("events", "--dag", "ops", "--kind", "task_state_signal") == []


PARAMS_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("p", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC"), params={"days": 7}) as dag:
    BashTask("a", "echo days={{ params.days }}")
"""


def test_the_test_loop_checks_conf_against_params_as_trigger_does(cli: Cli) -> None:
    """`tasks test` and `dags test` take --conf as `trigger` and `dags test --record` do: a wrong type is one
    line and nothing runs (before, the task ran with days='seven')."""
    cli.write_dag("p.py", PARAMS_DAG)
    for command in (("tasks", "test", "p", "a"), ("dags", "test", "p")):
        refused = cli.fails(*command, "--conf", '{"days": "seven"}')
        assert refused.stderr == "Error: --conf days=\"seven\" is not of type integer (param 'days' of DAG 'p')\n"
        assert refused.stdout == ""
        assert "days=3" in cli.ok(*command, "--conf", '{"days": 3}')


DAILY_PARAMS_DAG = PARAMS_DAG.replace(
    'schedule=None', 'schedule="@daily", end_date=pendulum.datetime(2024, 3, 3, tz="UTC")')


def test_a_backfill_checks_conf_against_params_as_trigger_does(ready_cli: Cli) -> None:
    """A backfill's runs get their conf checked as a triggered run's is (Airflow checks params at every run's
    creation): a wrong type is one line and no run, backfill or event is made, dry run or not."""
    cli = ready_cli
    cli.write_dag("p.py", DAILY_PARAMS_DAG)
    cli.ok("dags", "list")
    before = dump(cli)
    for extra in ((), ("--dry-run",), ("--submit", "--yes")):
        refused = cli.fails("backfill", "p", "--start", "2024-03-01", "--end", "2024-03-02", *extra,
                            "--conf", '{"days": "seven"}')
        assert refused.stderr == "Error: --conf days=\"seven\" is not of type integer (param 'days' of DAG 'p')\n"
    assert dump(cli) == before
    assert "2 new" in cli.ok("backfill", "p", "--start", "2024-03-01", "--end", "2024-03-02", "--dry-run",
                             "--conf", '{"days": 3}')


def test_the_test_loop_prints_the_version_the_scheduler_registers(ready_cli: Cli) -> None:
    """`dags test` imports every DAG file in one process: a file imported before the DAG's own was taken for a
    helper module of it, so the test printed a version (`not registered`) that no parse of the file makes."""
    cli = ready_cli
    cli.write_dag("a_first.py", TWO_DAGS.format(dag_id="first"))
    cli.write_dag("b_second.py", TWO_DAGS.format(dag_id="second"))
    (registered,) = [d["version"] for d in cli.json("dags", "list") if d["dag_id"] == "second"]
    assert f"version {registered[:12]} (not registered)" in cli.ok("dags", "test", "second").splitlines()[0]
    assert f"[ledger] version {registered}: code " in cli.ok("tasks", "test", "second", "a")


def test_events_and_callbacks_of_an_unknown_run_are_refused_like_an_unknown_dag(ready_cli: Cli) -> None:
    """`--dag nodag` was one line and exit 1, `--run 999` an empty listing and exit 0: as if the run existed."""
    cli = ready_cli
    for command in ("events", "callbacks"):
        assert "no DAG named 'nodag'" in cli.fails(command, "--dag", "nodag").stderr
        assert "no DAG run '999'" in cli.fails(command, "--run", "999").stderr
        assert cli.json(command) == []


def test_dags_list_says_which_paused_dags_also_hold_their_queued_runs(ready_cli: Cli) -> None:
    """`dags pause --stop-queued` keeps queued runs from starting; `dags list` showed it as a plain pause, so a
    queued run that never started had no visible reason outside `ledger events`."""
    cli = ready_cli
    cli.write_dag("ops.py", TWO_DAGS.format(dag_id="ops"))
    cli.write_dag("other.py", TWO_DAGS.format(dag_id="other"))
    cli.ok("dags", "pause", "ops", "--stop-queued")
    cli.ok("dags", "pause", "other")
    rows = {d["dag_id"]: (d["is_paused"], d["stop_queued"]) for d in cli.json("dags", "list")}
    assert rows == {"ops": (True, True), "other": (True, False)}
    table = {line.split()[1]: line for line in cli.ok("dags", "list").splitlines() if "ops.py" in line
             or "other.py" in line}
    assert "yes, queued runs held" in table["ops"] and "yes, queued runs held" not in table["other"]
    cli.ok("dags", "unpause", "ops")
    assert [d["stop_queued"] for d in cli.json("dags", "list") if d["dag_id"] == "ops"] == [False]


def test_a_recorded_test_of_a_dag_holding_its_queued_runs_is_refused(ready_cli: Cli) -> None:
    """`dags test --record` of a DAG paused with --stop-queued spliced a queued run that its own job then
    left alone: it printed `test run 1 of ops: queued` and left a run for a later scheduler to run."""
    cli = ready_cli
    cli.write_dag("ops.py", TWO_DAGS.format(dag_id="ops"))
    cli.ok("dags", "pause", "ops", "--stop-queued")
    before = dump(cli)
    refused = cli.fails("dags", "test", "ops", "--record")
    assert "paused with --stop-queued" in refused.stderr and dump(cli) == before
    cli.ok("dags", "pause", "ops")  # a plain pause stops new scheduled runs only: the test runs
    assert "test run 1 of ops: success" in cli.ok("dags", "test", "ops", "--record")


TEMPLATE_ERROR_DAG = """
import pendulum
from ledger import DAG, BashTask

with DAG("tpl", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    BashTask("bad", "echo {{ nope }}")
    BashTask("plain", "echo plain")
"""


def test_rendered_says_a_template_failed_rather_than_that_there_was_none(ready_cli: Cli) -> None:
    """A try whose template failed showed `(no templated fields)`, as a task without templates does."""
    cli = ready_cli
    cli.write_dag("tpl.py", TEMPLATE_ERROR_DAG)
    cli.ok("trigger", "tpl")
    cli.ok("scheduler", "--exit-when-idle")
    assert cli.ok("tasks", "rendered", "tpl", "1", "bad") == (
        "try 1:\n  (not rendered: template error in bash_command: 'nope' is undefined)\n")
    assert cli.json("tasks", "rendered", "tpl", "1", "bad") == [
        {"try_number": 1, "rendered": None, "error": "template error in bash_command: 'nope' is undefined"}]
    assert cli.ok("tasks", "rendered", "tpl", "1", "plain") == "try 1:\n  (no templated fields)\n"
    assert cli.json("tasks", "rendered", "tpl", "1", "plain") == [{"try_number": 1, "rendered": None, "error": None}]
