"""`airflow.timetables.datasets`."""

from ledger.sdk.datasets import DatasetOrTimeSchedule

__all__ = ["DatasetOrTimeSchedule"]
