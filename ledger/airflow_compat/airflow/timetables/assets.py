"""`airflow.timetables.assets`."""

from ledger.datasets import AssetOrTimeSchedule

__all__ = ["AssetOrTimeSchedule"]
