"""Typed SQLAlchemy models, one module per table. Behaviour lives in ledger/, not here.

The tables themselves are SQLAlchemy Core Tables in ledger/models/tables.py; the mapped classes below map them.
A class is imported (and SQLAlchemy's ORM with it) when it is first asked for, so that a process that reads
through the tables alone (`ledger runs show`, decision 0317) loads neither.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.models.backfill import Backfill
    from ledger.models.base import Base, UtcDateTime
    from ledger.models.callback import Callback
    from ledger.models.code import CodeBlob, CodeBundle
    from ledger.models.dag import Dag
    from ledger.models.dag_file import DagFile
    from ledger.models.dag_run import DagRun
    from ledger.models.dag_version import DagVersion
    from ledger.models.dataset import DatasetConsumed, DatasetEvent, DatasetTally
    from ledger.models.event import Event, EventChain
    from ledger.models.import_error import ImportError_
    from ledger.models.job import Job
    from ledger.models.lineage import LineageWrite
    from ledger.models.pool import Pool
    from ledger.models.secret import Connection, Variable
    from ledger.models.signal import SignalCursor, SignalKey, SignalRecord
    from ledger.models.task_instance import TaskInstance, TaskTry
    from ledger.models.try_log import TryLog
    from ledger.models.user import ApiToken, WebUser
    from ledger.models.xcom import XCom

# each class: the module that defines it
_WHERE = {
    "Backfill": "ledger.models.backfill",
    "Base": "ledger.models.base",
    "UtcDateTime": "ledger.models.base",
    "Callback": "ledger.models.callback",
    "CodeBlob": "ledger.models.code",
    "CodeBundle": "ledger.models.code",
    "Dag": "ledger.models.dag",
    "DagFile": "ledger.models.dag_file",
    "DagRun": "ledger.models.dag_run",
    "DagVersion": "ledger.models.dag_version",
    "DatasetConsumed": "ledger.models.dataset",
    "DatasetEvent": "ledger.models.dataset",
    "DatasetTally": "ledger.models.dataset",
    "Event": "ledger.models.event",
    "EventChain": "ledger.models.event",
    "ImportError_": "ledger.models.import_error",
    "Job": "ledger.models.job",
    "LineageWrite": "ledger.models.lineage",
    "Pool": "ledger.models.pool",
    "Connection": "ledger.models.secret",
    "Variable": "ledger.models.secret",
    "SignalCursor": "ledger.models.signal",
    "SignalKey": "ledger.models.signal",
    "SignalRecord": "ledger.models.signal",
    "TaskInstance": "ledger.models.task_instance",
    "TaskTry": "ledger.models.task_instance",
    "TryLog": "ledger.models.try_log",
    "ApiToken": "ledger.models.user",
    "WebUser": "ledger.models.user",
    "XCom": "ledger.models.xcom",
}


def __getattr__(name: str) -> Any:
    """`from ledger.models import DagRun`: the class, its module imported on first use (PEP 562)."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'ledger.models' has no attribute {name!r}")
    found = getattr(import_module(module), name)
    globals()[name] = found
    return found


__all__ = [
    "ApiToken",
    "Backfill",
    "Base",
    "Callback",
    "CodeBlob",
    "CodeBundle",
    "Connection",
    "Dag",
    "DagFile",
    "DagRun",
    "DagVersion",
    "DatasetConsumed",
    "DatasetEvent",
    "DatasetTally",
    "Event",
    "EventChain",
    "ImportError_",
    "Job",
    "LineageWrite",
    "Pool",
    "SignalCursor",
    "SignalKey",
    "SignalRecord",
    "TaskInstance",
    "TaskTry",
    "TryLog",
    "UtcDateTime",
    "Variable",
    "WebUser",
    "XCom",
]
