"""DAG ids and task ids follow Airflow's rule (letters, digits, '_', '.', '-'; at most 250): anything else is
refused when the DAG is defined, with a message naming the DAG and the problem."""

from __future__ import annotations

import pendulum
import pytest

from ledger import DAG, BashTask, PythonTask
from ledger.core.errors import DagDefinitionError
from ledger.core.mapping import label, split_label
from ledger.sdk.dag import MAX_KEY_LENGTH, TaskGroup, key_problem

START = pendulum.datetime(2024, 1, 1, tz="UTC")


@pytest.mark.parametrize("key", ["daily", "daily_sales-v2.eu", "a", "x" * MAX_KEY_LENGTH, "café", "load.copy",
                                 "...", "_private", "2024"])
def test_ids_made_of_letters_digits_underscores_dots_and_dashes_are_accepted(key: str) -> None:
    assert key_problem(key) is None


@pytest.mark.parametrize(("key", "problem"), [
    ("", "non-empty string"),
    (None, "non-empty string"),
    (7, "non-empty string"),
    ("x" * (MAX_KEY_LENGTH + 1), "too long (251 characters); at most 250"),
    ("x" * 256, "too long (256 characters)"),
    ("é" * 200, "200 characters, 400 bytes in UTF-8"),
    ("a/b", "letters, digits"),
    ("../../etc", "letters, digits"),
    ("has space", "letters, digits"),
    ("<b>bold</b>", "letters, digits"),
    ("tab\there", "letters, digits"),
    ("trailing\n", "letters, digits"),
    ("load[3]", "'[' or ']'"),
    (".", "'.' or '..'"),
    ("..", "'.' or '..'"),
])
def test_other_ids_are_refused_with_the_problem(key: object, problem: str) -> None:
    found = key_problem(key)
    assert found is not None and problem in found


def test_a_dag_id_of_256_characters_is_refused_in_one_line_naming_it_cut_short() -> None:
    with pytest.raises(DagDefinitionError) as caught:
        DAG("d" * 256, start_date=START)
    message = str(caught.value)
    assert "\n" not in message and "too long (256 characters)" in message
    assert message.startswith("dag_id 'dddd") and len(message) < 160


@pytest.mark.parametrize("task_id", ["a/b", "..", "has space", "<script>x</script>", "t" * 251])
def test_a_task_id_that_could_not_name_a_log_folder_is_refused_naming_the_dag(task_id: str) -> None:
    with DAG("ids", start_date=START), pytest.raises(DagDefinitionError) as caught:
        BashTask(task_id, "echo")
    message = str(caught.value)
    assert message.startswith("DAG 'ids': task_id ") and "\n" not in message


def test_the_group_prefix_counts_in_a_task_ids_length_and_makes_a_dotted_id() -> None:
    with DAG("groups", start_date=START) as dag, TaskGroup("load"):
        BashTask("copy", "echo")
        with pytest.raises(DagDefinitionError, match="too long"):
            BashTask("c" * (MAX_KEY_LENGTH - len("load")), "echo")
    assert list(dag.tasks) == ["load.copy"]


def test_mapped_instances_keep_their_internal_labels() -> None:
    with DAG("mapped", start_date=START) as dag:
        PythonTask.partial(task_id="load", python_callable=print).expand(op_args=[[1], [2], [3], [4]])
    task = dag.tasks["load"]
    assert label(task.task_id, 3) == "load[3]"
    assert split_label("load[3]") == ("load", 3)
    assert task.for_instance(3, {}).op_args == [4]
