"""`ledger` commands for the scenario tests, started from a warm interpreter (decision 0328).

A `ledger` process spends about a second of CPU on its interpreter's start and its imports before it does
anything. `popen` and `run` take the place of subprocess.Popen and subprocess.run for `[LEDGER, ...]`: the command
is forked from one interpreter per test process (tests/launcher_zygote.py) that has the CLI's modules imported,
and becomes the command there (its own pid, argv, environment, working directory, stdin, stdout and stderr, the
console script run as such); the test holds a Popen-like handle (pid, poll, wait, communicate, signals). Only the
start and the imports are shared: whatever the preloaded modules read from the environment at import time is the
same for every command, because a command goes to a warm interpreter only when its environment differs from
that interpreter's in LEDGER_* variables alone (read when a command runs, never at import) and pytest's
PYTEST_CURRENT_TEST. A command whose environment differs beyond those gets a warm interpreter started with its
own. At most MOST run per test process: past them, the least recently used one whose commands have all ended is
closed to make room, so whether a command is forked never depends on which tests ran before in the process (only
on the commands of its own test still running); one that has gone is started again. Any other command, any other
Popen argument, a command `_starts_cold` names, a command in a new environment while MOST warm interpreters each
run one, and every command under LEDGER_TEST_CLI=subprocess run the console script in a subprocess, as before."""

from __future__ import annotations

import array
import atexit
import json
import locale
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import IO, Any

LEDGER = str(Path(sys.executable).with_name("ledger"))
ZYGOTE = str(Path(__file__).with_name("launcher_zygote.py"))
PER_COMMAND = "PYTEST_CURRENT_TEST"  # pytest's, different for each test; nothing reads it at import
SUPPORTED = {"env", "cwd", "stdin", "stdout", "stderr", "text", "start_new_session"}
MOST = 6  # warm interpreters per test process, one per environment (a few tests add a variable of their own)


def _shared(env: dict[str, str]) -> dict[str, str]:
    """The part of an environment the warm interpreter's imports may have read."""
    return {k: v for k, v in env.items() if not k.startswith("LEDGER_") and k != PER_COMMAND}


def _starts_cold(args: list[str]) -> bool:
    """A command that must import a module itself: `ledger worker --metrics-port` puts prometheus_client in its
    multiprocess mode before it first imports it, and the warm interpreter has imported it (the scheduler's
    metrics)."""
    return args[1:2] == ["worker"] and any(a == "--metrics-port" or a.startswith("--metrics-port=") for a in args)


def _interpreter() -> str:
    """The interpreter of the console script's first line (`#!/.../python3`), as the command's would be."""
    with open(LEDGER, "rb") as script:
        first = script.readline().decode().strip()
    return first[2:] if first.startswith("#!") and " " not in first else sys.executable


