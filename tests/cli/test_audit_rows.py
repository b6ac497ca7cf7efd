"""`ledger audit verify` through the real command finds edits, made with sqlite3 on the real database file, of the
rows that say which code produced which date (decision 0353): a run's date, data interval, type, backfill, conf
and overriding run (checked against the events that state them), a finished or overridden run's tries (state and
version) and lineage writes (in its cover's digests); an export with a run removed or a date edited fails both
`verify --bundle` and the script docs/concepts.md gives; an export of a range with no runs verifies."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_audit import check_without_ledger, docs_script
from tests.conftest import Cli

DAG_FILE = """
    import pendulum
    from ledger import DAG, BashTask, PythonTask

    def load(context):
        context.record_write("sales", context.logical_date.date().isoformat(), rows=10)

    with DAG("daily", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
             end_date=pendulum.datetime(2024, 1, 4, tz="UTC"), catchup=True) as dag:
        PythonTask("load", load) >> BashTask("b", "echo b")
"""


@pytest.fixture
def history(ready_cli: Cli) -> Cli:
    """Scheduled runs 1-4 (2024-01-01 to 01-04), then a backfill that reprocesses 01-02: run 5 overrides run 2."""
    ready_cli.write_dag("daily.py", DAG_FILE)
    done = ready_cli.run("scheduler", "--exit-when-idle")
    assert done.exit_code == 0, done.output
    done = ready_cli.run("backfill", "daily", "--start", "2024-01-02", "--end", "2024-01-02", "--reprocess",
                         "completed", "--yes")
    assert done.exit_code == 0, done.output
    with sqlite3.connect(ready_cli.home / "ledger.db") as db:
        runs = db.execute("SELECT id, state, run_type, overridden_by FROM dag_run ORDER BY id").fetchall()
        writes = db.execute("SELECT count(*) FROM lineage_write").fetchone()[0]
    assert runs == [(1, "success", "scheduled", None), (2, "overridden", "scheduled", 5),
                    (3, "success", "scheduled", None), (4, "success", "scheduled", None),
                    (5, "success", "backfill", None)]
    assert writes == 5
    return ready_cli


def last_event(cli: Cli, run_id: int, kind: str | None = None) -> int:
    with sqlite3.connect(cli.home / "ledger.db") as db:
        where = "" if kind is None else f" AND kind = '{kind}'"
        return int(db.execute(f"SELECT max(id) FROM event WHERE run_id = ?{where}", (run_id,)).fetchone()[0])


def tampered(cli: Cli, *statements: str) -> list[str]:
    """Make the edits in a copy of the database, verify it, and put the database back as it was."""
    path = cli.home / "ledger.db"
    pristine = cli.home.parent / "pristine.db"
    with sqlite3.connect(path) as live, sqlite3.connect(pristine) as saved:
        live.backup(saved)
    try:
        with sqlite3.connect(path) as db:
            for sql in statements:
                db.execute(sql)
        refused = cli.run("audit", "verify", "daily")
        assert refused.exit_code == 3, refused.output
        assert refused.stderr.startswith(f"{len(refused.stdout.splitlines())} break(s); verified: 1 chain(s)")
        return refused.stdout.splitlines()
    finally:
        with sqlite3.connect(pristine) as saved, sqlite3.connect(path) as live:
            saved.backup(live)


def test_edits_of_a_runs_date_type_conf_and_overrider_fail_verify_naming_the_run_and_the_event(
        history: Cli) -> None:
    assert history.ok("audit", "verify").startswith("verified: ")
    created = {run: last_event(history, run, "run_created") for run in (3, 4, 5)}
    overridden = last_event(history, 2, "run_overridden")
    found = tampered(
        history,
        "UPDATE dag_run SET overridden_by = NULL WHERE id = 2",
        "UPDATE dag_run SET logical_date = '2024-02-03 00:00:00.000000', data_interval_start = "
        "'2024-02-03 00:00:00.000000', data_interval_end = '2024-02-04 00:00:00.000000' WHERE id = 3",
        """UPDATE dag_run SET conf = '{"rows": 1}' WHERE id = 4""",
        "UPDATE dag_run SET run_type = 'manual', backfill_id = NULL WHERE id = 5")
    assert found[0] == (f"daily: run 2 is not what event {overridden} (run_overridden) recorded of it "
                        "(overridden_by 5 -> None): no event explains it")
    assert found[1] == (f"daily: run 3 is not what event {created[3]} (run_created) recorded of it (logical_date "
                        "'2024-01-03T00:00:00.000000Z' -> '2024-02-03T00:00:00.000000Z', data_interval_start "
                        "'2024-01-03T00:00:00.000000Z' -> '2024-02-03T00:00:00.000000Z', data_interval_end "
                        "'2024-01-04T00:00:00.000000Z' -> '2024-02-04T00:00:00.000000Z'): no event explains it")
    assert re.fullmatch(rf"daily: run 4 is not what event {created[4]} \(run_created\) recorded of it \(conf_sha256 "
                        r"None -> '[0-9a-f]{12}\.\.\.'\): no event explains it", found[2]), found[2]
    assert re.fullmatch(rf"daily: run 5 is not what event {created[5]} \(run_created\) recorded of it \(run_type "
                        r"'backfill' -> 'manual', backfill_id \d+ -> None\): no event explains it", found[3]), found[3]
    assert len(found) == 4


def test_edits_of_a_runs_tries_and_lineage_writes_fail_verify_naming_the_run_and_its_last_event(
        history: Cli) -> None:
    last = {run: last_event(history, run) for run in (1, 2, 3, 4)}
    found = tampered(
        history,
        "UPDATE task_try SET dag_version = 'deadbeef' WHERE task_instance_id IN "
        "(SELECT id FROM task_instance WHERE run_id = 1)",
        "UPDATE task_instance SET state = 'failed' WHERE run_id = 2",  # the overridden run's (decision 0353)
        "UPDATE lineage_write SET dag_version = 'deadbeef', rows = 999 WHERE run_id = 3",
        "UPDATE task_try SET state = 'failed' WHERE task_instance_id IN "
        "(SELECT id FROM task_instance WHERE run_id = 4)")
    assert found == [
        f"daily: run 1 is not what its last event ({last[1]}) recorded (its tries' states or versions): no event "
        "explains it",
        f"daily: run 2 is not what its last event ({last[2]}) recorded (its task instances' tries or outcomes): no "
        "event explains it",
        f"daily: run 3 is not what its last event ({last[3]}) recorded (its lineage writes): no event explains it",
        f"daily: run 4 is not what its last event ({last[4]}) recorded (its tries' states or versions): no event "
        "explains it"]


def export(cli: Cli, tmp_path: Path, start: str, end: str) -> tuple[Path, dict]:
    path = tmp_path / f"daily-{start}.audit.json"
    wrote = cli.run("audit", "export", "daily", "--start", start, "--end", end, "-o", str(path))
    assert wrote.exit_code == 0, wrote.output
    return path, json.loads(path.read_text())


def test_an_export_with_a_run_removed_or_a_date_edited_fails_both_checks(history: Cli, tmp_path: Path) -> None:
    path, doc = export(history, tmp_path, "2024-01-02", "2024-01-03")
    assert [r["id"] for r in doc["runs"]] == [2, 5, 3] and len(doc["try_rows"]) == 6 and len(doc["writes"]) == 3
    script = docs_script(tmp_path)
    assert history.ok("audit", "verify", "--bundle", str(path)).startswith("verified: 1 chain(s)")
    assert check_without_ledger(script, path).returncode == 0

    removed = dict(doc, runs=[r for r in doc["runs"] if r["id"] != 3])
    path.write_text(json.dumps(removed))
    refused = history.run("audit", "verify", "--bundle", str(path))
    assert refused.exit_code == 3
    assert re.fullmatch(r"daily: run 3 is not in the export, but event \d+ \(\w+\) reports it: it was removed",
                        refused.stdout.strip()), refused.stdout
    checked = check_without_ledger(script, path)
    assert checked.returncode == 3 and re.match(r"run 3 is not in the export, but event \d+ reports it",
                                                checked.stdout), checked.stdout

    doc["runs"][2]["logical_date"] = "2024-01-09T00:00:00.000000Z"
    path.write_text(json.dumps(doc))
    refused = history.run("audit", "verify", "--bundle", str(path))
    assert refused.exit_code == 3
    assert re.fullmatch(r"daily: run 3 is not what event \d+ \(run_created\) recorded of it \(logical_date "
                        r"'2024-01-03T00:00:00.000000Z' -> '2024-01-09T00:00:00.000000Z'\): no event explains it",
                        refused.stdout.strip()), refused.stdout
    checked = check_without_ledger(script, path)
    assert checked.returncode == 3 and checked.stdout.strip() == "run 3's logical_date is not what its events recorded"


def test_an_export_of_a_range_with_no_runs_verifies_stating_no_runs(history: Cli, tmp_path: Path) -> None:
    path, doc = export(history, tmp_path, "2030-01-01", "2030-01-02")
    assert doc["runs"] == [] and len(doc["events"]) == 1  # the head's own event: the file ends at its head
    assert history.ok("audit", "verify", "--bundle", str(path)).strip() == \
        "verified: 1 chain(s), 1 event(s), 0 run(s), 0 code blob(s)"
    checked = check_without_ledger(docs_script(tmp_path), path)
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stdout


def test_two_events_whose_places_were_swapped_are_named_out_of_order_not_deleted(history: Cli) -> None:
    with sqlite3.connect(history.home / "ledger.db") as db:
        (a, sa), (b, sb) = db.execute("SELECT id, seq FROM event WHERE dag_id = 'daily' ORDER BY seq "
                                      "LIMIT 2 OFFSET 5").fetchall()
    said = tampered(history, f"UPDATE event SET seq = {sb} WHERE id = {a}",
                    f"UPDATE event SET seq = {sa} WHERE id = {b}")
    assert re.fullmatch(rf"daily: event {b} \(\w+\) follows event {a}, which comes after it \(seq {sb}\), not event "
                        rf"\d+: the events are out of order", said[0]), said


def test_an_event_given_by_its_hash_only_is_named_as_such_when_its_link_breaks(history: Cli, tmp_path: Path) -> None:
    path, doc = export(history, tmp_path, "2024-01-03", "2024-01-03")  # run 3: the events about 4 and 5 are stubs
    stubs = [i for i, e in enumerate(doc["events"]) if "kind" not in e]
    place = next(i for i in stubs if i > 1 and i - 1 not in stubs)  # a stub after a full event, not the first
    stub, gone = doc["events"][place], doc["events"].pop(place - 1)
    path.write_text(json.dumps(doc))
    refused = history.run("audit", "verify", "--bundle", str(path))
    assert refused.exit_code == 3
    assert refused.stdout.splitlines()[0].startswith(
        f"daily: event {stub['id']} (given by its hash only) does not follow event "), refused.stdout
    assert gone["id"] < stub["id"]


def swap_ids(a: int, b: int) -> tuple[str, ...]:
    return (f"UPDATE event SET id = -1 WHERE id = {a}", f"UPDATE event SET id = {a} WHERE id = {b}",
            f"UPDATE event SET id = {b} WHERE id = -1")


def test_two_events_whose_ids_were_swapped_are_named(history: Cli) -> None:
    """The id is what `ledger events` lists and cites by; the hashes do not cover it, the order of places does."""
    with sqlite3.connect(history.home / "ledger.db") as db:
        (a, sa), (b, sb) = db.execute("SELECT id, seq FROM event WHERE dag_id = 'daily' ORDER BY seq "
                                      "LIMIT 2 OFFSET 5").fetchall()
        (head,) = db.execute("SELECT head_id FROM event_chain WHERE chain = 'daily'").fetchone()
    said = tampered(history, *swap_ids(a, b))
    assert re.fullmatch(rf"daily: event {a} \(\w+\) comes after event {b} in the chain \(seq {sa}, then {sb}\) but "
                        r"has a lower id: the events' ids were changed", said[0]), said
    said = tampered(history, *swap_ids(head, head - 1))  # the head's own event
    assert said[0] == (f"daily: the chain ends at event {head - 1} but its head names event {head}: the event's id "
                       "was changed"), said
