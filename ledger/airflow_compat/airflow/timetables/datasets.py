"""`airflow.timetables.datasets`."""

from ledger.datasets import DatasetOrTimeSchedule

__all__ = ["DatasetOrTimeSchedule"]
