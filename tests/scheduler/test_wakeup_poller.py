"""The job's sleep waits on its handles with a kept selector (wakeup.Poller): it says what
multiprocessing.connection.wait says, from one call to the next, as handles come, go and reuse a descriptor."""

from __future__ import annotations

import os
from multiprocessing import Pipe

from ledger.scheduler.signals.wakeup import Poller


def test_the_poller_returns_the_handles_ready_to_read_as_they_change() -> None:
    poller = Poller()
    mine, theirs = Pipe()
    r, w = os.pipe()
    try:
        assert poller.ready([mine, r], 0) == []
        theirs.send("done")
        assert poller.ready([mine, r], 0) == [mine]  # the same handles: the kept selector
        mine.recv()
        os.write(w, b"x")
        assert poller.ready([mine, r], 0) == [r]
        assert poller.ready([mine], 0) == []  # a handle gone is not waited on
        os.read(r, 1)
        os.close(r)
        os.close(w)
        r, w = os.pipe()  # (likely the same descriptor numbers: a new pipe behind them)
        os.write(w, b"y")
        assert poller.ready([mine, r], 0) == [r]
    finally:
        poller.close()
        for conn in (mine, theirs):
            conn.close()
        for fd in (r, w):
            os.close(fd)


def test_the_poller_returns_nothing_when_nothing_is_ready_within_its_timeout() -> None:
    poller = Poller()
    r, w = os.pipe()
    try:
        assert poller.ready([r], 0.01) == []
    finally:
        poller.close()
        os.close(r)
        os.close(w)
