"""Airflow's `pre_execute=` / `post_execute=` operator arguments and a subclass's own pre_execute / post_execute
methods: called around the task's work with Airflow's context (and, after it, the value it passed on), in the
try's process; one that raises fails the try, as in Airflow."""

from __future__ import annotations

from pathlib import Path

import pendulum

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import load_file

HOOKS = """\
import pendulum
from airflow.sdk import DAG, Asset, BaseOperator, task
from airflow.providers.standard.operators.bash import BashOperator

OUT = Asset("s3://bucket/hooked")

def before(context):
    print("pre", context["task"].task_id, context["ds"])


def after(context, result):
    print("post", context["task"].task_id, repr(result))
    context["outlet_events"][OUT].extra = {"by": "post_execute"}


def broken(context):
    raise ValueError("the hook's own failure")


class Own(BaseOperator):
    def pre_execute(self, context):
        print("own pre", self.task_id)

    def execute(self, context):
        return "own"

    def post_execute(self, context, result=None):
        print("own post", repr(result))


with DAG("hooks", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    @task(pre_execute=before, post_execute=after, outlets=[OUT])
    def work():
        return 7

    own = Own(task_id="own", pre_execute=before)
    bash = BashOperator(task_id="bash", bash_command="echo out", post_execute=after, outlets=[OUT])
    fails = BashOperator(task_id="fails", bash_command="echo never", pre_execute=broken)
    work() >> own >> bash >> fails
"""


def test_hooks_run_around_the_work_with_its_context_and_result_and_a_raising_one_fails_the_try(
        tmp_path: Path) -> None:
    (tmp_path / "hooks.py").write_text(HOOKS)
    found = load_file(str(tmp_path / "hooks.py"), str(tmp_path))
    assert found.error is None, found.error
    [dag] = found.dags
    lines: list[str] = []
    run = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, tz="UTC"), None, tmp_path)  # type: ignore[arg-type]
    assert local_testing.test_dag(run, lines.append) is RunState.FAILED
    log = "\n".join(lines)
    assert "--- fails try 1: failed (ValueError: the hook's own failure)" in log
    assert "echo never" not in log.split("--- fails try 1")[1]  # its work never ran
    for said in ("pre work 2024-03-05", "post work 7", "pre own 2024-03-05", "own pre own", "own post 'own'",
                 "post bash 'out'"):
        assert f"\n{said}\n" in log
    assert log.index("pre work") < log.index("post work")
    assert "made a dataset event of s3://bucket/hooked" in log
    assert [line for line in lines if "--- " in line and "success" in line][:3] == [
        "--- work try 1: success", "--- own try 1: success", "--- bash try 1: success"]
    assert run.xcom["own"]["return_value"] == "own"
