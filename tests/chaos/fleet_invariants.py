"""The invariants of a fleet's run, checked after it from what the tries wrote down (tests/chaos/traced.py) and what
the database records (the tries table, the runs, the event log), whatever faults were injected:

1. no task instance's executions overlap (an execution saw no earlier one alive whose code had not ended, and none
   started before an earlier one's end: an earlier process still making its report durable and exiting after its
   end line, which a worker allows once the outcome is delivered (decision 0315), is no overlap);
2. a try runs once (one start per try number), and at most one of a task instance's executions succeeded;
3. every run ends, and every task instance and try with it;
4. a try that ran to its end is recorded as its outcome (its end line's), and one recorded success ran to its end;
   every execution is a try the tries table holds. "Ran to its end" is "its code wrote its end line", the strictest
   reading the trace allows: a try killed between its end line and its process's exit (its runner's last
   milliseconds) counts as a breach, though it had not ended (decision 0257);
5. no retry is spent on a fault: a try recorded failed failed by its own code (its end line says so), the try
   numbers follow each other, and a task instance failed only by its retries or by lost tries in a row, saying so;
6. the event log explains every state: each lost try has its try_lost event, each failed one its task_failed event,
   each run's end its run_state_changed event (a try that succeeded has no event of its own: the tries table and
   its run's end say it).

check() returns what broke, one line each (empty: everything held), and a summary of what it looked at.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

RUN_ENDS = ("success", "failed")
TI_ENDS = ("success", "failed", "skipped", "upstream_failed")
LOST_IN_A_ROW = "lost in a row (LEDGER_MAX_LOST_TRIES)"


def _moment(text: str) -> datetime:
    """A logical date as the trace or SQLite writes it, as an aware datetime (UTC)."""
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


@dataclass
class Execution:
    """One execution of a try, as its start (and end) lines say."""

    try_number: int
    pid: int
    started: float
    ticks: str  # its process's start time, clock ticks after boot (with the pid, the process)
    ended: float | None = None
    outcome: str | None = None


@dataclass
class Report:
    broken: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        said = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return f"{said}; " + (f"{len(self.broken)} broken" if self.broken else "every invariant held")


def read_trace(trace: Path) -> tuple[dict[tuple[str, str, datetime], list[Execution]], list[str]]:
    """Executions per task instance (dag, task, logical date), in the order they started; and the `alive` lines."""
    by_ti: dict[tuple[str, str, datetime], list[Execution]] = defaultdict(list)
    alive: list[str] = []
    open_ones: dict[tuple[tuple[str, str, datetime], int, int], Execution] = {}
    for line in trace.read_text().splitlines():
        words = line.split()
        if not words:
            continue
        key = (words[1], words[2], _moment(words[3]))
        if words[0] == "alive":
            seen = open_ones.get((key, int(words[6]), int(words[5])))
            if seen is None or seen.ended is None:  # (one whose code had ended, its end line written, was only
                alive.append(line)  # finishing its report and exiting, as a worker lets it: decision 0315)
        elif words[0] == "start":
            run = Execution(int(words[4]), int(words[5]), float(words[6]), words[7])
            by_ti[key].append(run)
            open_ones[(key, run.try_number, run.pid)] = run
        elif words[0] == "end":
            run = open_ones[(key, int(words[4]), int(words[5]))]
            run.ended, run.outcome = float(words[6]), words[7]
    for runs in by_ti.values():
        runs.sort(key=lambda r: r.started)
    return by_ti, alive


def check(trace: Path, database: Path, dag_ids: list[str]) -> Report:
    report = Report()
    broken = report.broken
    by_ti, alive = read_trace(trace)
    marks = ",".join("?" * len(dag_ids))
    with sqlite3.connect(database) as db:
        runs = db.execute(f"SELECT id, dag_id, logical_date, state FROM dag_run WHERE dag_id IN ({marks})",
                          dag_ids).fetchall()
        tis = db.execute(f"SELECT id, run_id, dag_id, task_id, state, try_number, max_tries FROM task_instance "
                         f"WHERE dag_id IN ({marks})", dag_ids).fetchall()
        rows = db.execute(f"SELECT t.task_instance_id, t.try_number, t.state FROM task_try t JOIN task_instance ti "
                          f"ON ti.id = t.task_instance_id WHERE ti.dag_id IN ({marks})", dag_ids).fetchall()
        events = db.execute(f"SELECT kind, run_id, details FROM event WHERE dag_id IN ({marks})", dag_ids).fetchall()
    date_of = {run_id: _moment(date) for run_id, _dag, date, _state in runs}
    tries: dict[int, dict[int, str]] = defaultdict(dict)
    for ti_id, number, state in rows:
        tries[ti_id][number] = state
    told: dict[tuple[str, int, str, int], list[dict[str, object]]] = defaultdict(list)  # (kind, run, task, try)
    run_ends: Counter[tuple[int, str]] = Counter()  # (run, the state an event says it moved to)
    for kind, run_id, details in events:
        data = json.loads(details) if isinstance(details, str) else details
        if isinstance(data, dict) and "task_id" in data and "try_number" in data:
            told[(kind, run_id, str(data["task_id"]), int(data["try_number"]))].append(data)
        if kind == "run_state_changed" and isinstance(data, dict):
            run_ends[(run_id, str(data.get("to")))] += 1
    report.counts.update(runs=len(runs), task_instances=len(tis), tries=len(rows),
                         executions=sum(len(r) for r in by_ti.values()))
    report.counts.update(f"tries {state}" for _ti, _n, state in rows)

    # 1. no overlap
    broken += [f"an execution started while an earlier one of its task instance was alive: {line}" for line in alive]
    # 3. every run ends
    broken += [f"run {run_id} of {dag} did not end: {state}"
               for run_id, dag, _d, state in runs if state not in RUN_ENDS]
    broken += [f"run {run_id} of {dag} ended {state} and its event log does not say so"
               for run_id, dag, _d, state in runs if state in RUN_ENDS and not run_ends[(run_id, state)]]
    known: set[tuple[str, str, datetime]] = set()
    for ti_id, run_id, dag, task, state, _number, max_tries in tis:
        key = (dag, task, date_of[run_id])
        known.add(key)
        name = f"{dag}.{task} of run {run_id}"
        own = tries[ti_id]
        executions = by_ti.get(key, [])
        if state not in TI_ENDS:
            broken.append(f"{name} did not end: {state}")
        # 1. no overlap, 2. a try runs once
        for earlier, later in zip(executions, executions[1:], strict=False):
            if earlier.ended is not None and earlier.ended > later.started:
                broken.append(f"{name}: try {later.try_number} started before try {earlier.try_number} ended")
        starts = Counter(r.try_number for r in executions)
        broken += [f"{name}: try {n} ran {c} times" for n, c in starts.items() if c > 1]
        if sum(1 for r in executions if r.outcome == "success") > 1:
            broken.append(f"{name}: more than one execution succeeded")
        # 4. recorded as it ended
        for r in executions:
            recorded = own.get(r.try_number)
            if recorded is None:
                broken.append(f"{name}: try {r.try_number} ran but the tries table does not hold it")
            elif r.outcome is not None and recorded != r.outcome:
                broken.append(f"{name}: try {r.try_number} ran to its end ({r.outcome}) but is recorded {recorded}")
        ended = {r.try_number for r in executions if r.outcome is not None}
        for n, recorded in own.items():
            if recorded not in TI_ENDS and recorded not in ("lost", "stopped"):
                broken.append(f"{name}: try {n} did not end: {recorded}")
            if recorded == "success" and n not in ended:
                broken.append(f"{name}: try {n} is recorded success but did not run to its end")
            # 5. no retry spent on a fault; 6. the event log explains it
            if recorded == "failed" and not any(r.try_number == n and r.outcome == "failed" for r in executions):
                broken.append(f"{name}: try {n} is recorded failed but its code did not fail (a fault spent a retry)")
            kind = {"lost": "try_lost", "failed": "task_failed"}.get(recorded)
            if kind is not None and not told[(kind, run_id, task, n)]:
                broken.append(f"{name}: try {n} is recorded {recorded} with no {kind} event")
        if sorted(own) != list(range(1, len(own) + 1)):
            broken.append(f"{name}: its try numbers are {sorted(own)}")
        if state == "failed":
            failures = sum(1 for s in own.values() if s == "failed")
            last = own.get(max(own)) if own else None
            said = [str(e.get("reason")) for e in told[("try_lost", run_id, task, max(own, default=0))]]
            if failures < max_tries + 1 and not (last == "lost" and any(LOST_IN_A_ROW in s for s in said)):
                broken.append(f"{name} failed after {failures} failure(s) of its code, with {max_tries} retries, "
                              f"and not by lost tries in a row")
    broken += [f"{dag}.{task} of {date}: it ran but no task instance is recorded"
               for dag, task, date in by_ti if (dag, task, date) not in known]
    return report
