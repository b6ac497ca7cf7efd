"""Remote tries' logs kept in the database: many in one call, a log recorded again replacing the first, and each
found again by its run, task and try."""

from __future__ import annotations

from typing import Any

from ledger.store import try_logs
from tests.store.test_requeue_unstarted import queued_try


def test_logs_kept_together_are_each_found_by_their_try_and_a_log_kept_again_replaces_the_first(
        session: Any, clock: Any) -> None:
    ti = queued_try(session, clock)
    try_logs.keep(session, [(ti.id, 1, "worker-a", "first try\n"), (ti.id, 2, "worker-b", "second try\n")])
    try_logs.keep(session, [(ti.id, 2, "worker-c", "second try\n"), (ti.id, 2, "worker-c", "second try, masked\n")])
    try_logs.keep(session, [])
    found = [try_logs.find(session, ti.run_id, ti.task_id, ti.map_index, n) for n in (1, 2, 3)]
    assert found == ["first try\n", "second try, masked\n", None]
    assert try_logs.instance_and_log(session, ti.run_id, ti.task_id, ti.map_index, 2) == (ti.id, "second try, masked\n")
