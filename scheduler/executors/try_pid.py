"""The pid of the try a LocalExecutor worker has forked, in shared memory (decision 0366).

A worker tells a short try's start with its end, in one message, so for its first moments (up to
`local.SAY_STARTED_AFTER`) the executor has not heard of the try's process. The worker writes the pid here as it
forks the try, before anything else, and zero once the try has ended. An executor that buries the worker (killed
with `kill -9`, the host's OOM killer) before it heard the start reads the pid here, and takes down what the try
started in its process group (a `sleep 60 &` in a BashTask), as it does for a try whose start it heard. The try's
own process dies with its worker (its parent-death signal).

Sixteen bytes of a memfd the executor makes for each worker; the worker maps them writable, the executor read-only.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct

from ledger.scheduler.executors.local_hold import shared_memory

_FORMAT = struct.Struct("qq")  # the pid and its complement: a write cut short reads as no pid


class TryPid:
    def __init__(self, fd: int, *, writer: bool = False) -> None:
        """The slot behind `fd`, mapped to be written (the worker) or only read (the executor: so are the copies of
        it that workers forked from the executor's process inherit)."""
        self._map: mmap.mmap | None = mmap.mmap(fd, _FORMAT.size, mmap.MAP_SHARED,
                                                mmap.PROT_READ | (mmap.PROT_WRITE if writer else 0))

    @staticmethod
    def make_fd() -> int:
        """(The executor's side.) A new slot holding zero: its descriptor, for the worker to be given; the executor
        maps it with TryPid(fd) and may close it then."""
        return shared_memory("ledger-try-pid", _FORMAT.size)

    @classmethod
    def attach(cls, fd: int) -> TryPid:
        """(In a worker.) Map the slot and close `fd` (the mapping keeps what it needs)."""
        try:
            return cls(fd, writer=True)
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)

    def tell(self, pid: int) -> None:
        """The try forked now has this pid (0: none runs)."""
        if self._map is not None:
            self._map[:_FORMAT.size] = _FORMAT.pack(pid, ~pid)

    def pid(self) -> int | None:
        """The pid the worker wrote last (None: none, the slot is closed, or a write was cut short: the worker died
        in the middle of it, or is writing now)."""
        if self._map is None:
            return None
        found, check = _FORMAT.unpack_from(self._map)
        return found if found > 0 and check == ~found else None

    def close(self) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError, ValueError):
                self._map.close()
            self._map = None
