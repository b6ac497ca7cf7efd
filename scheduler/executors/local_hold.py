"""How long a LocalExecutor's tries may run on the word of a job that has gone silent (decision 0349).

A job holds its runs while its heartbeat is younger than LEDGER_LOCK_TIMEOUT; past it, another scheduler may take
them and give their running tries new ones. A job can be alive and silent: its database unreachable from this host
alone, its loop stalled, its process stopped (SIGSTOP, a frozen container). Its local tries must not run on beside
the new ones, so each heartbeat the job commits moves a deadline on: a fraction of the lock timeout after the moment
the heartbeat's time was read. Its workers read the deadline before they start a try and while it runs: past it, a
worker starts nothing and kills the try it runs, which is recorded lost (no retry spent) by whichever job holds the
run by then. A worker does this on its own, so it holds while the job's process cannot run at all.

The deadline is a time on CLOCK_BOOTTIME (`now()`: the same clock in every process of the host, which unlike
CLOCK_MONOTONIC counts the time the host was suspended, as the clocks takers judge by do), kept in eight bytes of
shared memory (a memfd the executor makes and each worker maps read-only). A job that never sets it (a test, a
benchmark) leaves it at infinity: nothing is ever fenced.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import os
import struct
import tempfile
import time
import weakref

_FORMAT = struct.Struct("d")
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
FENCE_SHARE = 2 / 3  # of the lock timeout: the rest is the margin for the worker's look, the kill and clock skew
LOOK_EVERY = 0.5  # seconds between two looks at the deadline by a worker whose try runs


def now() -> float:
    """The clock deadlines are on (seconds)."""
    return time.clock_gettime(_CLOCK)


def fence_after(lock_timeout: float) -> float:
    """Seconds after its heartbeat's time was read that a job's tries may still run."""
    return lock_timeout * FENCE_SHARE


class Hold:
    """The shared deadline: written by the executor (the job's side), read by its workers."""

    def __init__(self, fd: int, *, writer: bool) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, _FORMAT.size, mmap.MAP_SHARED,
                              mmap.PROT_READ | (mmap.PROT_WRITE if writer else 0))

    @classmethod
    def make(cls) -> Hold:
        """A new deadline at infinity (the executor's side); its fd is passed to the workers it starts."""
        fd = shared_memory("ledger-hold", _FORMAT.size)
        hold = cls(fd, writer=True)
        hold.until(math.inf)
        weakref.finalize(hold, _close_fd, fd)  # (its workers hold their own mappings)
        return hold

    @classmethod
    def attach(cls, fd: int) -> Hold:
        """(In a worker.) Map the deadline read-only, through a descriptor opened read-only (the mapping keeps one,
        which the tries it forks inherit: they cannot write the deadline through it), and close `fd`."""
        try:
            reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # (no /proc: the descriptor as given)
            reader = os.dup(fd)
        try:
            return cls(reader, writer=False)
        finally:
            for one in (fd, reader):  # (the mapping holds its own)
                with contextlib.suppress(OSError):
                    os.close(one)

    def until(self, deadline: float) -> None:
        """Tries may run until `deadline` (now())."""
        self._map[:_FORMAT.size] = _FORMAT.pack(deadline)

    def deadline(self) -> float:
        """The deadline as written (read until two reads agree: a write is eight bytes, not one atomic store)."""
        first: float = _FORMAT.unpack_from(self._map)[0]
        while (again := _FORMAT.unpack_from(self._map)[0]) != first and not (math.isnan(first) and math.isnan(again)):
            first = again
        return first

    def passed(self) -> bool:
        return now() >= self.deadline()



def shared_memory(name: str, size: int) -> int:
    """A descriptor of `size` bytes of memory (zeros) that processes which map it share: a memfd, or where there is
    none an unlinked file. Closed on exec unless passed on."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
    else:
        fd, path = tempfile.mkstemp(prefix=f"{name}-")
        os.unlink(path)
    os.ftruncate(fd, size)
    return fd


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
