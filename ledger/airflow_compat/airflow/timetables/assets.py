"""`airflow.timetables.assets`."""

from ledger.sdk.datasets import AssetOrTimeSchedule

__all__ = ["AssetOrTimeSchedule"]
