"""What the scheduler records of a sensor's tries (scheduler/loop/flow_events.py): one `sensor_checked` event per
check, without a database."""

from __future__ import annotations

from ledger.core.states import TaskState
from ledger.scheduler.loop.flow_events import sensor_checked
from ledger.store.tasks import Outcome
from tests.ledger.test_sensor_rules import START, check_until_done, context, sensor


def test_each_check_of_a_poke_try_is_an_event() -> None:
    made, _clock, _slept = sensor([False, False, True], poke_interval=30)
    ctx = context()
    check_until_done(made, ctx, made.poke)
    pushed = list(ctx.xcom_values["wait"].items())
    rows = sensor_checked("d", 1, "wait", Outcome(7, 1, TaskState.SUCCESS, START), TaskState.SUCCESS, pushed,
                          now=START, actor="test")
    assert [(r["details"]["checks"], r["details"]["state"]) for r in rows] == [
        (1, "waiting"), (2, "waiting"), (3, "success")]
    assert [r["details"].get("checked_at") for r in rows] == [START.isoformat(), START.add(seconds=30).isoformat(),
                                                              None]
