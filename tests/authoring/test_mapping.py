"""Dynamic task mapping through the real CLI and scheduler: a task mapped over a literal list and one mapped over
the list an upstream returned run one instance per value, each with its own tries, values and templates; an
empty list skips, a bad value fails with its reason; commands about a mapped task name an instance."""

from __future__ import annotations

from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli

FAN_DAG = """
import os
from datetime import timedelta
from pathlib import Path

import pendulum
from ledger import DAG, BashTask, task

with DAG("fan", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    @task
    def files():
        listed = Path(os.environ["LEDGER_HOME"]) / "files.txt"
        return listed.read_text().split() if listed.exists() else ["a.csv", "b.csv", "c.csv"]

    @task(retries=1, retry_delay=timedelta(0))
    def load(path, prefix, ti=None):
        marker = Path(os.environ["LEDGER_HOME"]) / f"failed_once_{ti.map_index}"
        if path == "b.csv" and not marker.exists():
            marker.touch()
            raise RuntimeError("b.csv is not there yet")
        return prefix + path

    @task
    def report(loaded):
        return loaded

    report(load.partial(prefix="s3://raw/").expand(path=files()))
    BashTask.partial(task_id="echo", env={"WHO": "{{ ti.map_index }}"}).expand(
        bash_command=["echo first $LEDGER_MAP_INDEX $WHO", "echo second {{ ds }} {{ ti.map_index }}"])
"""

ODD_DAG = """
import pendulum
from ledger import DAG, task

def alert(context):
    print("expansion failed:", context["task_id"], context["reason"])

with DAG("odd", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
    @task
    def nothing():
        return []

    @task
    def word():
        return "not a list"

    @task
    def many():
        return list(range(5))

    @task
    def show(x):
        print(x)

    @task
    def after():
        return "after"

    show.override(task_id="on_empty").expand(x=nothing()) >> after()
    show.override(task_id="on_word", on_failure_callback=alert).expand(x=word())
    show.override(task_id="on_many").expand(x=many())
"""


