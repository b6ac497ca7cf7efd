"""A remote try's lease (decision 0200): the try's supervisor (the worker's pool process that runs it) holds
`ledger:lease:<task id>` in the result backend's Redis and renews it every third of its length; it fences itself
(kills the try's process group) when it cannot renew it before it ends, when the lease was taken from it, or when
its worker's main process dies. The scheduler declares the try lost only once the lease has ended (plus a grace),
so by then the try is dead.

A lease's value is fixed for the try (who holds it, the pool process and the try's process group, its length):
renewing it is "set it again with its length, if it is missing or still this value", in one Lua script, so a
Redis that restarted without its data gets the lease back from the next renewal, and a lease the scheduler took
(it wrote why) is never renewed over. A supervisor that knows its try is dead writes so (`{"dead": reason}`), and
the scheduler records the try lost at once instead of waiting for the lease to end.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from ledger.infra.workers import lease_key as lease_key  # (the key names `ledger workers` reads are defined there)
from ledger.scheduler.executors.fleet_faults import FaultNotes

# set the lease again (with its length, ms) when it is missing or still ours; 0: it was taken
_RENEW = """local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0"""
# replace our lease with what became of the try (kept KEEP s); 0: it was taken meanwhile
_END = """local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) return 1 end
return 0"""
# a try's claim (its task id's first delivery, SET NX, kept ARGV[2] s), its place in its worker's running set and its
# lease, taken together in one round trip; returns 1, or who holds the claim (a redelivery is refused)
_CLAIM = """if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
redis.call('SADD', KEYS[2], ARGV[3]) redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5]) return 1 end
return redis.call('GET', KEYS[1])"""
PARENT_CHECK = 0.2  # seconds between two looks at whether the worker's main process is still there
ENDED_KEEP = 3600  # seconds a "dead" lease is kept (the scheduler reads it within its next check)


def lease_value(holder: str, pool_pid: int, pgid: int | None, length: float) -> str:
    return json.dumps({"by": holder, "pool": pool_pid, "pgid": pgid, "ms": int(length * 1000)},
                      separators=(",", ":"))


def dead_value(reason: str) -> str:
    return json.dumps({"dead": reason}, separators=(",", ":"))


def taken_value(reason: str) -> str:
    return json.dumps({"taken": reason}, separators=(",", ":"))


def end_lease(client: Any, tid: str, value: str, reason: str) -> bool:
    """Say the try holding this lease is dead (`reason`); False: the lease was taken meanwhile."""
    return bool(client.eval(_END, 1, lease_key(tid), value, dead_value(reason), ENDED_KEEP))


def claim_with_lease(client: Any, tid: str, claim: tuple[str, str, int], running_set: str, value: str,
                     length: float) -> bytes | None:
    """Claim try `tid` (`claim`: its key, this delivery's value, seconds kept) and, when the claim is this one's, add
    it to `running_set` and take its lease (`value`, `length` seconds), in one round trip: the start of a try waits on
    Redis once, not three times. None: claimed and leased; else who holds the claim (bytes; empty: nobody now)."""
    key, mine, keep = claim
    found = client.eval(_CLAIM, 3, key, running_set, lease_key(tid), mine, keep, tid, value, int(length * 1000))
    return None if found == 1 else (found or b"")


class TryLease:
    """The renewing thread of a try's supervisor. `fence` kills the try (its process group), unless it has already
    exited: it returns whether it killed it. A try that exited is never fenced: its outcome stands, and the lease is
    only renewed from then on."""

    def __init__(self, client: Any, tid: str, value: str, length: float, fence: Callable[[], bool | None],
                 parent_pid: int, *, faults: FaultNotes | None = None, holder: str = "") -> None:
        self.client, self.tid, self.value, self.length = client, tid, value, length
        self.faults, self.holder = faults, holder  # renewals that fail, said and counted; the worker's name
        self._fence_try, self.parent_pid = fence, parent_pid
        self.fenced: str | None = None  # why the try was killed here
        self._renewed = time.monotonic()  # when the last renewal that held began (taken(): the claim's write)
        self.guard: Any = None  # what kills the try's process group should this process die (stopped with it)
        self._done = False  # the try has ended: nothing to fence, the lease renewed until its outcome is stored
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fence_with(self, fence: Callable[[], bool | None]) -> None:
        """What kills the try, once it is forked (set before start())."""
        self._fence_try = fence

    def taken(self, began: float) -> None:
        """The lease was written at time.monotonic() `began` (with the try's claim: claim_with_lease)."""
        self._renewed = began

    def due(self) -> bool:
        """Is a renewal due (a third of the lease has passed since the last write that held)?"""
        return time.monotonic() - self._renewed >= self.length / 3

    def renew(self) -> bool:
        """One renewal (raises when Redis does not answer); False: the lease was taken."""
        began = time.monotonic()
        if not self.client.eval(_RENEW, 1, lease_key(self.tid), self.value, int(self.length * 1000)):
            return False
        self._renewed = began
        return True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ledger-try-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing, and let the guard go. Neither is waited for: the thread ends at its next look (it fences
        nothing once stopped), the guard is reaped once it has exited (GroupGuard.release). A try's pool process
        that has stored its outcome is free for the next try at once, not once both were scheduled to end."""
        self._stop.set()
        if self.guard is not None:
            self.guard.release()

    def finished(self) -> None:
        """The try has ended: from now on the lease is only renewed (its outcome is being delivered). The guard is
        let go by `let_guard_go` (the caller says when: decision 0315)."""
        self._done = True

    def let_guard_go(self) -> None:
        """The guard exits without killing anything (reaped by stop(), without waiting for it to exit)."""
        if self.guard is not None:
            self.guard.let_go()

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent_pid

    def end(self, reason: str) -> None:
        """After the try is dead: say so (best effort: otherwise the lease ends by itself)."""
        with contextlib.suppress(Exception):
            end_lease(self.client, self.tid, self.value, reason)

    def _fence(self, reason: str) -> bool:
        """Kill the try for `reason`; False: it had exited by itself already (nothing killed, its outcome stands)."""
        if self._fence_try() is False:
            self._done = True
            return False
        self.fenced = reason
        if self.faults is not None:
            self.faults.say(f"ledger worker {self.holder}: killed try {self.tid}: {reason}")
        return True

    def _run(self) -> None:
        every = self.length / 3
        next_renew = time.monotonic() + every
        while not self._stop.wait(min(PARENT_CHECK, max(0.0, next_renew - time.monotonic()))):
            if self._stop.is_set():  # (stopped between the wait and here: nothing is fenced any more)
                return
            if self.parent_gone() and not self._done and \
                    self._fence(f"its worker's main process (pid {self.parent_pid}) died"):
                return
            if time.monotonic() - self._renewed >= self.length and not self._done and \
                    self._fence(f"its lease could not be renewed within {self.length:g} s (Redis unreachable)"):
                return  # (checked every tick)
            if time.monotonic() < next_renew:
                continue
            try:
                held: bool | None = self.renew()
            except Exception as exc:  # Redis unreachable: again soon, until the lease would have ended
                held = None
                if self.faults is not None:
                    self.faults.failed("lease", f"ledger worker {self.holder}: cannot renew tries' leases in Redis "
                                                f"({{error}}); a try is killed when its lease cannot be renewed "
                                                f"within {self.length:g} s", exc)
            else:
                if self.faults is not None:
                    self.faults.works("lease", f"ledger worker {self.holder}: renewing tries' leases works again")
            if held is False:
                if not self._done:
                    self._fence("its lease was taken by the scheduler")
                return
            next_renew = time.monotonic() + (every if held else min(every, 0.5))
