"""The fleet's invariant checker finds each kind of breach in a trace and a database made up for it (the tables and
columns it reads; real SQLite)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.chaos.fleet_invariants import check

DATE = "2024-01-01T00:00:00Z"
SCHEMA = """
CREATE TABLE dag_run (id INTEGER, dag_id TEXT, logical_date TEXT, state TEXT);
CREATE TABLE task_instance (id INTEGER, run_id INTEGER, dag_id TEXT, task_id TEXT, state TEXT, try_number INTEGER,
                            max_tries INTEGER);
CREATE TABLE task_try (task_instance_id INTEGER, try_number INTEGER, state TEXT);
CREATE TABLE event (kind TEXT, run_id INTEGER, details TEXT, dag_id TEXT);
"""


def made(tmp_path: Path, trace: str, tries: list[str], *, ti_state: str = "success", run_state: str = "success",
         events: tuple[tuple[str, int, str], ...] = ()) -> list[str]:
    """One run of DAG d with one task t and `tries` (their states, try 1 first); what check() finds broken."""
    db_path, trace_path = tmp_path / "ledger.db", tmp_path / "trace"
    trace_path.write_text(trace)
    with sqlite3.connect(db_path) as db:
        db.executescript(SCHEMA)
        db.execute("INSERT INTO dag_run VALUES (1, 'd', '2024-01-01 00:00:00.000000', ?)", (run_state,))
        db.execute("INSERT INTO task_instance VALUES (1, 1, 'd', 't', ?, ?, 1)", (ti_state, len(tries)))
        db.executemany("INSERT INTO task_try VALUES (1, ?, ?)", list(enumerate(tries, 1)))
        db.execute("INSERT INTO event VALUES ('run_state_changed', 1, ?, 'd')", (json.dumps({"to": run_state}),))
        db.executemany("INSERT INTO event VALUES (?, 1, ?, 'd')",
                       [(kind, json.dumps({"task_id": "t", "try_number": n, "reason": why}))
                        for kind, n, why in events])
    return check(trace_path, db_path, ["d"]).broken


def start(n: int, pid: int, at: float) -> str:
    return f"start d t {DATE} {n} {pid} {at} 100{pid}\n"


def end(n: int, pid: int, at: float, outcome: str = "success") -> str:
    return f"end d t {DATE} {n} {pid} {at} {outcome}\n"


def test_a_lost_try_then_a_success_holds_every_invariant(tmp_path: Path) -> None:
    assert made(tmp_path, start(1, 7, 1.0) + start(2, 8, 5.0) + end(2, 8, 6.0), ["lost", "success"],
                events=(("try_lost", 1, "worker w1 stopped renewing its lease"),)) == []


def test_overlapping_executions_and_a_try_run_twice_are_found(tmp_path: Path) -> None:
    broken = made(tmp_path, start(1, 7, 1.0) + f"alive d t {DATE} 1 7 1\n" + start(1, 8, 2.0) + end(1, 8, 3.0)
                  + end(1, 7, 4.0), ["success"])  # (the second saw the first alive as it started: before its start)
    assert "d.t of run 1: try 1 ran 2 times" in broken
    assert "d.t of run 1: try 1 started before try 1 ended" in broken
    assert "d.t of run 1: more than one execution succeeded" in broken
    assert any(b.startswith("an execution started while an earlier one of its task instance was alive") for b in broken)


def test_a_retry_that_starts_while_its_failed_try_only_finishes_its_exit_is_no_overlap(tmp_path: Path) -> None:
    """The worker delivers a try's outcome while its process makes its report durable and exits (decision 0315): a
    retry can start before that process is gone, its code having ended (its end line is written)."""
    assert made(tmp_path, start(1, 7, 1.0) + end(1, 7, 2.0, "failed") + f"alive d t {DATE} 2 7 1\n"
                + start(2, 8, 3.0) + end(2, 8, 4.0), ["failed", "success"],
                events=(("task_failed", 1, "the first try fails"),)) == []


def test_a_try_that_ran_to_its_end_recorded_otherwise_and_a_retry_spent_on_a_fault_are_found(tmp_path: Path) -> None:
    broken = made(tmp_path, start(1, 7, 1.0) + end(1, 7, 2.0) + start(2, 8, 3.0) + end(2, 8, 4.0),
                  ["lost", "failed", "success"], ti_state="failed", run_state="failed",
                  events=(("try_lost", 1, "its job stopped heart-beating"),))
    assert "d.t of run 1: try 1 ran to its end (success) but is recorded lost" in broken
    assert "d.t of run 1: try 2 is recorded failed but its code did not fail (a fault spent a retry)" in broken
    assert "d.t of run 1: try 2 is recorded failed with no task_failed event" in broken
    assert "d.t of run 1: try 3 is recorded success but did not run to its end" in broken
    assert ("d.t of run 1 failed after 1 failure(s) of its code, with 1 retries, and not by lost tries in a row"
            in broken)


def test_a_run_that_did_not_end_and_a_lost_try_the_event_log_does_not_explain_are_found(tmp_path: Path) -> None:
    broken = made(tmp_path, start(1, 7, 1.0), ["lost", "running"], ti_state="running", run_state="running")
    assert "run 1 of d did not end: running" in broken
    assert "d.t of run 1 did not end: running" in broken
    assert "d.t of run 1: try 2 did not end: running" in broken
    assert "d.t of run 1: try 1 is recorded lost with no try_lost event" in broken
