"""Module paths from before the folders (2026-11-28) keep working for DAG files and pinned code."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from ledger.infra.moved_modules import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_module_under_its_new_name(old: str) -> None:
    module = importlib.import_module(f"ledger.{old}")
    assert module is importlib.import_module(f"ledger.{MOVED[old]}")
    assert module.__name__ == module.__spec__.name == f"ledger.{MOVED[old]}"


def test_the_documented_old_imports_work_in_a_fresh_interpreter() -> None:
    code = ("from ledger.params import Param\nfrom ledger.sensors import PythonSensor\n"
            "from ledger.dag import DAG\nfrom ledger import dag, DAG as D\nimport ledger.sdk.params as p\n"
            "assert Param is p.Param and D is DAG and dag.DAG is DAG\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_a_name_that_never_was_a_module_is_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("ledger.no_such_module")
    with pytest.raises(ImportError):
        exec("from ledger import no_such_name", {})
