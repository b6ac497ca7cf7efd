"""Whether another process wrote since the job last looked.

Every write to runs and task instances comes with an event, so a job that sees a new event id it did not write
itself reads every held run again (it forgets its pictures, scheduler/loop/memory.py). It also does so every
poll_interval (the full pass), whatever the events say. On SQLite a loop first asks PRAGMA data_version, which
says whether any other connection committed since this job's last loop transaction began, and then reads no
event at all when none did; a full pass that comes due then reads nothing again either: the database holds only
what the job wrote itself, so every held run is decided again from the job's pictures (the quiet pass, decision
0303), which keeps what the periodic pass is for without the reads (a run settled before one of its time limits
came into view is decided again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from ledger.scheduler.loop.cadence import Cadence
from ledger.store import loop as loop_store


@dataclass(frozen=True)
class Seen:
    """What a loop's transaction saw of others' writes, taken by OthersWrites once it has committed."""
    event: int  # the newest event id when the transaction began
    quiet: tuple[Any, int, int] | None  # SQLite: (the kept connection, its PRAGMA data_version, side_events) then
    full_pass: bool  # every held run is read again in this transaction (others wrote, or the full pass is due)
    quiet_pass: bool = False  # SQLite: the full pass is due and nobody else committed: decided again, not read again
    own_events: tuple[int, ...] = ()  # ids of the events the transaction appended (set at its end)


@dataclass
class OthersWrites:
    full_pass: Cadence  # read every held run again at least this often
    versioned: bool = False  # PRAGMA data_version tells this job's kept connection from every other
    seen_event: int = 0  # the newest event id when this job's last committed loop transaction began
    own_events: tuple[int, ...] = ()  # ids of the events that transaction appended
    side_events: int = 0  # transactions of this job, not its loops', that appended events (or failed)
    quiet_since: tuple[Any, int, int] | None = None  # SQLite: Seen.quiet of the last committed loop transaction
    unquiet: int = 0  # loops that could not tell that nobody else committed since the loop before (see quiet_mark)

    def side_transaction(self) -> None:
        """A transaction of the job outside its loop appended events, or a transaction failed: the next loop
        reads the events."""
        self.side_events += 1

    def look(self, session: Session, kept: Any) -> Seen:
        """At the start of a loop's transaction: whether to read every held run again (another process committed
        an event since the last committed loop transaction began, or the full pass is due), or, on SQLite when the
        full pass is due and no other connection committed since the last loop, to decide them again unread."""
        seen = self._others_wrote(session, kept)
        if seen.quiet is None or seen.quiet != self.quiet_since:
            self.unquiet += 1
        if seen.full_pass or not self.full_pass.due():
            return seen
        if seen.quiet is not None and seen.quiet == self.quiet_since:  # nobody else committed since the last loop
            return dataclasses.replace(seen, quiet_pass=True)
        return dataclasses.replace(seen, full_pass=True)

    def quiet_mark(self) -> int | None:
        """SQLite: a mark that stays the same for as long as every loop found that no other connection committed and
        no other transaction of this job appended an event (or failed) since the loop before: two loop transactions
        with the same mark saw the database as the job alone left it (decision 0309). None where that cannot be
        told (PostgreSQL, one shared connection)."""
        return self.unquiet if self.versioned else None

    @staticmethod
    def loop_done(seen: Seen, own: Sequence[int]) -> Seen:
        """A loop's transaction committed, having appended the events `own`: they are left out of the next loop's
        check."""
        return dataclasses.replace(seen, own_events=tuple(own))

    def committed(self, seen: Seen) -> int:
        """The loop's transaction committed: what it saw is what the next loop compares with. Returns the newest
        event id the job has seen (its own events do not wake it)."""
        self.seen_event, self.own_events, self.quiet_since = seen.event, seen.own_events, seen.quiet
        if seen.full_pass or seen.quiet_pass:
            self.full_pass.done()
        return max([seen.event, *seen.own_events])

    @staticmethod
    def others_since(session: Session, seen: Seen) -> bool:
        """Whether another process appended an event since the loop's transaction began (read now)."""
        return loop_store.events_since(session, seen.event, seen.own_events)[1]

    def _others_wrote(self, session: Session, kept: Any) -> Seen:
        """Whether another process committed an event since this job's last committed loop transaction began (the
        events that loop appended itself are left out), with the newest event id. On SQLite, when no other
        connection committed since the last loop's transaction began (PRAGMA data_version is as it was then, on the
        same connection) and no other transaction of this job appended an event meanwhile, nobody can have: the
        events are not read."""
        own = self.own_events
        if not self.versioned:
            newest, others = loop_store.events_since(session, self.seen_event, own)
            return Seen(newest, None, others)
        version = (kept, loop_store.data_version(session), self.side_events)
        if version == self.quiet_since:
            return Seen(max([self.seen_event, *own]), version, False)
        newest, others = loop_store.events_since(session, self.seen_event, own)
        return Seen(newest, version, others)
