"""Typed SQLAlchemy models, one module per table. Behaviour lives in ledger/, not here."""

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
