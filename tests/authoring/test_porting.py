"""The porting guide's promise: the Airflow DAG of examples/airflow runs in ledger with only its imports
changed (examples/dags/orders_daily.py), and it runs: in the local test loop and under the scheduler."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO, Cli

AIRFLOW = REPO / "examples" / "airflow" / "orders_daily.py"
LEDGER = REPO / "examples" / "dags" / "orders_daily.py"


def _parts(path: Path) -> tuple[set[str], list[str]]:
    """(the names its imports bind, its code without docstring, imports and blank lines)."""
    tree = ast.parse(path.read_text())
    names = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             for alias in node.names}
    body = [node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom))
            and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    return names, [ast.unparse(node) for node in body]


def test_the_airflow_dag_differs_from_the_ledger_one_only_by_its_imports() -> None:
    airflow_names, airflow_code = _parts(AIRFLOW)
    ledger_names, ledger_code = _parts(LEDGER)
    assert airflow_names == ledger_names  # the same names, bound by other imports
    assert airflow_code == ledger_code
    assert "from airflow" in AIRFLOW.read_text() and "airflow" not in LEDGER.read_text().split('"""', 2)[2]


def test_the_ported_dag_runs_in_the_test_loop_and_under_the_scheduler(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("orders_daily.py", LEDGER.read_text())
    out = cli.ok("dags", "test", "orders_daily", "--logical-date", "2024-03-05T06:00")
    assert "2024-03-05: 45 rows, quality ok" in out and out.strip().endswith("test run of orders_daily: success")
    shown = cli.ok("dags", "show", "orders_daily")
    assert "ignored default_args" in shown and "owner" in shown
    cli.ok("trigger", "orders_daily", "--logical-date", "2024-03-05T06:00", "--conf", '{"min_rows": 50}')
    cli.ok("scheduler", "--exit-when-idle")
    run = cli.json("runs", "show", "1")
    states = {t["label"]: t["state"] for t in run["task_instances"]}
    assert states == {"extract": "success", "load.count_rows": "success", "load.store": "success",
                      "check_quality": "failed", "cleanup": "success",  # min_rows 50 from --conf: too few
                      "regions": "success", "publish[0]": "success", "publish[1]": "success",
                      "archive[0]": "success", "archive[1]": "success"}
    assert [x["value"] for x in cli.json("tasks", "xcom", "orders_daily", "1", "publish", "--map-index", "1")] == [
        "us/2024-03-05.csv"]
    assert [t["try_number"] for t in run["task_instances"] if t["task_id"] == "check_quality"] == [3]
    assert [x["value"] for x in cli.json("tasks", "xcom", "orders_daily", "1", "load.store")] == [
        {"rows": 45, "min_rows": 50}]
    (rendered,) = cli.json("tasks", "rendered", "orders_daily", "1", "extract")
    assert rendered["rendered"]["bash_command"] == \
        "echo 'extracting orders of 2024-03-05 into /tmp/orders_20240305.csv'"


def test_the_airflow_file_itself_runs_unchanged(tmp_path: Path) -> None:
    """Through ledger's `airflow` namespace (ledger/airflow_compat) the Airflow file needs no edit at all."""
    import pendulum

    from ledger.core.states import RunState
    from ledger.scheduler.runtime import local_testing
    from ledger.scheduler.runtime.dagbag import load_file

    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "orders_daily.py").write_text(AIRFLOW.read_text())
    loaded = load_file(str(folder / "orders_daily.py"), str(folder))
    assert loaded.error is None, loaded.error
    [dag] = loaded.dags
    lines: list[str] = []
    run = local_testing.TestRun.of(dag, pendulum.datetime(2024, 3, 5, 6, tz="UTC"), {}, folder)
    assert local_testing.test_dag(run, lines.append) is RunState.SUCCESS
    assert "2024-03-05: 45 rows, quality ok" in "\n".join(lines)
    assert run.xcom["publish[1]"]["return_value"] == "us/2024-03-05.csv"
    assert dag.about() == {"owner": "data-eng"}  # Airflow's owner is kept, not ignored
