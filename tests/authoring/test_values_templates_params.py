"""What Airflow users write works: values passed between tasks (XCom), Jinja templates with Airflow's names,
DAG params checked against --conf. Rules tested in process; the whole path through the real CLI and
scheduler once."""

from __future__ import annotations

import json

import pendulum
import pytest

from ledger import DAG, BashTask, PythonTask, task
from ledger.core.errors import DagDefinitionError
from ledger.sdk.describe import structure_of
from ledger.sdk.params import Param, as_params, check_conf, resolve
from ledger.sdk.templates import TemplateError, render, template_names
from ledger.sdk.xcom import XComError, XComRef, encode
from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli

START = pendulum.datetime(2024, 3, 1, tz="UTC")


def names(**over: object) -> dict[str, object]:
    base = dict(logical_date=pendulum.datetime(2024, 3, 5, 6, tz="UTC"), data_interval_start=START,
                data_interval_end=START.add(days=1), prev_interval=("2024-03-04T00:00:00+00:00",
                                                                    "2024-03-05T00:00:00+00:00"),
                run_id="7", run_type="manual", try_number=1, dag_version="v1", dag=None, task=None,
                params={"days": 3}, conf={"who": "ops"})
    base.update(over)
    return template_names(**base)  # type: ignore[arg-type]


def test_templates_render_airflows_names_and_refuse_undefined_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_VAR_BUCKET", "s3://raw")
    monkeypatch.setenv("LEDGER_CONN_WAREHOUSE", "postgresql://etl:s%40cret@db.internal:5432/dw")
    n = names()
    assert render("{{ ds }} {{ ds_nodash }} {{ ts }}", n, field="f") == \
        "2024-03-05 20240305 2024-03-05T06:00:00+00:00"
    assert render("{{ macros.ds_add(ds, params.days) }} {{ macros.ds_format(ds, '%Y-%m-%d', '%d/%m') }}", n,
                  field="f") == "2024-03-08 05/03"
    assert render("{{ prev_data_interval_start.to_date_string() }} {{ conf.who }} {{ run_id }}", n,
                  field="f") == "2024-03-04 ops 7"
    assert render({"a": ["{{ var.value.bucket }}/{{ ds }}"]}, n, field="env") == {"a": ["s3://raw/2024-03-05"]}
    assert render("{{ conn.warehouse.host }}:{{ conn.warehouse.port }} {{ conn.warehouse.password }}", n,
                  field="f") == "db.internal:5432 s@cret"
    assert render("no template", n, field="f") == "no template" and render(5, n, field="f") == 5
    with pytest.raises(TemplateError, match="template error in bash_command: 'nope' is undefined"):
        render("echo {{ nope }}", n, field="bash_command")
    with pytest.raises(TemplateError,
                       match=r"variable .missing. is not set \(LEDGER_VAR_MISSING, AIRFLOW_VAR_MISSING, or ledger"):
        render("{{ var.value.missing }}", n, field="f")
    assert render("{{ prev_data_interval_start }}", names(prev_interval=None), field="f") == "None"


def test_templates_take_airflows_do_statement() -> None:
    """`{% do %}` (Jinja's `do` extension, which Airflow's environment loads) in the default environment and in one
    a DAG's filters or native rendering make."""
    template = "{% set parts = [] %}{% do parts.append(ds) %}{% do parts.append(params.days) %}{{ parts|join('/') }}"
    assert render(template, names(), field="f") == "2024-03-05/3"
    assert render(template, names(), field="f", filters={"shout": str.upper}) == "2024-03-05/3"


def test_params_take_types_from_defaults_and_conf_is_checked_against_them() -> None:
    params = as_params({"days": 7, "mode": Param("full", enum=["full", "delta"]), "day": Param(type="string")},
                       where="DAG 'p'")
    check_conf(params, {"days": 3, "day": "2024-03-01"}, dag_id="p")
    with pytest.raises(ValueError, match=r'--conf days="7" is not of type integer'):
        check_conf(params, {"days": "7", "day": "x"}, dag_id="p")
    with pytest.raises(ValueError, match=r"--conf days=true is not of type integer"):
        check_conf(params, {"days": True, "day": "x"}, dag_id="p")
    with pytest.raises(ValueError, match=r'is not one of \["full", "delta"\]'):
        check_conf(params, {"mode": "weekly", "day": "x"}, dag_id="p")
    with pytest.raises(ValueError, match="--conf must give 'day'"):
        check_conf(params, {}, dag_id="p")
    assert resolve(params, {"day": "d", "other": 1}) == {"days": 7, "mode": "full", "day": "d"}
    with pytest.raises(DagDefinitionError, match="its default 'x' is not of type integer"):
        Param("x", type="integer")


def test_values_are_json_of_at_most_64_kib(monkeypatch: pytest.MonkeyPatch) -> None:
    assert json.loads(encode("k", {"a": [1, 2]})) == {"a": [1, 2]}
    with pytest.raises(XComError, match="not JSON-serialisable"):
        encode("return_value", object())  # (a set passes: test_names.py)
    with pytest.raises(XComError, match="more than the 65536 allowed"):
        encode("big", "x" * 70_000)
    monkeypatch.setenv("LEDGER_XCOM_MAX_BYTES", "10")
    with pytest.raises(XComError, match="more than the 10 allowed"):
        encode("k", "0123456789")


