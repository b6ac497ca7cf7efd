"""Airflow DAG files with virtualenv and external-Python tasks (tests/airflow_corpus/), loaded unchanged and run
with `ledger dags test`: the callables run in the other interpreter and their values pass on."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from tests.conftest import Cli

CORPUS = Path(__file__).resolve().parent.parent / "airflow_corpus"


def test_virtualenv_tasks_run_in_their_environment_and_pass_their_value_on(cli: Cli) -> None:
    cli.dags.mkdir(parents=True)
    shutil.copy(CORPUS / "af2_virtualenv.py", cli.dags)
    out = cli.ok("dags", "test", "af2_virtualenv", "--logical-date", "2024-03-05")
    venvs = cli.home / "venvs"
    assert out.count("building the environment") == 2  # system_site_packages False and True: two sets
    assert f"'prefix': '{venvs}/" in out and "'double': 42, 'ds': '2024-03-05', 'sees_pendulum': False" in out
    assert "returned ['pendulum', 6]" in out  # with system site packages it sees ledger's own packages
    assert "checked 42 2024-03-05 False" in out and "returned 43" in out
    assert "test run of af2_virtualenv: success" in out
    again = cli.ok("dags", "test", "af2_virtualenv", "--logical-date", "2024-03-06")
    assert "building the environment" not in again  # built once per requirement set, then cached
    assert len([p for p in venvs.iterdir() if p.is_dir()]) == 2


def test_external_python_tasks_run_in_the_given_interpreter_or_fail_naming_it(cli: Cli) -> None:
    cli.dags.mkdir(parents=True)
    shutil.copy(CORPUS / "af3_external_python.py", cli.dags)
    result = cli.run("dags", "test", "af3_external_python", "--logical-date", "2024-03-05")
    assert result.exit_code == 1, result.output
    out = result.stdout
    # the DAG file names `sys.executable` of the `ledger` process: the console script's interpreter, which may be
    # spelled `python3` where this test runs as `python` (one file, two names in a virtualenv)
    called = re.search(r"calling where in (\S+)\n", out)
    assert called and os.path.samefile(called[1], sys.executable), out
    assert "returned 'hello from 3'" in out, out
    assert "returned 'HELLO FROM 3'" in out, out
    assert f"calling dilled in {called[1]} (dill)" in out, out
    assert "returned 'hello from 3 read with dill'" in out, out
    assert "--- nowhere try 1: failed" in out
    assert "the interpreter /nonexistent/bin/python does not exist or cannot be run on this host" in out