def test_mapped_tasks_run_one_instance_per_value_each_with_its_own_tries_values_and_templates(
        ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("fan.py", FAN_DAG)
    cli.ok("trigger", "fan", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle")
    run = cli.json("runs", "show", "1")
    assert run["state"] == "success"
    graph = {t["task_id"]: t for t in run["graph"]["tasks"]}
    assert (graph["load"]["mapped"], graph["load"]["instances"], graph["echo"]["instances"]) == (True, 3, 2)
    assert "mapped" not in graph["report"]
    tries = {t["label"]: [x["state"] for x in t["tries"]] for t in run["task_instances"]}
    assert tries == {"files": ["success"], "load[0]": ["success"], "load[1]": ["failed", "success"],
                     "load[2]": ["success"], "report": ["success"], "echo[0]": ["success"], "echo[1]": ["success"]}
    # the downstream task pulled every instance's value, by map index
    assert [x["value"] for x in cli.json("tasks", "xcom", "fan", "1", "report")] == [
        ["s3://raw/a.csv", "s3://raw/b.csv", "s3://raw/c.csv"]]
    assert [x["value"] for x in cli.json("tasks", "xcom", "fan", "1", "load", "--map-index", "1")] == [
        "s3://raw/b.csv"]
    (rendered,) = cli.json("tasks", "rendered", "fan", "1", "echo", "--map-index", "1")
    assert rendered["rendered"]["bash_command"] == "echo second 2024-03-01 1"
    assert "first 0 0" in cli.ok("tasks", "logs", "fan", "1", "echo", "--map-index", "0")
    assert "RuntimeError: b.csv is not there yet" in cli.ok("tasks", "logs", "fan", "1", "load", "--map-index", "1",
                                                            "--try", "1")
    expanded = [e["details"] for e in cli.json("events", "--run", "1") if e["kind"] == "task_expanded"]
    assert expanded == [{"task_id": "echo", "count": 2, "source": "a literal list"},
                        {"task_id": "load", "count": 3, "source": "the value of task 'files'"}]
    table = cli.ok("runs", "show", "1")
    assert "3 mapped" in table and "load[1]" in table
    # a mapped task needs --map-index, and an index it has: refused, one line, nothing changed
    before = dump(cli)
    assert "choose one with --map-index" in cli.fails("tasks", "logs", "fan", "1", "load").stderr
    assert "has no instance 7 (instances 0-2)" in cli.fails("tasks", "xcom", "fan", "1", "load",
                                                            "--map-index", "7").stderr
    assert "has no instance 0 (no mapped instances)" in cli.fails("tasks", "rendered", "fan", "1", "report",
                                                                  "--map-index", "0").stderr
    assert dump(cli) == before
    # the web run page lists the instances and links each one's log
    from fastapi.testclient import TestClient

    from ledger.infra.config import load_settings
    from ledger.web.app import create_app

    with TestClient(create_app(load_settings({"LEDGER_HOME": str(cli.home)})), base_url="http://localhost") as client:
        page = client.get("/runs/1").text
        assert "python x3 mapped" in page and "<td>load[1]</td>" in page  # the graph box of the mapped task
        assert "b.csv is not there yet" in client.get("/runs/1/tasks/load%5B1%5D/tries/1/log").text
    # clearing a mapped task clears all its instances
    assert '["load[0]", "load[1]", "load[2]"]' in cli.ok("tasks", "clear", "fan", "1", "-t", "load")
    cli.ok("scheduler", "--exit-when-idle")
    assert [t["try_number"] for t in cli.json("runs", "show", "1")["task_instances"] if t["task_id"] == "load"] == [
        2, 3, 2]
    # clearing it with the task whose list it maps over expands it again, over the list made again
    (cli.home / "files.txt").write_text("a.csv")
    assert '["files", "load", "report"]' in cli.ok("tasks", "clear", "fan", "1", "-t", "files", "--downstream")
    cli.ok("scheduler", "--exit-when-idle")
    run = cli.json("runs", "show", "1")
    assert [(t["label"], t["state"]) for t in run["task_instances"] if t["task_id"] == "load"] == [
        ("load[0]", "success"), ("load[1]", "removed"), ("load[2]", "removed")]
    assert [t["instances"] for t in run["graph"]["tasks"] if t["task_id"] == "load"] == [1]
    assert [x["value"] for x in cli.json("tasks", "xcom", "fan", "1", "report")] == [
        ["s3://raw/a.csv", "s3://raw/b.csv", "s3://raw/c.csv"], ["s3://raw/a.csv"]]
    assert run["state"] == "success"
    # removed instances stay out when the mapped task alone is cleared again
    assert 'cleared 1 task instance(s) of run 1: ["load[0]"]' in cli.ok("tasks", "clear", "fan", "1", "-t", "load")


def test_an_empty_list_skips_the_mapped_task_and_a_bad_value_fails_it_with_the_reason(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("odd.py", ODD_DAG)
    assert "task 'on_word' is mapped" in cli.fails("tasks", "test", "odd", "on_word").stderr
    cli.ok("trigger", "odd", "--logical-date", "2024-03-01")
    cli.ok("scheduler", "--exit-when-idle", LEDGER_MAX_MAP_LENGTH="3")
    run = cli.json("runs", "show", "1")
    states = {t["label"]: t["state"] for t in run["task_instances"]}
    assert states == {"nothing": "success", "word": "success", "many": "success", "on_empty": "skipped",
                      "on_word": "failed", "on_many": "failed", "after": "skipped"}
    assert run["state"] == "failed"
    assert all(t["instances"] == 0 for t in run["graph"]["tasks"] if t.get("mapped"))
    reasons = {e["details"]["task_id"]: (e["kind"], e["details"]["reason"]) for e in cli.json("events", "--run", "1")
               if e["kind"] in ("task_expanded", "task_failed")}
    assert reasons == {
        "on_empty": ("task_expanded", "the value of task 'nothing' gave an empty list for x: nothing to map over"),
        "on_word": ("task_failed", "cannot expand 'x' over the value of task 'word': it is not a list but a str "
                                   "'not a list'"),
        "on_many": ("task_failed", "expanding over the value of task 'many' would make 5 instances, more than the "
                                   "3 allowed (LEDGER_MAX_MAP_LENGTH)")}
    (called,) = cli.json("callbacks", "--dag", "odd")  # its on_failure_callback, called once
    assert (called["task_id"], called["kind"], called["state"]) == ("on_word", "task_failure", "ok")