class Launcher:
    """One warm interpreter (tests/launcher_zygote.py) and the socket its requests go through."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = _shared(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.process = subprocess.Popen([_interpreter(), ZYGOTE, str(theirs.fileno()), LEDGER],
                                            pass_fds=[theirs.fileno()], env=self.env, cwd=Path(LEDGER).parent,
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.control = ours
        self.lock = threading.Lock()
        self.commands: weakref.WeakSet[Launched] = weakref.WeakSet()  # the handles of the commands it forked

    def alive(self) -> bool:
        return self.process.poll() is None

    def idle(self) -> bool:
        """No command of its runs (or none whose handle a test still holds): closing it stops nothing."""
        try:
            return all(command.poll() is not None for command in list(self.commands))
        except RuntimeError:  # gone, and its commands' statuses with it
            return True

    def send(self, request: dict[str, Any], fds: list[int]) -> None:
        with self.lock:
            self.control.sendmsg([json.dumps(request).encode()],
                                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])

    def close(self) -> None:
        self.control.close()  # the zygote ends at the end of its socket
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# by the environment shared by their commands, the least recently used first
_launchers: dict[tuple[tuple[str, str], ...], Launcher] = {}


def _close(key: tuple[tuple[str, str], ...]) -> None:
    launcher = _launchers.pop(key)
    atexit.unregister(launcher.close)
    launcher.close()


def _warm(env: dict[str, str]) -> Launcher | None:
    """The warm interpreter for a command in `env`, started on first use; None: run the console script."""
    if os.environ.get("LEDGER_TEST_CLI") == "subprocess":
        return None
    key = tuple(sorted(_shared(env).items()))
    launcher = _launchers.get(key)
    if launcher is not None and launcher.alive():
        _launchers[key] = _launchers.pop(key)  # (now the most recently used)
        return launcher
    if threading.current_thread() is not threading.main_thread():
        return None  # a warm interpreter dies with the thread that started it (PR_SET_PDEATHSIG)
    if launcher is not None:  # gone: its commands' handles raise when they next ask; a new one takes its place
        _close(key)
    elif len(_launchers) >= MOST:
        unused = next((k for k, warm in _launchers.items() if warm.idle()), None)
        if unused is None:
            return None
        _close(unused)
    launcher = _launchers[key] = Launcher(env)
    atexit.register(launcher.close)
    return launcher


def _descriptor(given: Any, inherited: int, opened: list[int], ours: list[tuple[int, str]], name: str) -> int:
    """The child's descriptor for one of its standard streams (a Popen argument); a pipe's other end is kept in
    `ours` under `name`."""
    if given is None:
        return inherited
    if given == subprocess.DEVNULL:
        fd = os.open(os.devnull, os.O_RDWR)
        opened.append(fd)
        return fd
    if given == subprocess.PIPE:
        read, write = os.pipe()
        mine, theirs = (write, read) if name == "stdin" else (read, write)
        ours.append((mine, name))
        opened.append(theirs)
        return theirs
    return given if isinstance(given, int) else given.fileno()


class Launched:
    """A command forked by the warm interpreter: the parts of subprocess.Popen the tests use. `pid` is the
    command's own process (signals sent to it, or to its group when started in a session of its own, reach the
    command itself); its wait status comes from the warm interpreter, its parent."""

    def __init__(self, launcher: Launcher, args: list[str], env: dict[str, str], cwd: Any = None, stdin: Any = None,
                 stdout: Any = None, stderr: Any = None, text: bool = False, start_new_session: bool = False):
        self.args = args
        self.returncode: int | None = None
        self.encoding = locale.getpreferredencoding(False) if text else None
        opened: list[int] = []
        ours: list[tuple[int, str]] = []
        try:
            fds = [_descriptor(stdin, 0, opened, ours, "stdin"), _descriptor(stdout, 1, opened, ours, "stdout")]
            fds.append(fds[1] if stderr == subprocess.STDOUT else _descriptor(stderr, 2, opened, ours, "stderr"))
            self._reply, theirs = socket.socketpair()
            with theirs:
                launcher.send({"argv": args[1:], "env": env, "cwd": os.path.abspath(cwd or os.getcwd()),
                               "new_session": start_new_session}, [theirs.fileno(), *fds])
        finally:
            for fd in opened:
                os.close(fd)
        self.stdin: IO[Any] | None = None
        self.stdout: IO[Any] | None = None
        self.stderr: IO[Any] | None = None
        for fd, name in ours:
            mode = ("w" if name == "stdin" else "r") + ("" if text else "b")
            setattr(self, name, os.fdopen(fd, mode, encoding=self.encoding))
        self._lines = self._reply.makefile("rb")
        started = self._lines.readline()
        if not started:
            raise RuntimeError("the warm interpreter of tests/launcher.py is gone")
        self.pid: int = json.loads(started)["pid"]
        launcher.commands.add(self)

    def _ended(self, timeout: float | None) -> bool:
        if self.returncode is not None:
            return True
        if timeout is not None and not select.select([self._reply], [], [], max(timeout, 0))[0]:
            return False
        line = self._lines.readline()
        if not line:
            raise RuntimeError(f"the warm interpreter of tests/launcher.py went away before {self.args} ended")
        self.returncode = os.waitstatus_to_exitcode(json.loads(line)["status"])
        self._lines.close()
        self._reply.close()
        return True

    def poll(self) -> int | None:
        self._ended(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # as Popen: never a pid that ended (and may be another process's now)
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Writes `input` to stdin, reads stdout and stderr to their end, then waits, within `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        pending = input.encode(self.encoding or "utf-8") if isinstance(input, str) else (input or b"")
        with selectors.DefaultSelector() as selector:
            if self.stdin is not None and not self.stdin.closed:
                self.stdin.flush()
                if pending:
                    selector.register(self.stdin.fileno(), selectors.EVENT_WRITE, "stdin")
                else:
                    self.stdin.close()
            for name in ("stdout", "stderr"):
                stream = getattr(self, name)
                if stream is not None and not stream.closed:
                    selector.register(stream.fileno(), selectors.EVENT_READ, name)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    if key.data == "stdin":
                        pending = pending[os.write(key.fd, pending[:65536]):]
                        if not pending:
                            selector.unregister(key.fd)
                            assert self.stdin is not None
                            self.stdin.close()
                        continue
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.data].append(data)
                    else:
                        selector.unregister(key.fd)
                        getattr(self, key.data).close()
        self.wait(None if deadline is None else max(deadline - time.monotonic(), 0))
        out = [b"".join(chunks[n]) if getattr(self, n) is not None else None for n in ("stdout", "stderr")]
        if self.encoding is None:
            return out[0], out[1]
        text = [None if o is None else o.decode(self.encoding).replace("\r\n", "\n").replace("\r", "\n")
                for o in out]
        return text[0], text[1]

    def __enter__(self) -> Launched:
        return self

    def __exit__(self, *_: object) -> None:
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                stream.close()
        self.wait()


def popen(args: list[str], **kwargs: Any) -> Any:
    """subprocess.Popen(args, **kwargs) for `[LEDGER, ...]`: a Launched from the warm interpreter when it may run
    the command (see the module's docstring), else the console script in a subprocess."""
    env = kwargs.get("env")
    cold = env is None or args[:1] != [LEDGER] or bool(set(kwargs) - SUPPORTED) or _starts_cold(args)
    launcher = None if cold else _warm(env)
    if launcher is None:
        return subprocess.Popen(args, **kwargs)
    return Launched(launcher, list(args), **kwargs)


def run(args: list[str], *, input: Any = None, capture_output: bool = False, timeout: float | None = None,
        check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """subprocess.run(args, ...) for `[LEDGER, ...]`, through `popen`: on a timeout the command is killed and
    subprocess.TimeoutExpired raised, as subprocess.run does."""
    if capture_output:
        kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    with popen(args, **kwargs) as process:
        try:
            out, err = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    done = subprocess.CompletedProcess(args, process.returncode, out, err)
    if check:
        done.check_returncode()
    return done
