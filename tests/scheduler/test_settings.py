"""Scheduler settings: the environment gives defaults, options given on the command line win."""

from __future__ import annotations

import pytest

from ledger.core.errors import ConfigError
from ledger.infra.scheduler_settings import SchedulerSettings
from ledger.infra.settings import bad_values, variables


def test_an_option_given_wins_over_the_same_setting_in_the_environment() -> None:
    env = {"LEDGER_PARALLELISM": "4", "LEDGER_REUSE_WORKERS": "false"}
    settings = SchedulerSettings.from_env(env, parallelism=2, reuse_workers=True)
    assert (settings.parallelism, settings.reuse_workers) == (2, True)


def test_an_option_left_out_keeps_the_environments_value() -> None:
    settings = SchedulerSettings.from_env({"LEDGER_PARALLELISM": "4"}, parallelism=None)
    assert settings.parallelism == 4


def test_a_bad_value_in_the_environment_is_refused_with_its_name() -> None:
    with pytest.raises(ConfigError, match="LEDGER_PARALLELISM"):
        SchedulerSettings.from_env({"LEDGER_PARALLELISM": "many"})


def test_the_started_write_delay_stays_under_the_heartbeat_interval() -> None:
    assert SchedulerSettings.from_env({"LEDGER_STARTED_WRITE_DELAY": "0"}).started_write_delay == 0
    for bad in ("-1", "2", "60"):  # the heartbeat interval is 2 s by default
        with pytest.raises(ConfigError, match="started_write_delay"):
            SchedulerSettings.from_env({"LEDGER_STARTED_WRITE_DELAY": bad})


def test_a_lock_timeout_that_a_healthy_jobs_heartbeats_would_not_keep_is_refused() -> None:
    """A job writes its heartbeat every heartbeat_interval, and its local tries are killed once it has written none
    for two thirds of lock_timeout (decision 0349): the fence must leave room for a few heartbeats (a transaction
    that rolls back, a slow loop)."""
    assert SchedulerSettings.from_env({"LEDGER_LOCK_TIMEOUT": "12"}).lock_timeout == 12  # 6 x 2
    with pytest.raises(ConfigError, match=r"lock_timeout \(11.5 s\) must be at least six times heartbeat_interval"):
        SchedulerSettings.from_env({"LEDGER_LOCK_TIMEOUT": "11.5"})
    assert SchedulerSettings.from_env({"LEDGER_LOCK_TIMEOUT": "3", "LEDGER_HEARTBEAT_INTERVAL": "0.5"}).lock_timeout \
        == 3


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf"])
def test_a_number_that_is_not_finite_is_refused_in_one_line_by_both_readers(raw: str) -> None:
    with pytest.raises(ConfigError, match=f"LEDGER_LOCK_TIMEOUT='{raw}' is not a finite number"):
        SchedulerSettings.from_env({"LEDGER_LOCK_TIMEOUT": raw})
    poll = variables()["LEDGER_POLL_INTERVAL"]  # (a float without a minimum: the startup check's reader)
    assert poll.minimum is None
    assert bad_values({"LEDGER_POLL_INTERVAL": raw}) == [f"LEDGER_POLL_INTERVAL='{raw}' is not a finite number"]
