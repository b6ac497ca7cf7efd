"""The timeline rules, without a database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.errors import TimelineConflict
from ledger.core.timeline import ChainRun, Link, Neighbours, chain_violations, neighbours_in, plan_splice
from tests.conftest import examples

DAY = [datetime(2024, 3, d, tzinfo=UTC) for d in range(1, 29)]


class MemoryTimeline:
    """Applies splice plans the way the store does, on plain values."""

    def __init__(self) -> None:
        self.runs: dict[int, ChainRun] = {}
        self.next_id = 1

    def live(self) -> list[Link]:
        return sorted((Link(r.run_id, r.logical_date) for r in self.runs.values() if r.live),
                      key=lambda link: link.logical_date)

    def add(self, at: datetime, *, replace_live: bool = False) -> int:
        plan = plan_splice(neighbours_in(self.live(), at), replace=replace_live)
        run_id = self.next_id
        self.next_id += 1
        if plan.displaced is not None:
            self.runs[plan.displaced] = replace(self.runs[plan.displaced], live=False, overridden_by=run_id)
        self.runs[run_id] = ChainRun(run_id, at, plan.previous, True)
        if plan.relink is not None:
            self.runs[plan.relink] = replace(self.runs[plan.relink], previous=run_id)
        return run_id


def test_first_run_has_no_previous() -> None:
    t = MemoryTimeline()
    first = t.add(DAY[5])
    assert t.runs[first].previous is None
    assert chain_violations(t.runs.values()) == []


def test_splice_at_the_tail_points_back_at_the_newest_run() -> None:
    t = MemoryTimeline()
    a = t.add(DAY[1])
    b = t.add(DAY[2])
    assert t.runs[b].previous == a


def test_splice_before_the_first_run_becomes_the_new_head_of_history() -> None:
    t = MemoryTimeline()
    later = t.add(DAY[5])
    earlier = t.add(DAY[1])
    assert t.runs[earlier].previous is None
    assert t.runs[later].previous == earlier


def test_splice_into_a_gap_points_the_next_run_at_the_new_one() -> None:
    t = MemoryTimeline()
    a = t.add(DAY[1])
    c = t.add(DAY[9])
    b = t.add(DAY[4])
    assert t.runs[b].previous == a
    assert t.runs[c].previous == b
    assert chain_violations(t.runs.values()) == []


def test_a_second_run_at_a_held_date_is_refused_without_replace() -> None:
    t = MemoryTimeline()
    t.add(DAY[3])
    with pytest.raises(TimelineConflict, match="already holds"):
        t.add(DAY[3])


def test_override_takes_the_displaced_runs_place_and_keeps_its_history() -> None:
    t = MemoryTimeline()
    a = t.add(DAY[1])
    old = t.add(DAY[2])
    c = t.add(DAY[3])
    new = t.add(DAY[2], replace_live=True)
    assert t.runs[old].live is False
    assert t.runs[old].overridden_by == new
    assert t.runs[old].previous == a  # the previous it had is kept
    assert t.runs[new].previous == a
    assert t.runs[c].previous == new
    assert chain_violations(t.runs.values()) == []


def test_chain_violations_reports_a_broken_link() -> None:
    runs = [ChainRun(1, DAY[1], None, True), ChainRun(2, DAY[2], None, True)]
    assert any("run 2" in p for p in chain_violations(runs))


def test_chain_violations_reports_an_orphaned_overridden_run() -> None:
    runs = [ChainRun(1, DAY[1], None, True), ChainRun(2, DAY[1], None, False, overridden_by=None)]
    assert any("overridden run 2" in p for p in chain_violations(runs))


def test_neighbours_in_finds_before_at_and_after() -> None:
    live = [Link(1, DAY[1]), Link(2, DAY[3]), Link(3, DAY[5])]
    assert neighbours_in(live, DAY[3]) == Neighbours(Link(1, DAY[1]), Link(2, DAY[3]), Link(3, DAY[5]))
    assert neighbours_in(live, DAY[0]) == Neighbours(None, None, Link(1, DAY[1]))
    assert neighbours_in(live, DAY[9]) == Neighbours(Link(3, DAY[5]), None, None)


operations = st.lists(st.tuples(st.integers(0, 20), st.booleans()), min_size=1, max_size=60)


@settings(max_examples=examples(300), deadline=None)
@given(operations)
def test_any_sequence_of_splices_and_overrides_keeps_the_invariant(ops: list[tuple[int, bool]]) -> None:
    t = MemoryTimeline()
    for day, replace_live in ops:
        at = DAY[0] + timedelta(days=day)
        held = any(link.logical_date == at for link in t.live())
        if held and not replace_live:
            with pytest.raises(TimelineConflict):
                t.add(at)
            continue
        t.add(at, replace_live=replace_live)
        assert chain_violations(t.runs.values()) == []
    live = t.live()
    # walking previous from the newest live run visits every live run once, newest first
    walked, cursor = [], live[-1].run_id if live else None
    while cursor is not None:
        walked.append(cursor)
        cursor = t.runs[cursor].previous
    assert walked == [link.run_id for link in reversed(live)]
    assert all(t.runs[r].overridden_by in t.runs for r in t.runs if not t.runs[r].live)


@settings(max_examples=examples(300), deadline=None)
@given(st.sets(st.integers(0, 25), max_size=12), st.lists(st.tuples(st.integers(0, 25), st.booleans()),
                                                          min_size=1, max_size=12, unique_by=lambda t: t[0]))
def test_splicing_many_at_once_gives_the_same_chain_as_one_at_a_time(existing: set[int],
                                                                    batch: list[tuple[int, bool]]) -> None:
    from ledger.core.timeline import ChainLink, plan_batch

    one = MemoryTimeline()
    for day in sorted(existing):
        one.add(DAY[0] + timedelta(days=day))
    many = MemoryTimeline()
    many.runs, many.next_id = dict(one.runs), one.next_id
    batch = [(d, rep) for d, rep in batch]
    conflicts = [d for d, rep in batch if d in existing and not rep]
    dates = [DAY[0] + timedelta(days=d) for d, _ in batch]
    window = [ChainLink(r.run_id, r.logical_date, r.previous) for r in many.runs.values() if r.live]
    window.sort(key=lambda link: link.logical_date)
    if conflicts:
        with pytest.raises(TimelineConflict):
            plan_batch(window, dates, [rep for _, rep in batch])
        return
    plan = plan_batch(window, dates, [rep for _, rep in batch])
    for d, rep in batch:  # the reference: one splice at a time
        one.add(DAY[0] + timedelta(days=d), replace_live=rep)
    ids = {i: many.next_id + i for i in range(len(batch))}
    many.next_id += len(batch)

    def resolve(ref: tuple[str, int] | None) -> int | None:
        return None if ref is None else (ids[ref[1]] if ref[0] == "new" else ref[1])

    for i, old in plan.displaced.items():
        many.runs[old] = replace(many.runs[old], live=False, overridden_by=ids[i])
    for i, at in enumerate(dates):
        many.runs[ids[i]] = ChainRun(ids[i], at, resolve(plan.new_previous[i]), True)
    for old, ref in plan.relink.items():
        many.runs[old] = replace(many.runs[old], previous=resolve(ref))
    assert chain_violations(many.runs.values()) == []
    live_one = sorted((r.logical_date, r.previous is None) for r in one.runs.values() if r.live)
    live_many = sorted((r.logical_date, r.previous is None) for r in many.runs.values() if r.live)
    assert live_one == live_many
