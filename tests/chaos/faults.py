"""The faults the chaos tests and the soak inject, with real parts: a network namespace whose link is taken down, a
small tmpfs that is filled, Redis restarted without its data, `kill -9` of a process (not its group)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.celery_cluster import RedisServer


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def missing_capability(what: str) -> str | None:
    """Why `what` ("netns", "tmpfs") cannot be made here (None: it can): both need root and the tools."""
    if os.geteuid() != 0:
        return f"{what} needs root"
    tool = {"netns": "ip", "tmpfs": "mount"}[what]
    return None if shutil.which(tool) else f"{what} needs `{tool}`"


@dataclass
class Namespace:
    """A network namespace joined to this one by a veth pair: `host` is this side's address, `inside` the
    namespace's. partition() takes this side's link down; heal() brings it back."""

    name: str
    host: str
    inside: str

    @property
    def link(self) -> str:
        return f"{self.name}h"

    def prefix(self) -> tuple[str, ...]:
        """The command prefix that runs a process inside."""
        return ("ip", "netns", "exec", self.name)

    def partition(self) -> None:
        _ip("link", "set", self.link, "down")

    def heal(self) -> None:
        _ip("link", "set", self.link, "up")


@contextlib.contextmanager
def network_namespace(tag: int) -> Iterator[Namespace]:
    """A namespace named after this process and `tag` (tests run beside other engineers' tests: names and the
    10.<a>.<b>.0/30 link are this process's own), removed afterwards with its link, once the processes still in it
    are killed (stop_inside)."""
    unique = (os.getpid() * 8 + tag) % 60000
    a, b = 200 + unique // 16384, (unique % 16384) // 64
    c = (unique % 64) * 4
    made = Namespace(f"lc{unique}", f"10.{a}.{b}.{c + 1}", f"10.{a}.{b}.{c + 2}")
    try:
        _ip("netns", "add", made.name)
        _ip("link", "add", made.link, "type", "veth", "peer", "name", f"{made.name}w")
        _ip("link", "set", f"{made.name}w", "netns", made.name)
        _ip("addr", "add", f"{made.host}/30", "dev", made.link)
        _ip("link", "set", made.link, "up")
        _ip("netns", "exec", made.name, "ip", "addr", "add", f"{made.inside}/30", "dev", f"{made.name}w")
        _ip("netns", "exec", made.name, "ip", "link", "set", f"{made.name}w", "up")
        _ip("netns", "exec", made.name, "ip", "link", "set", "lo", "up")
        yield made
    finally:
        stop_inside(made.name)
        with contextlib.suppress(RuntimeError):
            _ip("link", "del", made.link)  # (its peer goes with it)
        with contextlib.suppress(RuntimeError):
            _ip("netns", "del", made.name)


def stop_inside(namespace: str, within: float = 30.0) -> None:
    """kill -9 of the process group of every process still in `namespace`, waited for (reaped or a zombie its
    parent reaps), before the namespace goes. Not SIGTERM: a Celery worker's warm shutdown reads the answer to the
    BRPOP its consumer sent on a connection a partition left stale (10 s and more after the link was back, in
    tests/chaos); and once the namespace is gone it waits on its sockets' timeouts."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30)
    pids = [int(pid) for pid in listed.stdout.split()]
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
    deadline = time.monotonic() + within
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Is `pid` running (not gone, not a zombie waiting for its parent to reap it)?"""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@dataclass
class SmallDisk:
    """A tmpfs mounted at `path`; fill() writes a file until the disk is full, free() removes it."""

    path: Path

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 1 << 12, 1):  # (to the last byte)
                with contextlib.suppress(OSError):
                    while True:
                        os.write(fd, b"\0" * size)
        finally:
            os.close(fd)
        if not self.full():
            raise RuntimeError(f"{self.path} is not full after filling it")

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def full(self) -> bool:
        return os.statvfs(self.path).f_bavail == 0


@contextlib.contextmanager
def small_disk(path: Path, size: str = "64m") -> Iterator[SmallDisk]:
    """A tmpfs of `size` mounted at `path` (made if missing), unmounted afterwards."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"mount -t tmpfs: {done.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


def restart_redis_without_its_data(redis: RedisServer) -> None:
    """Redis stopped, its append-only file removed, started again on the same port: it holds nothing."""
    redis.stop()
    for part in redis.folder.iterdir():
        if part.name != "redis.log":
            if part.is_dir():
                shutil.rmtree(part)
            else:
                part.unlink()
    redis.start()


def gone(pid: int, ticks: str) -> bool:
    """Is the process `pid` that started at `ticks` (clock ticks after boot) gone (or a zombie)?"""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X") or fields[19] != ticks


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a worker's pool processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def kill9(proc: subprocess.Popen[Any]) -> None:
    """`kill -9` of the process a user sees (not its process group), waited for."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
