"""The `airflow` compatibility namespace (ledger/airflow_compat): DAG files that import `airflow...` load
through ledger's loader, an `airflow.*` module ledger lacks is refused in one line naming it, and an
`airflow` package of the user's own (Apache Airflow installed) is never shadowed."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import airflow_compat
from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.dag import BashTask


@pytest.fixture
def clean_airflow() -> Iterator[None]:
    """No `airflow` module imported before or after the test (the test process is shared)."""
    def drop() -> None:
        for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
            del sys.modules[name]
    drop()
    yield
    drop()


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


AIRFLOW_DAG = """\
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG("hello", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), schedule=None):
    BashOperator(task_id="say", bash_command="echo hi")
"""


def test_an_airflow_dag_file_loads_through_ledgers_namespace(tmp_path: Path, clean_airflow: None) -> None:
    loaded = load_file(write(tmp_path, "hello.py", AIRFLOW_DAG), str(tmp_path))
    assert loaded.error is None
    [dag] = loaded.dags
    assert isinstance(dag.tasks["say"], BashTask)
    assert getattr(sys.modules["airflow"], airflow_compat.MARKER) is True
    assert loaded.code is not None and loaded.code.support == ()  # ledger's shim is not the DAG's code


def test_a_provider_import_is_refused_in_one_line_naming_it_and_the_carried_ones(tmp_path: Path,
                                                                                  clean_airflow: None) -> None:
    fileloc = write(tmp_path, "bq.py", "from airflow import DAG\n"
                                      "from airflow.providers.google.cloud.operators.bigquery import X\n")
    loaded = load_file(fileloc, str(tmp_path))
    assert loaded.error is not None and "\n" not in loaded.error
    assert loaded.error.startswith(f"{fileloc}:2: airflow.providers.google is an Airflow module ledger does not "
                                   "provide: ledger carries Airflow's core and the providers standard, common.sql, ")
    assert "amazon's S3 basics (S3Hook, S3KeySensor" in loaded.error and "get_connection" in loaded.error
    # a carried provider's module without the name: Python's own one line, naming the module
    fileloc = write(tmp_path, "s3.py", "from airflow import DAG\n"
                                      "from airflow.providers.amazon.aws.operators.s3 import S3CreateBucketOperator\n")
    loaded = load_file(fileloc, str(tmp_path))
    assert loaded.error is not None
    assert ("cannot import name 'S3CreateBucketOperator' from 'airflow.providers.amazon.aws.operators.s3'"
            in loaded.error.strip().splitlines()[-1])


def test_a_dag_file_may_still_try_an_import_and_fall_back(tmp_path: Path, clean_airflow: None) -> None:
    fileloc = write(tmp_path, "fallback.py", "try:\n    from airflow.hooks.base import BaseHook\nexcept ImportError:\n"
                                            "    BaseHook = None\n" + AIRFLOW_DAG)
    assert load_file(fileloc, str(tmp_path)).error is None


def test_an_installed_airflow_is_never_shadowed(tmp_path: Path, clean_airflow: None) -> None:
    site = tmp_path / "site"
    write(site, "airflow/__init__.py", "REAL = True\n")
    write(site, "airflow/operators/__init__.py", "")
    write(site, "airflow/operators/bash.py", "class BashOperator:\n    real = True\n")
    dags = tmp_path / "dags"
    fileloc = write(dags, "uses_real.py", "import airflow\nfrom airflow.operators.bash import BashOperator\n"
                                         "assert airflow.REAL and BashOperator.real\n"
                                         "from airflow.providers.amazon import x\n")
    sys.path.append(str(site))
    try:
        loaded = load_file(fileloc, str(dags))
    finally:
        sys.path.remove(str(site))
    assert loaded.error is not None  # the real package's own ModuleNotFoundError, not ledger's refusal
    assert loaded.error.endswith("ModuleNotFoundError: No module named 'airflow.providers'")


def test_a_folder_named_airflow_without_a_package_does_not_hide_the_namespace(tmp_path: Path,
                                                                               clean_airflow: None) -> None:
    (tmp_path / "airflow").mkdir()  # e.g. configuration kept beside the DAGs
    (tmp_path / "airflow" / "airflow.cfg").write_text("[core]\n")
    assert load_file(write(tmp_path, "hello.py", AIRFLOW_DAG), str(tmp_path)).error is None


def test_the_namespace_modules_only_re_export_ledgers_names() -> None:
    """Each module under ledger/airflow_compat/airflow/ imports from ledger's modules (or the standard library)
    and defines nothing, so a
    second import of it (as ledger.airflow_compat.airflow.x, by a type checker) makes no second class."""
    import ast

    for module in airflow_compat.provided_modules():
        rel = module.replace(".", "/")
        path = airflow_compat.SHIM_ROOT.parent / (rel + ".py")
        if not path.exists():
            path = airflow_compat.SHIM_ROOT.parent / rel / "__init__.py"
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                assert node.module is not None, module
                assert node.module.startswith("ledger") or node.module in sys.stdlib_module_names, (module, node.module)
            else:
                assert isinstance(node, ast.Import | ast.Assign | ast.Expr), (module, ast.dump(node)[:80])


def test_every_module_of_the_namespace_imports_as_airflow_and_has_what_it_lists(clean_airflow: None) -> None:
    import importlib

    airflow_compat.install()
    for name in airflow_compat.provided_modules():
        module = importlib.import_module(name)
        assert all(hasattr(module, attr) for attr in getattr(module, "__all__", ())), name
    assert set(airflow_compat.provided_modules()) >= {"airflow.sdk", "airflow.operators.bash", "airflow.decorators"}


def test_the_import_table_lists_every_module_of_the_namespace_that_provides_names() -> None:
    """docs/from-airflow.md's table is generated from AIRFLOW_MODULES: a module added to the namespace (by any
    part: operators, flow, timetables, python environments) must be a row of it."""
    listed = set(airflow_compat.AIRFLOW_MODULES)
    missing = [m for m in airflow_compat.provided_modules() if airflow_compat.module_names(m) and m not in listed]
    assert missing == []


def test_a_custom_trigger_and_airflows_example_helpers_are_refused_naming_what_to_do(tmp_path: Path,
                                                                                    clean_airflow: None) -> None:
    for name, line, said in (("trig.py", "from airflow.triggers.base import BaseTrigger",
                              "airflow.triggers is an Airflow module ledger does not provide: ledger has no triggerer"),
                             ("ex.py", "from airflow.example_dags.libs.helper import print_stuff",
                              "airflow.example_dags.libs is an Airflow module ledger does not provide: Airflow's "
                              "example helpers are not part of ledger; copy the helper module into your DAGs folder "
                              "(airflow.example_dags.libs.helper is the DAGs folder's libs/helper.py) or import it "
                              "from there")):
        fileloc = write(tmp_path, name, f"from airflow import DAG\n{line}\n")
        loaded = load_file(fileloc, str(tmp_path))
        assert loaded.error is not None and "\n" not in loaded.error
        assert loaded.error.startswith(f"{fileloc}:2: {said}")
