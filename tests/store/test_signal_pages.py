"""The signals page's listing: the newest first, task state signals hidden when asked, and a bounded look among
hidden ones (a page of few shown signals among many hidden ones stays fast), paged by keyset."""

from __future__ import annotations

from typing import Any

from ledger.store import signals
from tests.store.test_timeline_store import T0

HIDDEN = "ledger.task."


def test_hidden_task_signals_are_skipped_within_a_bounded_look_and_paging_reaches_every_shown_one(
        session: Any) -> None:
    keys = ["web.ready"] + [f"{HIDDEN}d.t"] * 7 + ["web.ready", "other.k"] + [f"{HIDDEN}d.t"] * 3
    sent = [signals.send(session, k, "v", sender="test", now=T0).id for k in keys]
    shown = [i for i, k in zip(sent, keys, strict=True) if not k.startswith(HIDDEN)]
    everything, _ = signals.newest_first(session, limit=100)
    assert [s.id for s in everything] == sent[::-1]
    seen: list[int] = []
    before = None
    pages = 0
    while True:
        found, before = signals.newest_first(session, before=before, limit=2, hide_prefix=HIDDEN, scan=4)
        seen += [s.id for s in found]
        pages += 1
        assert all(not s.key.startswith(HIDDEN) for s in found)
        if before is None:
            break
    assert seen == shown[::-1] and pages > 2
    first, older = signals.newest_first(session, limit=2, hide_prefix=HIDDEN, scan=100)
    assert [s.id for s in first] == shown[::-1][:2] and older == shown[::-1][1]
