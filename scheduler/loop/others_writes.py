"""Whether another process wrote since the job last looked.

Every write to runs and task instances comes with an event, so a job that sees a new event id it did not write
itself reads every held run again (it forgets its pictures, scheduler/loop/memory.py). It also does so every
poll_interval (the full pass), whatever the events say. On SQLite a loop first asks PRAGMA data_version, which
says whether any other connection committed since this job's last loop transaction began, and then reads no
event at all when none did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from ledger.store import events
from ledger.store import loop as loop_store
from scheduler.loop.cadence import Cadence


@dataclass
class OthersWrites:
    full_pass: Cadence  # read every held run again at least this often
    versioned: bool = False  # PRAGMA data_version tells this job's kept connection from every other
    seen_event: int = 0  # the newest event id when this job's last loop transaction began
    own_events: list[int] = field(default_factory=list)  # ids of the events that transaction appended
    side_events: int = 0  # transactions of this job, not its loops', that appended events (or failed)
    # SQLite: (the kept connection, its PRAGMA data_version, side_events) when the last loop transaction began
    quiet_since: tuple[Any, int, int] | None = None
    _quiet: tuple[Any, int, int] | None = None  # the same, for the loop transaction under way

    def side_transaction(self) -> None:
        """A transaction of the job outside its loop appended events, or a transaction failed: the next loop
        reads the events."""
        self.side_events += 1

    def look(self, session: Session, kept: Any) -> bool:
        """At the start of a loop's transaction: whether to read every held run again (another process committed
        an event since the last loop transaction began, or the full pass is due)."""
        others = self._others_wrote(session, kept)
        if others or self.full_pass.due():
            self.full_pass.done()
            return True
        return False

    def loop_done(self, session: Session) -> int:
        """At the end of a loop's transaction: the events it appended are left out of the next loop's check.
        Returns the newest event id the job has seen (its own events do not wake it)."""
        self.own_events = events.written_ids(session)
        self.quiet_since = self._quiet
        return max([self.seen_event, *self.own_events])

    def others_since(self, session: Session) -> bool:
        """Whether another process appended an event since the loop's transaction began (read now)."""
        return loop_store.events_since(session, self.seen_event, self.own_events)[1]

    def _others_wrote(self, session: Session, kept: Any) -> bool:
        """Whether another process committed an event since this job's last loop transaction began (the events
        that loop appended itself are left out); `seen_event` becomes the newest event id. On SQLite, when no
        other connection committed since the last loop's transaction began (PRAGMA data_version is as it was
        then, on the same connection) and no other transaction of this job appended an event meanwhile, nobody
        can have: the events are not read."""
        if not self.versioned:
            self._quiet = None
            self.seen_event, others = loop_store.events_since(session, self.seen_event, self.own_events)
            return others
        version = (kept, loop_store.data_version(session), self.side_events)
        self._quiet = version
        if version == self.quiet_since:
            self.seen_event = max([self.seen_event, *self.own_events])
            return False
        self.seen_event, others = loop_store.events_since(session, self.seen_event, self.own_events)
        return others
