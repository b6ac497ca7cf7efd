"""Remote tries' logs into the remote log store (LEDGER_REMOTE_LOGS, an S3-compatible bucket:
ledger/services/log_store.py)
instead of the database's `try_log` row, when the job that holds their runs has the setting.

The job hands over the ended tries' reports before the transaction that records their ends (no network inside it);
each log that reached the store leaves the job without its text, so the transaction keeps no row for it. A log the
store refused is kept in the database as without the setting, with a line saying so: no log is lost to an outage.
A log is uploaded again if its transaction fails and is retried (the same key: the second replaces the first)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from ledger.core.errors import ConfigError
from ledger.scheduler.runtime.try_report import TryReport
from ledger.services.log_store import RemoteLogStore

UPLOADS = 8  # logs uploaded at once


def keep(store: RemoteLogStore, reports: Mapping[tuple[int, int], TryReport],
         names: Mapping[tuple[int, int], str], say: Callable[[str], None]) -> dict[tuple[int, int], TryReport]:
    """`reports` (by (ti id, try number)), with the logs of those named in `names` (their paths under the store's
    prefix) put in the store and dropped from what the transaction keeps."""
    todo = [(key, names[key], left.log) for key, left in reports.items() if left.log is not None and key in names]
    if not todo:
        return dict(reports)

    def put(one: tuple[tuple[int, int], str, str]) -> str | None:
        try:
            store.put(one[1], one[2])
            return None
        except ConfigError as exc:
            return str(exc)

    if len(todo) == 1:
        failed = [put(todo[0])]
    else:
        with ThreadPoolExecutor(min(UPLOADS, len(todo)), thread_name_prefix="ledger-remote-logs") as pool:
            failed = list(pool.map(put, todo))
    out = dict(reports)
    for (key, _name, _log), error in zip(todo, failed, strict=True):
        if error is None:
            out[key] = dataclasses.replace(out[key], log=None)
        else:
            say(f"the log of try {key[1]} of task instance {key[0]} is kept in the database: {error}")
    return out
