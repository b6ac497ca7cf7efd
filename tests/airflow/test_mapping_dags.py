"""Airflow DAG files using expand_kwargs, .map(), .zip() and mapped task groups
(tests/airflow_corpus/af*_mapping_extras.py), loaded unchanged and run with `ledger dags test --record`: which
instances ran and the values they passed."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"


def _values(cli: Cli, dag_id: str, run_id: str, task_id: str, map_index: int | None = None) -> object:
    """The value a task instance returned (its newest try's)."""
    where = ["--map-index", str(map_index)] if map_index is not None else []
    rows = cli.json("tasks", "xcom", dag_id, run_id, task_id, *where)
    return [r["value"] for r in rows if r["key"] == "return_value"][-1]


def test_mapping_extras_run_as_in_airflow(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.dags.mkdir(parents=True)
    for name in ("af2_mapping_extras.py", "af3_mapping_extras.py"):
        shutil.copy(CORPUS / name, cli.dags)
    out = cli.ok("dags", "test", "af2_mapping_extras", "--logical-date", "2024-03-05", "--record")
    assert "test run 1 of af2_mapping_extras: success" in out
    assert "task squared: expanded into 3 instance(s) over the value of task 'numbers'" in out
    assert ("task pairs: expanded into 2 instance(s) over the value of task 'letters', the value of task 'numbers'"
            in out)
    assert "[ledger] mapped instance 1: bash_command='echo n=2'" in out and "\nn=2\n" in out
    [run] = cli.json("timeline", "af2_mapping_extras", "--all")
    rid = run["run_id"]
    assert _values(cli, "af2_mapping_extras", rid, "collect_added") == [11, 22]  # expand_kwargs
    assert _values(cli, "af2_mapping_extras", rid, "squared", 2) == 9  # .map()
    assert _values(cli, "af2_mapping_extras", rid, "pairs", 1) == [2, "b"]  # .zip(): the shortest
    assert _values(cli, "af2_mapping_extras", rid, "per_number.plus_hundred", 1) == 104  # its own double[1]
    assert _values(cli, "af2_mapping_extras", rid, "collect_group") == [102, 104, 106]
    shown = cli.json("runs", "show", rid)
    labels = {ti["label"] for ti in shown["task_instances"]}
    assert {"per_number.double[2]", "per_number.plus_hundred[0]", "echo[2]", "add[1]"} <= labels

    out = cli.ok("dags", "test", "af3_mapping_extras", "--logical-date", "2024-03-05", "--record")
    assert "[ledger] mapped instance 1: item='cake', qty=1" in out
    [run] = cli.json("timeline", "af3_mapping_extras", "--all")
    assert _values(cli, "af3_mapping_extras", run["run_id"], "bill") == 11  # 2 teas at 3, 1 cake at 5
