"""The shared slot a LocalExecutor worker writes its forked try's pid into (decision 0366)."""

from __future__ import annotations

import mmap
import os
import struct

import pytest

from ledger.scheduler.executors.try_pid import TryPid


def _slot() -> tuple[TryPid, TryPid, int]:
    """(the worker's side, the executor's side, a spare descriptor of the same slot)."""
    fd = TryPid.make_fd()
    spare = os.dup(fd)
    reader = TryPid(fd)
    writer = TryPid.attach(os.dup(fd))
    os.close(fd)
    return writer, reader, spare


def _close(writer: TryPid, reader: TryPid, spare: int) -> None:
    writer.close()
    reader.close()
    os.close(spare)


def test_the_executor_reads_the_pid_its_worker_wrote_and_none_once_the_try_ended() -> None:
    writer, reader, spare = _slot()
    try:
        assert reader.pid() is None  # a new slot: no try yet
        writer.tell(4242)
        assert reader.pid() == 4242
        writer.tell(0)
        assert reader.pid() is None
    finally:
        _close(writer, reader, spare)


def test_a_write_cut_short_reads_as_no_pid() -> None:
    """The pid goes with its complement: a worker killed in the middle of writing it leaves no pid to kill."""
    writer, reader, spare = _slot()
    raw = mmap.mmap(spare, 16, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        writer.tell(4242)
        raw[:8] = struct.pack("q", 5151)  # the pid's half written, its complement still the last one's
        assert reader.pid() is None
        raw[8:16] = struct.pack("q", ~5151)
        assert reader.pid() == 5151
    finally:
        raw.close()
        _close(writer, reader, spare)


def test_the_executors_side_cannot_write_the_slot() -> None:
    writer, reader, spare = _slot()
    try:
        with pytest.raises(TypeError):  # mmap: a read-only map cannot be written
            reader.tell(1)
        assert reader.pid() is None
    finally:
        _close(writer, reader, spare)
