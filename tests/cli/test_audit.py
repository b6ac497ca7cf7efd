"""`ledger audit` through the real command: a real scheduler's history verifies; an export of it is checked with no
database, by `ledger audit verify --bundle` and by the script docs/concepts.md gives (run with no ledger on its
path), signed with LEDGER_AUDIT_KEY; a changed export fails both, exit 3 (a break found); bad input is one line
and exit 1 (refused), so that a job running verify tells an edited history from a misspelt name."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli

KEY = "11" * 32  # an Ed25519 private key, as LEDGER_AUDIT_KEY holds it
DAG_FILE = """
    import pendulum
    from ledger import DAG, BashTask
    with DAG("daily", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
             end_date=pendulum.datetime(2024, 1, 4, tz="UTC"), catchup=True) as dag:
        BashTask("a", "echo a") >> BashTask("b", "echo b")
"""


def docs_script(tmp_path: Path) -> Path:
    text = (REPO / "docs" / "concepts.md").read_text()
    found = re.search(r'```python\n("""Check a ledger audit export.*?)```', text, re.S)
    assert found, "docs/concepts.md gives the export's checking script"
    script = tmp_path / "verify_export.py"
    script.write_text(found.group(1))
    return script


def check_without_ledger(script: Path, export: Path) -> subprocess.CompletedProcess[str]:
    # -I: isolated, no PYTHONPATH, no user site, not the current folder: ledger is not importable
    return subprocess.run([sys.executable, "-I", str(script), str(export)], capture_output=True, text=True,
                          cwd=script.parent, timeout=60, check=False)


@pytest.fixture
def history(ready_cli: Cli) -> Cli:
    ready_cli.write_dag("daily.py", DAG_FILE)
    done = ready_cli.run("scheduler", "--exit-when-idle")
    assert done.exit_code == 0, done.output
    return ready_cli


def test_a_real_history_verifies_and_its_signed_export_is_checked_without_a_database(history: Cli,
                                                                                      tmp_path: Path) -> None:
    assert history.ok("audit", "verify").startswith("verified: ")
    export = tmp_path / "daily.audit.json"
    wrote = history.run("audit", "export", "daily", "--start", "2024-01-02", "--end", "2024-01-03", "-o",
                        str(export), LEDGER_AUDIT_KEY=KEY)
    assert wrote.exit_code == 0 and wrote.stdout.startswith(f"wrote {export}: 2 run(s), "), wrote.output
    doc = json.loads(export.read_text())
    public = doc["signature"]["public_key"]
    assert [r["logical_date"][:10] for r in doc["runs"]] == ["2024-01-02", "2024-01-03"]
    assert history.ok("audit", "verify", "--bundle", str(export), "--key", public).startswith("verified: 1 chain(s)")
    script = docs_script(tmp_path)
    checked = check_without_ledger(script, export)
    assert checked.returncode == 0 and checked.stdout.startswith("ok: "), checked.stdout + checked.stderr

    doc["runs"][0]["state"] = "failed"  # the file changed after it went out
    export.write_text(json.dumps(doc))
    refused = history.run("audit", "verify", "--bundle", str(export), "--key", public)
    assert refused.exit_code == 3
    assert re.match(r"daily: run \d+ is not what its last event \(\d+\) recorded \(state 'success' -> 'failed'\)",
                    refused.stdout), refused.output
    checked = check_without_ledger(script, export)
    assert checked.returncode == 3 and "is not what its last event recorded" in checked.stdout

    doc["runs"][0]["state"] = "success"
    doc["head"]["hash"] = "0" * 64  # a rewritten chain's head: the signature no longer holds
    export.write_text(json.dumps(doc))
    refused = history.run("audit", "verify", "--bundle", str(export))
    assert refused.exit_code == 3 and "the signature of the export's head does not hold" in refused.stdout


def test_a_state_changed_in_the_database_fails_verify_naming_the_run(history: Cli) -> None:
    with sqlite3.connect(history.home / "ledger.db") as db:
        db.execute("UPDATE dag_run SET state = 'failed' WHERE id = 2")
    refused = history.run("audit", "verify", "daily")
    assert refused.exit_code == 3
    assert refused.stdout.splitlines()[0].startswith("daily: run 2 is not what its last event (")
    assert refused.stderr.startswith("1 break(s); verified: 1 chain(s)")


BAD_INPUT = [
    (("audit", "verify", "nope"), "Error: no DAG named 'nope'; run `ledger dags list` to see known DAGs"),
    (("audit", "verify", "--since", "99999"), "Error: --since 99999: there is no event 99999"),
    (("audit", "verify", "--bundle", "missing.json"), "Error: no file missing.json"),
    (("audit", "export", "nope", "--start", "2024-01-01", "--end", "2024-01-02"),
     "Error: no DAG named 'nope'; run `ledger dags list` to see known DAGs"),
    (("audit", "export", "daily", "--start", "2024-01-03", "--end", "2024-01-01"), "Error: --start "),
]


def test_bad_input_is_one_line_and_a_non_zero_exit(history: Cli, tmp_path: Path) -> None:
    for args, message in BAD_INPUT:
        refused = history.run(*args)
        assert refused.exit_code == 1 and refused.stdout == "", args
        assert refused.stderr.startswith(message) and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "ledger-audit-export/1", "dag_id": "daily", "events": [{"id": 1}]')
    refused = history.run("audit", "verify", "--bundle", str(broken))
    assert refused.exit_code == 1 and refused.stderr.startswith(f"Error: {broken} is not an audit export: ")
    broken.write_text('{"format": "ledger-audit-export/1", "dag_id": "daily", "events": [{"id": 1}]}')
    refused = history.run("audit", "verify", "--bundle", str(broken))
    assert refused.exit_code == 1 and refused.stderr.strip() == "Error: the export is corrupted: it has no 'head'"
    refused = history.run("audit", "export", "daily", "--start", "2024-01-01", "--end", "2024-01-02",
                          "-o", str(tmp_path / "x.json"), LEDGER_AUDIT_KEY="not-a-key")
    assert refused.exit_code == 1 and not (tmp_path / "x.json").exists()
    assert refused.stderr.strip() == "Error: LEDGER_AUDIT_KEY must be an Ed25519 private key: 64 hex digits"


def test_an_upgrade_chains_the_history_it_finds_and_a_downgrade_says_what_it_drops(history: Cli) -> None:
    down = history.run("db", "downgrade", "0012")
    said = down.stdout.splitlines()  # each migration undone says what it drops, the newest first
    assert down.exit_code == 0, down.stdout
    chains = next(i for i, line in enumerate(said) if line.startswith("dropping the events' hash chains (columns "
                                                                      "seq, prev_hash,"))
    assert said[chains - 1].startswith("dropping the dataset tallies"), down.stdout
    assert said[chains + 1].startswith("downgraded "), down.stdout
    with sqlite3.connect(history.home / "ledger.db") as db:  # history written while no chain was kept
        db.execute("UPDATE dag_run SET state = 'failed' WHERE id = 2")
        db.execute("INSERT INTO event (at, kind, actor, dag_id, run_id, details) "
                   "VALUES ('2024-03-10 12:00:00', 'run_marked', 'operator', 'daily', 2, '{}')")
    history.ok("db", "upgrade")
    (stopped,) = history.json("events", "--kind", "audit_stopped")  # the downgrade's trace, naming the head it had
    assert stopped["dag_id"] == "daily" and len(stopped["details"]["head_hash"]) == 64, stopped
    started = history.json("events", "--kind", "audit_started")
    assert [(e["dag_id"], e["details"]["runs_before"]) for e in started] == [("daily", 4)]
    said = history.ok("audit", "verify").splitlines()  # clean, but not silent: one line for the restarted chain
    assert said[0] == (f"daily: chain restarted at event {started[0]['id']} (audit_started): history before it was "
                       f"not verified ({started[0]['details']['events_before']} event(s)); `ledger db downgrade` "
                       f"dropped the chain at event {stopped['id']} (audit_stopped)"), said
    assert said[1].startswith("verified: 1 chain(s)") and len(said) == 2  # no event without a DAG yet
    with sqlite3.connect(history.home / "ledger.db") as db:  # verified history begins there: a change after it
        db.execute("UPDATE dag_run SET state = 'success' WHERE id = 2")
    refused = history.run("audit", "verify")
    assert refused.exit_code == 3 and refused.stdout.splitlines()[0] == said[0]  # the notice, then the break
    assert refused.stdout.splitlines()[1].startswith(
        f"daily: run 2 is not what its last event ({started[0]['id']}) recorded (state 'failed' -> 'success')")
