"""Each DAG version keeps the code of its file: `ledger dags show --source` and `ledger dags diff`."""

from __future__ import annotations

from tests.conftest import Cli

HELPER_DAG = '''
import pendulum
from ledger import DAG, PythonTask

FACTOR = 2


def scale(value):
    return value * FACTOR


def work(context):
    print(scale(21))


with DAG("coded", schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("work", work)
'''


def test_a_helper_change_makes_a_new_version_and_a_comment_does_not(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("coded.py", HELPER_DAG)
    assert len(cli.json("dags", "versions", "coded")) == 1
    cli.write_dag("coded.py", "# only a comment and layout change\n" + HELPER_DAG.replace("FACTOR = 2", "FACTOR  =  2"))
    assert len(cli.json("dags", "versions", "coded")) == 1
    cli.write_dag("coded.py", HELPER_DAG.replace("FACTOR = 2", "FACTOR = 3"))  # not in a task's callable
    assert len(cli.json("dags", "versions", "coded")) == 2


def test_show_source_prints_the_file_as_it_was_for_that_version(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("coded.py", HELPER_DAG)
    first = cli.json("dags", "versions", "coded")[0]["version"]
    cli.write_dag("coded.py", HELPER_DAG.replace("FACTOR = 2", "FACTOR = 3"))
    assert cli.ok("dags", "show", "coded", "--version", first[:8], "--source") == HELPER_DAG
    assert "FACTOR = 3" in cli.ok("dags", "show", "coded", "--source")
    shown = cli.json("dags", "show", "coded", "--version", first, "--source")
    assert shown["source_code"] == HELPER_DAG and shown["version"] == first
    assert "source_code" not in cli.json("dags", "show", "coded")


def test_diff_shows_the_code_and_structure_that_changed_between_versions(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("coded.py", HELPER_DAG)
    first = cli.json("dags", "versions", "coded")[0]["version"]
    cli.write_dag("coded.py", HELPER_DAG.replace("FACTOR = 2", "FACTOR = 3"))
    diff = cli.ok("dags", "diff", "coded", first[:8]).splitlines()
    assert f"--- coded@{first[:12]}/coded.py" in diff
    assert "-FACTOR = 2" in diff and "+FACTOR = 3" in diff
    assert any(line.startswith('-  "code_sha256"') for line in diff)
    assert not any(line.startswith(("-def ", "+def ")) for line in diff)  # unchanged lines are context only
    same = cli.ok("dags", "diff", "coded", first[:8], first).strip()
    assert same == f"versions {first[:12]} and {first[:12]} are the same"


def test_diff_and_show_source_refuse_an_unknown_version_in_one_line(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("coded.py", HELPER_DAG)
    for args in (("dags", "diff", "coded", "ffff"), ("dags", "show", "coded", "--version", "ffff", "--source"),
                 ("dags", "diff", "nope", "ffff")):
        result = cli.fails(*args)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "no version of DAG 'coded' matches 'ffff'" in cli.fails("dags", "diff", "coded", "ffff").stderr
