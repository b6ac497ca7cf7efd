"""Secret-looking task arguments in a version's structure: stored as digests (a change still makes a new version),
shown as ***; DAGs without any keep their version hashes."""

from __future__ import annotations

import json
from typing import Any

import pendulum

from ledger import DAG, BashTask, PythonTask
from ledger.core.versions import masked
from ledger.sdk.describe import structure_of, version_of

START = pendulum.datetime(2024, 1, 1, tz="UTC")


def load(context: Any, **kwargs: Any) -> None:
    pass


def secret_dag(password: str = "hunter2", api_key: str = "k-1") -> DAG:
    with DAG("creds", schedule=None, start_date=START) as dag:
        a = BashTask("a", "psql", env={"DB_PASSWORD": password, "HOST": "db"})
        PythonTask("b", load, op_kwargs={"api_key": api_key, "up": a.output, "n": 1})  # not JSON: recorded as repr
        BashTask.partial(task_id="m", env={"Authorization": "Bearer t-1"}).expand(bash_command=["echo 1", "echo 2"])
        PythonTask.partial(task_id="p", python_callable=load).expand(op_kwargs=[{"token": "t-a"}, {"token": "t-b"}])
    return dag


def test_a_dag_without_secret_looking_arguments_keeps_its_version_hash() -> None:
    with DAG("plain", schedule="@daily", start_date=START) as dag:
        a = BashTask("a", "echo $HOST", env={"HOST": "db.internal"})
        PythonTask("b", load, op_kwargs={"table": "orders", "up": a.output})
        BashTask.partial(task_id="m").expand(bash_command=["echo 1", "echo 2"])
    assert [t["definition"] for t in structure_of(dag)["tasks"]] == [
        dag.tasks[tid].definition() for tid in sorted(dag.tasks)]
    # the hash this DAG had before secret-looking arguments were digested
    assert version_of(dag)[0] == "4beb8c6f9e9410e09d20777262eb6deaeb263c0219bd5ef0ed63a684c108b549"


def test_secret_looking_arguments_are_stored_as_digests_and_a_change_makes_a_new_version() -> None:
    version, text = version_of(secret_dag())
    for secret in ("hunter2", "k-1", "Bearer t-1", "t-a", "t-b"):
        assert secret not in text
    tasks = {t["task_id"]: t for t in json.loads(text)["tasks"]}
    assert tasks["a"]["definition"]["env"]["HOST"] == "db"
    assert tasks["a"]["definition"]["env"]["DB_PASSWORD"].startswith("secret:sha256:")
    assert "XComRef('a', 'return_value')" in tasks["b"]["definition"]["op_kwargs"]
    assert tasks["p"]["expand"][0][1]["literal"] == 2  # what the scheduler reads of it is kept
    assert version_of(secret_dag())[0] == version
    assert version_of(secret_dag(password="hunter3"))[0] != version
    assert version_of(secret_dag(api_key="k-2"))[0] != version


def test_shown_secret_looking_arguments_are_stars_also_in_versions_stored_in_clear() -> None:
    shown = masked(json.loads(version_of(secret_dag())[1]))
    text = json.dumps(shown)
    assert "secret:sha256:" not in text
    tasks = {t["task_id"]: t for t in shown["tasks"]}
    assert tasks["a"]["definition"]["env"] == {"DB_PASSWORD": "***", "HOST": "db"}
    assert tasks["b"]["definition"]["op_kwargs"] == "{'api_key': '***', 'up': XComRef('a', 'return_value'), 'n': 1}"
    assert tasks["m"]["definition"]["env"] == {"Authorization": "***"}
    assert tasks["p"]["expand"][0][1]["values"] == [{"token": "***"}, {"token": "***"}]
    legacy = {"dag_id": "creds", "tasks": [{"task_id": "a", "definition": {"env": {"DB_PASSWORD": "hunter2"}}}]}
    assert masked(legacy)["tasks"][0]["definition"]["env"] == {"DB_PASSWORD": "***"}


def test_compared_with_the_version_before_a_changed_secret_reads_changed() -> None:
    old = json.loads(version_of(secret_dag())[1])
    new = json.loads(version_of(secret_dag(password="hunter3"))[1])
    env = {t["task_id"]: t for t in masked(new, compare_to=old)["tasks"]}["a"]["definition"]["env"]
    assert env == {"DB_PASSWORD": "*** (changed)", "HOST": "db"}
    same = {t["task_id"]: t for t in masked(old, compare_to=old)["tasks"]}["a"]["definition"]["env"]
    assert same["DB_PASSWORD"] == "***"
    # a version stored before secrets were digested holds it in clear: the same secret is not `changed`
    legacy = json.loads(json.dumps(old).replace(old["tasks"][0]["definition"]["env"]["DB_PASSWORD"], "hunter2"))
    assert {t["task_id"]: t for t in masked(old, compare_to=legacy)["tasks"]}["a"]["definition"]["env"][
        "DB_PASSWORD"] == "***"
