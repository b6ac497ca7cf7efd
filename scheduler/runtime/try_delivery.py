"""A try's outcome stored in the result backend in one round trip (decision 0325).

Celery's own store of a state (`update_state`, `store_result`) takes two round trips: it reads the state first and
writes nothing over a SUCCESS, then writes the state and publishes it. A pool process that delivered an outcome then
took two more: the rest of the try's log written into its log key for the log's other readers (decision 0316), and the
try taken out of its worker's running set. The next try waits for that pool process (the executor's slots are the
workers' pool processes), and the scheduler for the publication, so all four were on the path from one try's end to
the next one's start.

Here they are one Lua script, run by Redis as one step: the state is written and published unless the key holds a
SUCCESS already (Celery's rule, without the window between its read and its write), the log's rest is written at its
offset (or whole, when the try rewrote what was sent), and the try leaves its worker's running set. The state is the
result backend's: its key (`get_key_for_task`) and its encoding (`encode`, the backend's serializer, JSON) are the
backend's own public calls, and the meta holds the fields Celery writes for a task's state (status, result,
traceback, children, date_done, task_id), so the scheduler, which reads states with `decode_result`, and Celery's own
readers read it as one Celery wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ledger.scheduler.executors.celery_app import KEEP, log_key

# KEYS: the state's key, the log's key, the worker's running set; ARGV: the encoded state, seconds kept, the try's
# task id, the log's offset (-1: the log whole, replacing what was sent; empty: no log), the log's bytes.
# 1: stored; 0: a SUCCESS was there already (the same outcome delivered twice), left as it was.
_STORE = """if ARGV[4] == '-1' then redis.call('SET', KEYS[2], ARGV[5], 'EX', ARGV[2])
elseif ARGV[4] ~= '' and ARGV[5] ~= '' then redis.call('SETRANGE', KEYS[2], ARGV[4], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[2]) end
if KEYS[3] ~= '' then redis.call('SREM', KEYS[3], ARGV[3]) end
local held = redis.call('GET', KEYS[1])
if held then
  local ok, meta = pcall(cjson.decode, held)
  if ok and type(meta) == 'table' and meta['status'] == 'SUCCESS' then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1"""


@dataclass(frozen=True)
class LogRest:
    """The rest of a try's log delivered with its outcome: its bytes at `offset`, or the whole log (`whole`)."""

    offset: int
    data: bytes
    whole: bool = False


def state_meta(tid: str, state: str, result: Any, now: datetime | None = None) -> dict[str, Any]:
    """A task's state as Celery's result backend holds it (the fields it writes when results are not extended)."""
    done = (now or datetime.now(UTC)).isoformat()
    return {"status": state, "result": result, "traceback": None, "children": [], "date_done": done, "task_id": tid}


def store_state(client: Any, backend: Any, tid: str, state: str, result: Any, *, log: LogRest | None = None,
                running_set: str | None = None) -> bool:
    """Store try `tid`'s `state` (its `result`) and publish it, with the rest of its `log` and out of its worker's
    `running_set`, in one round trip; never over a SUCCESS (False: one was stored already). Raises what the client
    raises when Redis does not answer (stored again then: a second store of the same outcome changes nothing)."""
    value = backend.encode(state_meta(tid, state, result))
    offset = "" if log is None else ("-1" if log.whole else str(log.offset))
    data = b"" if log is None else log.data
    return bool(client.eval(_STORE, 3, backend.get_key_for_task(tid), log_key(tid), running_set or "",
                            value, KEEP, tid, offset, data))
