"""The rule of a backfill's cancel for each date (ledger/core/backfill_cancel.py, decision 0210)."""

from __future__ import annotations

import pendulum
import pytest

from ledger.core.backfill_cancel import CancelledRun, Displaced, fate, restores

DAY = pendulum.datetime(2024, 3, 1, tz="UTC")


@pytest.mark.parametrize(("state", "displaced", "ended_in", "restored"), [
    ("queued", Displaced(1, "success"), "failed", 1),  # never finished: the green run comes back
    ("running", Displaced(1, "failed"), "failed", 1),  # the run it replaced comes back as it was, red or green
    ("running", Displaced(1, "success"), "success", None),  # every task had succeeded: it stays
    ("queued", None, "failed", None),  # a new date: nothing to give back
    ("queued", Displaced(1, "queued"), "failed", None),  # what it replaced had not finished: not run again
    ("queued", Displaced(1, None), "failed", None),  # not recorded: not guessed
])
def test_a_date_whose_new_run_never_finished_gets_its_finished_displaced_run_back(
        state: str, displaced: Displaced | None, ended_in: str, restored: int | None) -> None:
    run = CancelledRun(2, DAY, state, displaced)
    assert restores(run, ended_in) == restored
    assert (fate(run).restores is not None) == (displaced is not None and displaced.state_before in ("success",
                                                                                                     "failed"))


@pytest.mark.parametrize("state", ["success", "failed", "overridden"])
def test_a_run_that_had_finished_or_was_overridden_later_stays_as_it_is(state: str) -> None:
    f = fate(CancelledRun(2, DAY, state, Displaced(1, "success")))
    assert f.restores is None and ("keeps run 2" in f.says or "overridden later" in f.says)


@pytest.mark.parametrize("ended_in", ["failed", "success"])
def test_a_date_whose_new_run_had_a_try_started_keeps_the_new_run_whatever_it_displaced(ended_in: str) -> None:
    """Its code may have written the date's data: the timeline must name it, not the run before."""
    run = CancelledRun(2, DAY, "running", Displaced(1, "success"), ran=True)
    assert restores(run, ended_in) is None
    f = fate(run)
    assert f.restores is None and "stops and stays" in f.says and "run 1, which it replaced, stays overridden" in f.says