def test_task_functions_passed_to_each_other_become_dependencies_in_the_version() -> None:
    with DAG("flow", schedule=None, start_date=START) as dag:
        @task
        def extract() -> list[int]:
            return [1, 2]

        @task
        def load(rows: list[int], mode: str) -> int:
            return len(rows)

        loaded = load(extract(), mode="full")
        report = PythonTask("report", print, op_args=[loaded.output])
    assert dag.tasks["load"].upstream_ids == {"extract"} and report.upstream_ids == {"load"}
    assert dag.tasks["load"].op_args == [XComRef("extract")]  # type: ignore[attr-defined]
    load_def = next(t for t in structure_of(dag)["tasks"] if t["task_id"] == "load")["definition"]
    assert load_def["op_args"] == "[XComRef('extract', 'return_value')]"
    with pytest.raises(DagDefinitionError, match="takes the value of 'elsewhere', which is not in DAG"), \
            DAG("other", schedule=None, start_date=START):
        PythonTask("p", print, op_args=[XComRef("elsewhere")])
    with DAG("plain", schedule=None, start_date=START) as plain:
        BashTask("a", "true")
    assert "params" not in structure_of(plain)  # DAGs without params keep their version hashes


FLOW_DAG = """
import pendulum
from ledger import DAG, BashTask, task
from ledger.sdk.params import Param

with DAG("flow", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC"),
         params={"days": 7, "mode": Param("full", enum=["full", "delta"])}) as dag:
    @task
    def extract(context):
        context.xcom_push("rows", 42)
        return {"files": ["a.csv", "b.csv"], "mode": context.params["mode"]}

    @task
    def load(found, context):
        return len(found["files"]) + context.xcom_pull("extract", key="rows")

    @task
    def too_big():
        return "x" * 70000

    report = BashTask("report", "echo ds={{ ds }} loaded={{ ti.xcom_pull(task_ids='load') }} "
                                "prev={{ prev_data_interval_start }} until={{ macros.ds_add(ds, params.days) }}",
                      env={"MODE": "{{ params.mode }}"})
    load(extract()) >> report
    too_big()
"""


def test_values_templates_and_params_through_the_cli(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("flow.py", FLOW_DAG)
    before = dump(cli)
    refused = cli.fails("trigger", "flow", "--logical-date", "2024-03-02", "--conf", '{"days": "seven"}')
    assert "--conf days=\"seven\" is not of type integer (param 'days' of DAG 'flow')" in refused.stderr
    assert dump(cli) == before  # refused: nothing changed, not even the new version
    cli.ok("trigger", "flow", "--logical-date", "2024-03-01")
    cli.ok("trigger", "flow", "--logical-date", "2024-03-02", "--conf", '{"mode": "delta"}')
    cli.ok("scheduler", "--exit-when-idle")
    assert cli.json("tasks", "xcom", "flow", "2", "extract") == [
        {"try_number": 1, "key": "return_value", "value": {"files": ["a.csv", "b.csv"], "mode": "delta"},
         "created_at": cli.json("tasks", "xcom", "flow", "2", "extract")[0]["created_at"]},
        {"try_number": 1, "key": "rows", "value": 42,
         "created_at": cli.json("tasks", "xcom", "flow", "2", "extract")[1]["created_at"]}]
    assert [x["value"] for x in cli.json("tasks", "xcom", "flow", "2", "load")] == [44]
    (rendered,) = cli.json("tasks", "rendered", "flow", "2", "report")
    assert rendered["rendered"] == {
        "bash_command": "echo ds=2024-03-02 loaded=44 prev=2024-03-01 00:00:00+00:00 until=2024-03-09",
        "env": {"MODE": "delta"}}
    assert "ds=2024-03-02 loaded=44" in cli.ok("tasks", "logs", "flow", "2", "report")
    states = {t["task_id"]: t["state"] for t in cli.json("runs", "show", "2")["task_instances"]}
    assert states["too_big"] == "failed"
    failure = [e for e in cli.json("events", "--run", "2") if e["kind"] == "task_failed"]
    assert "return value: the value for 'return_value' is 70002 bytes of JSON" in failure[0]["details"]["reason"]
    # an overridden run keeps the values its tries passed on
    cli.ok("trigger", "flow", "--logical-date", "2024-03-02", "--replace")
    cli.ok("scheduler", "--exit-when-idle")
    assert [x["value"] for x in cli.json("tasks", "xcom", "flow", "2", "load")] == [44]
    new_run = cli.json("timeline", "flow")[-1]["run_id"]
    assert next(x["value"] for x in cli.json("tasks", "xcom", "flow", new_run, "extract"))["mode"] == "full"


def test_task_groups_prefix_ids_nest_and_link_through_their_roots_and_leaves() -> None:
    from ledger import TaskGroup

    with DAG("grouped", schedule=None, start_date=START) as dag:
        start = BashTask("start", "true")
        with TaskGroup("load") as load:
            a = BashTask("a", "true")
            with TaskGroup("s3"):
                b = BashTask("b", "true")
                c = BashTask("c", "true")
                b >> c
            a >> BashTask("d", "true")
        end = BashTask("end", "true")
        start >> load >> end
    assert sorted(dag.tasks) == ["end", "load.a", "load.d", "load.s3.b", "load.s3.c", "start"]
    assert dag.tasks["start"].downstream_ids == {"load.a", "load.s3.b"}  # the group's roots
    assert end.upstream_ids == {"load.d", "load.s3.c"}  # its leaves
    assert a.group is load and b.group is not None and b.group.group_id == "load.s3"
    groups = {t["task_id"]: t.get("group") for t in structure_of(dag)["tasks"]}
    assert groups == {"start": None, "end": None, "load.a": "load", "load.d": "load", "load.s3.b": "load.s3",
                      "load.s3.c": "load.s3"}
    assert c.task_id == "load.s3.c"
    with pytest.raises(DagDefinitionError, match="invalid group_id"), DAG("bad", schedule=None, start_date=START):
        TaskGroup("has space")
