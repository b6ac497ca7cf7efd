"""Helpers every retail DAG shares."""

from datetime import timedelta

import pendulum

START = pendulum.datetime(2024, 3, 1, tz="UTC")
DEFAULT_ARGS = {"owner": "retail", "retries": 1, "retry_delay": timedelta(seconds=1)}
ORDERS = "sqlite://warehouse/orders"


def total(rows):
    return sum(amount for _day, _region, amount in rows)
