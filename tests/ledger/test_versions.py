"""Version hashes: the structure of a DAG plus the code of its file, ignoring comments and layout."""

from __future__ import annotations

from pathlib import Path

import pendulum

from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.dag import DAG, BashTask
from ledger.sdk.describe import code_digest, version_of

CODE = "LIMIT = 10\n\ndef f(x):\n    return x + LIMIT\n"


def test_comments_blank_lines_and_layout_do_not_change_the_code_digest() -> None:
    relaid = "# a note\nLIMIT  =  10\n\n\n\ndef f( x ):  # why\n    return (x + LIMIT)\n"
    assert code_digest(CODE) == code_digest(relaid)


def test_any_change_to_the_code_changes_the_code_digest() -> None:
    assert code_digest(CODE) != code_digest(CODE.replace("10", "11"))
    assert code_digest(CODE) != code_digest(CODE + "import os\n")


def test_a_dag_from_a_file_is_versioned_with_its_code_and_one_built_in_memory_without() -> None:
    def build(source: str | None) -> tuple[str, str]:
        with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
            BashTask("t", "echo hi")
        dag.source_code = source
        return version_of(dag)

    (plain, plain_text), (coded, coded_text) = build(None), build(CODE)
    assert "code_sha256" not in plain_text and code_digest(CODE) in coded_text
    assert plain != coded != build(CODE.replace("10", "11"))[0]
    assert coded == build("# same code\n" + CODE)[0]


def test_the_same_dag_file_in_another_folder_has_the_same_version(tmp_path: Path) -> None:
    source = ("import pendulum\nfrom ledger import DAG, PythonTask\n\ndef work(context):\n    pass\n\n"
              "with DAG('moved', schedule='@daily', start_date=pendulum.datetime(2024, 1, 1, tz='UTC')):\n"
              "    PythonTask('work', work)\n")
    versions = []
    for folder in ("a", "b"):
        path = tmp_path / folder / "moved.py"
        path.parent.mkdir()
        path.write_text(source)
        (dag,) = load_file(str(path)).dags
        versions.append(version_of(dag))
    assert versions[0] == versions[1]
    assert '"callable":"<dag file>.work"' in versions[0][1]


def test_airflow_default_args_load_and_the_version_lists_those_ledger_ignores() -> None:
    import pendulum

    from ledger import DAG, BashTask
    from ledger.core.errors import DagDefinitionError
    from ledger.sdk.describe import structure_of

    with DAG("airflowish", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
             default_args={"owner": "data-eng", "email": ["a@b.c"], "email_on_failure": True, "retries": 2,
                           "sla": None}) as dag:
        task = BashTask("a", "true")
    assert task.retries == 2
    assert structure_of(dag)["ignored_args"] == ["owner", "sla"]
    # email is acted on: an e-mail notifier on failure and on retry, recorded in the version
    assert structure_of(dag)["tasks"][0]["callbacks"] == {
        "task_failure": [{"notifier": "EmailNotifier", "to": ["a@b.c"]}],
        "task_retry": [{"notifier": "EmailNotifier", "to": ["a@b.c"]}]}
    with DAG("plain", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as plain:
        BashTask("a", "true")
    assert "ignored_args" not in structure_of(plain)  # other DAGs keep their version hashes
    try:
        DAG("typo", schedule=None, default_args={"retires": 1})
    except DagDefinitionError as exc:
        assert "unknown default_args key 'retires'; did you mean 'retries'?" in str(exc)
    else:
        raise AssertionError("an unknown default_args key was accepted")


def test_a_dags_tags_are_part_of_its_version_only_when_it_has_some() -> None:
    def build(tags: list[str]) -> tuple[str, str]:
        with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), tags=tags) as dag:
            BashTask("t", "echo hi")
        return version_of(dag)

    untagged, text = build([])
    assert '"tags"' not in text  # a DAG without tags keeps the hash it had before tags were recorded
    tagged, text = build(["sales", "daily"])
    assert '"tags":["daily","sales"]' in text.replace(" ", "") and tagged != untagged
    assert build(["daily", "sales"])[0] == tagged != build(["daily"])[0]
