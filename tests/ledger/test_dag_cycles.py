"""A DAG with a cycle is refused, and the message shows the cycle as `a >> b >> ... >> a`."""

from __future__ import annotations

import pendulum
import pytest

from ledger import DAG, BashTask
from ledger.core.errors import DagDefinitionError

START = pendulum.datetime(2024, 1, 1, tz="UTC")


def test_a_cycle_is_shown_from_its_first_task_in_id_order() -> None:
    with pytest.raises(DagDefinitionError, match=r"^DAG 'cyclic' has a cycle: b >> c >> d >> b$"), \
            DAG("cyclic", schedule="@daily", start_date=START):
        a, b, c, d = (BashTask(t, "true") for t in "abcd")
        a >> b >> c >> d >> b


def test_a_task_downstream_of_itself_is_a_cycle() -> None:
    with pytest.raises(DagDefinitionError, match=r"has a cycle: a >> a$"), \
            DAG("self", schedule="@daily", start_date=START):
        a = BashTask("a", "true")
        a >> a


def test_a_diamond_is_no_cycle() -> None:
    with DAG("diamond", schedule="@daily", start_date=START) as dag:
        a, b, c, d = (BashTask(t, "true") for t in "abcd")
        a >> [b, c] >> d
    assert sorted(dag.tasks) == ["a", "b", "c", "d"]
