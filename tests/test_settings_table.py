"""One settings model (ledger/infra/settings.py): every `LEDGER_*` name the code uses is in its table, the
docs' table is generated from it, and a long-running command checks the whole environment before it starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.core.errors import ConfigError
from ledger.infra.settings import bad_values, known, unknown_names, value, variables
from ledger.infra.values import parse_bool

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bLEDGER_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_ledger_name_in_the_source_is_in_the_table() -> None:
    unlisted = set()
    for folder in ("ledger", "scheduler", "backfill", "cli"):
        for path in (ROOT / folder).rglob("*.py"):
            for name in NAME.findall(path.read_text()):
                if not known(name) and not any(other.startswith(name) for other in variables()):
                    unlisted.add(f"{name} ({path.relative_to(ROOT)})")
    assert not unlisted, f"add these to ledger/infra/settings.py: {sorted(unlisted)}"


def test_the_settings_page_is_generated_from_the_table() -> None:
    done = subprocess.run([sys.executable, "docs/generate_settings_table.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_bad_value_is_one_line_naming_the_variable() -> None:
    env = {"LEDGER_PARALLELISM": "many", "LEDGER_SMTP_SSL": "maybe", "LEDGER_SMTP_PORT": "0",
           "LEDGER_HOME": "/tmp/x", "LEDGER_XCOM_MAX_BYTES": "nan"}
    assert bad_values(env) == [
        "LEDGER_PARALLELISM='many' is not a valid int",
        "LEDGER_SMTP_PORT='0': must be a number of at least 1",
        "LEDGER_SMTP_SSL='maybe' is not a valid bool (true or false)",
        "LEDGER_XCOM_MAX_BYTES='nan' is not a valid int",
    ]
    with pytest.raises(ConfigError, match="LEDGER_SMTP_PORT"):
        value("LEDGER_SMTP_PORT", {"LEDGER_SMTP_PORT": "x"})


def test_a_name_that_is_not_a_setting_is_named_with_the_nearest_one() -> None:
    env = {"LEDGER_PARALELLISM": "3", "LEDGER_DAG_ID": "d", "LEDGER_VAR_SOURCE": "s3://x", "LEDGER_HOME": "/h",
           "LEDGER_ZZZZ": "1"}
    assert unknown_names(env) == [
        "LEDGER_PARALELLISM is not a ledger setting; did you mean LEDGER_PARALLELISM?",
        "LEDGER_ZZZZ is not a ledger setting (docs/settings.md lists them)",
    ]


@pytest.mark.parametrize(("raw", "expected"), [("1", True), ("TRUE", True), (" yes ", True), ("on", True),
                                               ("0", False), ("false", False), ("", False), ("Off", False)])
def test_the_one_boolean_reading(raw: str, expected: bool) -> None:
    assert parse_bool("LEDGER_X", raw) is expected


def test_unset_and_empty_are_none_and_a_set_value_is_typed() -> None:
    assert value("LEDGER_SMTP_PORT", {}) is None
    assert value("LEDGER_SMTP_PORT", {"LEDGER_SMTP_PORT": " "}) is None
    assert value("LEDGER_SMTP_PORT", {"LEDGER_SMTP_PORT": "2525"}) == 2525
    assert value("LEDGER_LOCK_TIMEOUT", {"LEDGER_LOCK_TIMEOUT": "12.5"}) == 12.5


def test_the_scheduler_refuses_to_start_on_a_bad_setting_with_one_line_each(tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(tmp_path), LEDGER_POLL_INTERVAL="soon", LEDGER_SMTP_SSL="maybe",
               LEDGER_PARALELLISM="2")
    done = subprocess.run([sys.executable, "-c", "from ledger.cli.app import run; run()", "scheduler",
                           "--exit-when-idle"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Warning: LEDGER_PARALELLISM is not a ledger setting; did you mean LEDGER_PARALLELISM?",
        "Error: LEDGER_POLL_INTERVAL='soon' is not a valid float",
        "Error: LEDGER_SMTP_SSL='maybe' is not a valid bool (true or false)",
    ]
    assert not (tmp_path / "ledger.db").exists()  # nothing started, nothing created
