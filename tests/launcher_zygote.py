"""The warm side of tests/launcher.py: one interpreter per test process that has imported the CLI's modules and,
for each command it is sent, forks a child that becomes that command.

Started as a script (`python tests/launcher_zygote.py CONTROL_FD LEDGER`, never imported: nothing of the tests is
in its modules), by the interpreter of the `ledger` console script's first line. It imports PRELOAD, which opens no
database, reads no settings and starts no thread, then reads requests on CONTROL_FD (a SOCK_SEQPACKET socket): a
JSON message {argv, env, cwd, new_session} with four descriptors (the request's own socket, then the command's
stdin, stdout, stderr). For each it forks; the child makes its own session if asked (before its pid is reported),
takes the descriptors as 0, 1, 2, the working directory, the environment (replaced whole), sys.argv, and runs the
console script itself (runpy); it exits with that script's status and streams, without the interpreter's
teardown of its modules (_end_without_teardown, decision 0360). This process writes the child's pid on the request's
socket, reaps the child when its pidfd says it ended, and writes its wait status there. It ends when CONTROL_FD is
closed, or with its parent."""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import threading
from typing import Any

# what every forked command shares: the CLI, the command modules the scenario tests run as processes (each
# builds a rich Console from the environment, which is why tests/launcher.py sends a command here only when its
# environment differs from this process's in LEDGER_* alone), the store and the ORM they open; then what those
# commands import once they run: the pydantic modules typer builds each parameter with (about 0.1 s of CPU per
# command), the DAG file processor, the scheduler's and the backfill's loops with the local executor, alembic;
# then the long-running processes of the fleet's scenarios: `ledger worker` with Celery, `ledger webserver`
PRELOAD = ("ledger.cli.app", "ledger.cli.env", "ledger.cli.dags", "ledger.cli.trigger", "ledger.cli.backfill",
           "ledger.cli.scheduler", "ledger.cli.db", "ledger.cli.tasks", "ledger.cli.events", "ledger.cli.runs",
           "ledger.cli.timeline", "ledger.store.db", "sqlalchemy.orm",
           "pydantic.type_adapter", "pydantic.functional_validators", "pydantic.fields",
           "ledger.scheduler.parsing.dag_processing", "ledger.scheduler.loop.scheduler_job", "ledger.backfill.job",
           "ledger.scheduler.executors.local", "ledger.scheduler.runtime.task_runner", "alembic.command",
           "alembic.config", "alembic.runtime.migration",
           "ledger.cli.worker", "ledger.scheduler.runtime.celery_worker", "celery.apps.worker",
           "ledger.cli.webserver", "ledger.web.app", "uvicorn")
PR_SET_PDEATHSIG = 1
# in a command's process: how its script ended (None: it returned), for _end_without_teardown
_ENDED: list[BaseException | None] = []


def _end_without_teardown() -> None:
    """The last exit callback of a command's process (registered before any module is loaded, and callbacks run last
    registered first): what the console script's process does at exit up to here is done (its non-daemon threads
    joined, every other exit callback run: logging's, multiprocessing's, the command's own); what follows in
    Python's finalization is the teardown of every module, which in a process forked from this warm one writes to
    nearly every page it shares with it and has each copied (about 16,000 page faults and 0.1 s of CPU for `ledger
    version`: docs/benchmarks.md, "A warm command's teardown"). So the process flushes its standard streams and
    ends here with the status the interpreter would have given it (decision 0360). The warm interpreter itself (no
    _ENDED) ends as usual."""
    if not _ENDED:
        return
    ended = _ENDED[0]
    if isinstance(ended, SystemExit):
        code = ended.code
        status = 0 if code is None else code if isinstance(code, int) else 1
    else:
        status = 0 if ended is None else 1  # (an exception's traceback is printed)
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # as the interpreter: a stream that cannot be flushed at exit makes the status 120
            status = 120
    if isinstance(ended, KeyboardInterrupt):  # as the interpreter reports one: killed by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status & 0xFF)


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _receive(control: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return (json.loads(message) if message else None), list(fds)


def serve(control: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """Forks a child per request until `control` closes (None). In a child, returns its request and descriptors."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    running: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the request's socket)
    while True:
        for key, _ in selector.select():
            if key.fileobj is control:
                request, fds = _receive(control)
                if request is None:
                    return None
                reply, stdio = socket.socket(fileno=fds[0]), fds[1:]
                sys.stdout.flush()
                sys.stderr.flush()
                # a session asked for is made before the test holds the pid (a signal to the group reaches it):
                # the child closes this pipe once it has one
                settled = os.pipe() if request["new_session"] else None
                pid = os.fork()
                if pid == 0:
                    if settled is not None:
                        os.setsid()
                        os.close(settled[0])
                        os.close(settled[1])
                    selector.close()
                    for pidfd, (_, other) in running.items():
                        os.close(pidfd)
                        other.close()
                    control.close()
                    reply.close()
                    return request, stdio
                if settled is not None:
                    os.close(settled[1])
                    os.read(settled[0], 1)  # the end of the pipe: the child's setsid() is done (or it has gone)
                    os.close(settled[0])
                for fd in stdio:
                    os.close(fd)
                reply.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                pidfd = os.pidfd_open(pid)
                running[pidfd] = (pid, reply)
                selector.register(pidfd, selectors.EVENT_READ)
            else:
                pid, reply = running.pop(key.fd)
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):  # the test let go of the command without waiting for it
                    reply.sendall(json.dumps({"status": status}).encode() + b"\n")
                reply.close()


def become(request: dict[str, Any], stdio: list[int], ledger: str) -> None:
    """This child is now `ledger ARGV` as the console script would be started: its session, descriptors, working
    directory, environment and argv, then the script itself (its session is made in `serve`)."""
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for fd in set(stdio):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [ledger, *request["argv"]]
    sys.orig_argv = [sys.executable, ledger, *request["argv"]]
    for name in ("multiprocessing.process", "billiard.process"):  # (billiard: Celery's copy of multiprocessing)
        process = sys.modules.get(name)
        if process is not None:  # preloaded: what it took from this process when imported is the command's
            process.ORIGINAL_DIR = os.path.abspath(request["cwd"])  # (its working directory when it started)
            process.current_process().authkey = os.urandom(32)  # (a fresh one per process)
    sys.modules.pop("__mp_main__", None)  # (this file's module; the command's own `__main__` is runpy's)
    try:
        runpy.run_path(ledger, run_name="__main__")
    except BaseException as ended:
        _ENDED.append(ended)
        raise
    _ENDED.append(None)


def main() -> None:
    atexit.register(_end_without_teardown)  # before any module is loaded: the last callback to run
    control_fd, ledger = int(sys.argv[1]), sys.argv[2]
    _die_with_parent()
    sys.path[0] = os.path.dirname(ledger)  # as the console script's: its own folder, not this file's
    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded module started a thread: forking it would copy a lock held"
    # what is loaded now goes to the collector's permanent generation (gc.freeze, Python's advice for a process
    # that forks without exec): a command's collections, the last one at its exit included, no longer walk these
    # objects, and so neither spend the CPU nor write the pages they share with this process (docs/benchmarks.md,
    # "Seventh pass": eight commands of a scenario 1.9 s of CPU with the preloads and the freeze, 4.1 s without)
    gc.collect()  # (frozen garbage would never be freed)
    gc.freeze()
    child = serve(socket.socket(fileno=control_fd))
    if child is not None:
        become(*child, ledger)  # raises SystemExit with the command's status, as the script does


if __name__ == "__main__":
    main()
