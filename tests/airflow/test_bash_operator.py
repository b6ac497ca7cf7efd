"""BashOperator's and `@task.bash`'s `skip_on_exit_code` and `env` / `append_env`, as in Airflow 2: the rules
(ledger/airflow_compat/bash.py), tries run by `ledger dags test`'s loop (which runs each try as the scheduler's
executor does), and a skip under the real scheduler."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator

import pendulum
import pytest

from ledger.airflow_compat.bash import inherits_environment, skip_exit_codes
from ledger.core.errors import DagDefinitionError
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file
from tests.conftest import Cli


def test_skip_on_exit_code_is_a_code_a_list_of_codes_or_none() -> None:
    assert skip_exit_codes("t", 42) == (42,)
    assert skip_exit_codes("t", [2, 3]) == skip_exit_codes("t", (2, 3)) == (2, 3)
    assert skip_exit_codes("t", None) == ()  # never skips
    for bad in ("42", [1, "2"], True, 4.0):
        with pytest.raises(DagDefinitionError, match=r"^task 't': skip_on_exit_code must be an exit code"):
            skip_exit_codes("t", bad)


def test_the_command_inherits_the_environment_without_env_or_with_append_env() -> None:
    assert inherits_environment(None, False) and inherits_environment({"A": "1"}, True)
    assert not inherits_environment({"A": "1"}, False) and not inherits_environment({}, False)


RULES = """
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.bash import BashOperator

SHOW = 'echo "home=[$HOME] a=[$A] dag=[$LEDGER_DAG_ID]"'

with DAG("bash_rules", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="default_99", bash_command="exit 99")
    BashOperator(task_id="own_code", bash_command="exit 42", skip_on_exit_code=42)
    BashOperator(task_id="in_list", bash_command="exit 3", skip_on_exit_code=[2, 3])
    BashOperator(task_id="not_in_list", bash_command="exit 99", skip_on_exit_code=[2, 3])
    BashOperator(task_id="never", bash_command="exit 99", skip_on_exit_code=None)
    BashOperator(task_id="env_alone", bash_command=SHOW, env={"A": "1"})
    BashOperator(task_id="env_appended", bash_command=SHOW, env={"A": "1"}, append_env=True)
    BashOperator(task_id="no_env", bash_command=SHOW)

    @task.bash(skip_on_exit_code=42)
    def tb_code():
        return "exit 42"

    @task.bash(env={"A": "1"})
    def tb_env_alone():
        return SHOW

    @task.bash(env={"A": "1"}, append_env=True)
    def tb_env_appended():
        return SHOW

    tb_code(), tb_env_alone(), tb_env_appended()
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """The DAG's test run: (each task's state, the value each passed on)."""
    folder = tmp_path_factory.mktemp("bash_rules")
    (folder / "bash_rules.py").write_text(RULES)
    loaded = load_file(str(folder / "bash_rules.py"), str(folder))
    assert loaded.error is None, loaded.error
    [dag] = loaded.dags
    lines: list[str] = []
    test = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, tz="UTC"), None, folder)
    local_testing.test_dag(test, lines.append)
    states = dict(re.findall(r"^--- (\w+) try 1: (\w+)", "\n".join(lines), re.MULTILINE))
    yield states, {key: values.get("return_value") for key, values in test.xcom.items()}
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def test_an_exit_code_among_skip_on_exit_code_skips_and_none_never_skips(
        ran: tuple[dict[str, str], dict[str, str]]) -> None:
    states, _values = ran
    assert {k: states[k] for k in ("default_99", "own_code", "in_list", "not_in_list", "never", "tb_code")} == {
        "default_99": "skipped", "own_code": "skipped", "in_list": "skipped", "not_in_list": "failed",
        "never": "failed", "tb_code": "skipped"}


def test_env_alone_replaces_the_inherited_environment_and_append_env_keeps_it(
        ran: tuple[dict[str, str], dict[str, str]]) -> None:
    _states, values = ran
    home = f"home=[{os.environ.get('HOME', '')}]"
    assert values["env_alone"] == values["tb_env_alone"] == "home=[] a=[1] dag=[bash_rules]"  # ledger's own: kept
    assert values["env_appended"] == values["tb_env_appended"] == f"{home} a=[1] dag=[bash_rules]"
    assert values["no_env"] == f"{home} a=[] dag=[bash_rules]"


def test_a_bash_operators_own_skip_code_skips_its_task_under_the_scheduler(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("skip_code.py", """
        import pendulum
        from airflow import DAG
        from airflow.operators.bash import BashOperator

        with DAG("skip_code", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
            BashOperator(task_id="skipcustom", bash_command="exit 42", skip_on_exit_code=42) >> \\
                BashOperator(task_id="after", bash_command="echo ran")
        """)
    cli.ok("trigger", "skip_code")
    cli.ok("scheduler", "--exit-when-idle")
    shown = cli.json("runs", "show", "1")
    assert {t["task_id"]: t["state"] for t in shown["task_instances"]} == {"skipcustom": "skipped",
                                                                          "after": "skipped"}
    assert shown["state"] == "success"
