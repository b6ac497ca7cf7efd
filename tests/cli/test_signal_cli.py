"""`ledger signal send|list` through the real console script."""

from __future__ import annotations

import pytest

from tests.conftest import Cli


def test_send_prints_the_version_and_list_shows_the_signals_as_json(ready_cli: Cli) -> None:
    cli = ready_cli
    assert cli.ok("signal", "send", "orders.ready", "2024-03-01").strip() == "signal orders.ready version 1 (id 1)"
    assert cli.ok("signal", "send", "other", "x").strip() == "signal other version 1 (id 2)"
    assert cli.ok("signal", "send", "orders.ready", "2024-03-02", "--meta", '{"rows": 12}').strip() \
        == "signal orders.ready version 2 (id 3)"
    signals = cli.json("signal", "list")
    assert [(s["id"], s["key"], s["version"], s["value"]) for s in signals] == [
        (1, "orders.ready", 1, "2024-03-01"), (2, "other", 1, "x"), (3, "orders.ready", 2, "2024-03-02")]
    first = signals[0]
    assert set(first) == {"id", "key", "version", "value", "sender", "sent_at", "meta"}
    assert isinstance(first["id"], int) and isinstance(first["version"], int)
    assert first["sender"].startswith("cli:") and "@" in first["sender"]
    assert first["sent_at"].endswith("+00:00") and first["meta"] is None
    assert signals[2]["meta"] == {"rows": 12}
    by_key = cli.json("signal", "list", "orders.ready", "--since", "1")
    assert [(s["version"], s["value"]) for s in by_key] == [(2, "2024-03-02")]
    assert [s["id"] for s in cli.json("signal", "list", "--since", "2")] == [3]  # without a key: an id
    assert cli.json("signal", "list", "nothing.yet") == []
    table = cli.ok("signal", "list", "orders.ready")
    assert "orders.ready" in table and "2024-03-02" in table and "other" not in table


def test_signals_appear_in_the_events_as_signal_sent(ready_cli: Cli) -> None:
    ready_cli.ok("signal", "send", "audit.me", "hello")
    [event] = [e for e in ready_cli.json("events") if e["kind"] == "signal_sent"]
    assert event["actor"].startswith("cli:")
    assert event["details"] == {"key": "audit.me", "version": 1, "value": "hello", "signal_id": 1, "meta": None}
    assert [e["kind"] for e in ready_cli.json("events", "--kind", "signal_sent")] == ["signal_sent"]


BAD_INPUT = [
    (("signal", "send", "", "v"), "signal key '' is empty"),
    (("signal", "send", "a b", "v"), "signal key 'a b' has characters outside letters, digits and _ . : / -"),
    (("signal", "send", "k" * 201, "v"), "is 201 characters; the limit is 200"),
    (("signal", "send", "k", "x" * 70000), "signal value is 70000 bytes; the limit is 65536"),
    (("signal", "send", "k", "v", "--meta", "[1]"), "--meta must be a JSON object"),
    (("signal", "send", "k", "v", "--meta", "{"), "--meta is not valid JSON"),
    (("signal", "list", "--since", "-1"), "--since must be 0 or more"),
    (("signal", "list", "k", "--since", "-3"), "--since must be 0 or more"),
    (("signal", "list", "bad key"), "has characters outside"),
]


def test_bad_input_is_one_line_a_non_zero_exit_and_stores_nothing(ready_cli: Cli) -> None:
    before = ready_cli.ok("events", "--json")
    for args, message in BAD_INPUT:
        result = ready_cli.fails(*args)  # one line on stderr, non-zero exit, no traceback
        assert message in result.stderr, (args[:3], result.stderr)
    assert ready_cli.json("signal", "list") == []
    assert ready_cli.ok("events", "--json") == before


def test_signal_commands_on_a_missing_database_say_so_in_one_line(cli: Cli) -> None:
    assert "ledger db upgrade" in cli.fails("signal", "send", "k", "v").stderr
    assert "ledger db upgrade" in cli.fails("signal", "list").stderr
    assert not (cli.home / "ledger.db").exists()


@pytest.mark.postgres
def test_send_and_list_on_postgres(cli: Cli, migrated_postgres_url: str) -> None:
    cli.env["LEDGER_DATABASE_URL"] = migrated_postgres_url
    assert cli.ok("signal", "send", "pg.key", "one").strip() == "signal pg.key version 1 (id 1)"
    assert cli.ok("signal", "send", "pg.key", "two").strip() == "signal pg.key version 2 (id 2)"
    assert [(s["version"], s["value"]) for s in cli.json("signal", "list", "pg.key")] == [(1, "one"), (2, "two")]
    assert cli.fails("signal", "send", "pg.key", "x" * 70000).exit_code == 2  # a usage error
    assert len(cli.json("signal", "list")) == 2
