"""DAG file processing: a pool of long-lived processes that import DAG files and send back plain data.

The manager (in the scheduler process) lists the DAGs folder every `dag_dir_list_interval`, hashes
every file, and hands due files to idle processors, one processor per file at a time. A file is due
when it is new, when its content hash changed, or when `min_file_process_interval` has passed since
it was last parsed; an unchanged file parsed recently is not imported again. A processor that takes
longer than `file_timeout` on a file is killed (SIGKILL) and replaced, and the file gets an error
result. Processors never send DAG objects back: only `ParseResult`s of strings (the canonical JSON
structure of each DAG and its hash), which `ledger.scheduler.parsing.dag_sync.sync_results` writes to the database.

What DAG files print while a processor imports them goes to the DAG processor log (`log_file`, normally
$LEDGER_HOME/logs/dag_processor.log), never to the manager's stdout or stderr. A file whose name is not valid
UTF-8 is listed, stored and shown under its name with backslash escapes (dagbag.shown_path) and is an import
error of its own; it is never imported.

Time: `time` (injectable, monotonic seconds) drives the schedule of listing and parsing;
file timeouts and durations are always measured with the real monotonic clock.

Processors are forked ("fork" context) and ask the kernel for SIGKILL when their parent dies
(PR_SET_PDEATHSIG; Linux ties it to the thread that forked them, so drive the manager from a thread that
lives as long as it). The manager is not thread-safe: one thread calls poll() / parse_all().
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import signal
import sys
import tempfile
import time as _time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from ledger.core.dataset_rules import schedule_summary
from ledger.infra.code import CodeManifest, canonical, sha256_bytes
from ledger.scheduler.runtime.dagbag import (
    _module_name,
    content_hash,
    forget_modules,
    is_text_path,
    list_dag_files,
    load_file,
    name_error,
    shown_path,
)
from ledger.scheduler.runtime.parent_death import die_with_parent
from ledger.sdk.describe import version_of

__all__ = ["PROCESSOR_LOG", "DagFileProcessorManager", "ParseResult", "ParsedDag", "parse_file", "processor_log"]

PROCESSOR_LOG = "dag_processor.log"  # in $LEDGER_HOME/logs: what DAG files print while they are imported
LOG_ROTATE_BYTES = 10 * 1024 * 1024  # a processor log past this size becomes PROCESSOR_LOG.1 (one kept)
OUTPUT_KEPT_BYTES = 1024 * 1024  # of one import's output, at most this much goes to the log


def processor_log(logs_folder: str | Path) -> Path:
    """The DAG processor log of a logs folder ($LEDGER_HOME/logs/dag_processor.log)."""
    return Path(logs_folder) / PROCESSOR_LOG


@dataclass(frozen=True, slots=True)
class ParsedDag:
    """One DAG of a parsed file, as plain data: what `ledger.store.dags.register` needs."""

    dag_id: str
    version_hash: str
    structure: str  # canonical JSON text of the DAG's structure
    schedule: str  # schedule summary: '@daily', '0 * * * *', 'every 1:00:00', 'None'
    timezone: str
    fileloc: str
    source_code: str | None = None  # the file's text, kept with a new version
    code: CodeManifest | None = None  # the file and the helper files it imports (ledger/infra/code.py)
    code_root: str | None = None  # the folder the manifest's paths are relative to (the DAGs folder)


@dataclass(frozen=True, slots=True)
class ParseResult:
    """The outcome of parsing one file: its DAGs, or an error (one readable message), or its deletion.

    A result may carry both DAGs and an error: the DAGs the file defines that another file did not
    define first, and the error naming the duplicates.
    """

    fileloc: str
    content_hash: str
    dags: list[ParsedDag] = field(default_factory=list)
    error: str | None = None
    duration: float = 0.0
    deleted: bool = False
    # the other files of the folder whose change must re-parse this one (ANY_FILE: every Python file of it)
    depends_on: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and not self.deleted


ANY_FILE = "*"  # in depends_on: a change to any Python file of the folder (a file that failed to import)


def combined_hash(own: str, deps: Mapping[str, str]) -> str:
    """The hash that says whether a file must be parsed again: its content's, and its dependencies'."""
    if not deps or not own:
        return own
    return sha256_bytes(canonical({"file": own, "deps": dict(deps)}).encode("utf-8"))


def parse_file(fileloc: str, folder: str | None = None) -> ParseResult:
    """Import one DAG file (in the calling process) with `folder` (the DAGs folder) on sys.path, and
    describe its DAGs and their code as plain data.

    A file whose name is not valid UTF-8 is not imported: its result is an error, under the name shown with
    backslash escapes (dagbag.shown_path), which is also the name the manager lists it by."""
    started = _time.perf_counter()
    if not is_text_path(fileloc):
        try:
            digest = content_hash(fileloc)
        except OSError:
            digest = ""
        return ParseResult(shown_path(fileloc), digest, [], name_error(fileloc), _time.perf_counter() - started)

    def done(dags: list[ParsedDag], error: str | None, digest: str, deps: Mapping[str, str] | None = None
             ) -> ParseResult:
        if error is not None:  # whatever it failed to import may be fixed anywhere in the folder
            return ParseResult(fileloc, digest, dags, error, _time.perf_counter() - started, depends_on=(ANY_FILE,))
        deps = deps or {}
        return ParseResult(fileloc, combined_hash(digest, deps), dags, error, _time.perf_counter() - started,
                           depends_on=tuple(sorted(deps)))

    try:
        digest = content_hash(fileloc)
    except OSError as exc:
        return done([], f"{fileloc}: cannot read the file: {exc.strerror or exc}", "")
    try:
        loaded = load_file(fileloc, folder)
        if loaded.error is not None:
            return done([], loaded.error, digest)
        assert loaded.root is not None and loaded.code is not None
        root = loaded.root
        if loaded.code.entry.sha256 != digest:  # changed while it was imported: the next listing re-parses it
            return done([], f"{fileloc}: the file changed while it was imported", digest)
        found: dict[str, ParsedDag] = {}
        for dag in loaded.dags:
            version_hash, text = version_of(dag)
            datasets = None if dag.datasets is None else {"condition": dag.datasets.to_json()}
            found[dag.dag_id] = ParsedDag(dag.dag_id, version_hash, text,
                                          schedule_summary(dag.schedule.summary(), datasets), dag.timezone,
                                          fileloc, dag.source_code, loaded.code, root)
        deps = {os.path.join(root, f.relpath): f.sha256 for f in loaded.code.support}
        return done(list(found.values()), None, digest, deps)
    except Exception as exc:  # describing a DAG failed: still one readable line
        return done([], f"{fileloc}: {type(exc).__name__}: {exc}", digest)
    finally:
        # the DAG objects die with the module, the helpers with them: a long-lived processor must not
        # accumulate them
        sys.modules.pop(_module_name(fileloc), None)
        if folder is not None:
            forget_modules([os.path.abspath(folder)])


# -- the processor (child process) ---------------------------------------------------------------------

class _Output:
    """What DAG files print while a processor imports them: fd 1 and 2 (and sys.stdout and sys.stderr) go to
    an anonymous file, never to the manager's stdout (a command's `--json` output, the scheduler's log).
    After each import, what it wrote is appended to the processor log under a line naming the file, in one
    write (several processors share the log), or dropped when there is no log."""

    def __init__(self, log_file: str | None) -> None:
        self.log_file = log_file
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self.fd = self._anonymous_file()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)
        sys.stdout, sys.stderr = (open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                                       closefd=False) for fd in (1, 2))

    @staticmethod
    def _anonymous_file() -> int:
        """A file with no name (gone when the processor is): O_TMPFILE, else a temporary file unlinked at once."""
        with contextlib.suppress(AttributeError, OSError):
            return os.open(tempfile.gettempdir(), os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fd, path = tempfile.mkstemp(prefix="ledger-dag-processor-")
        os.unlink(path)
        return fd

    def collect(self, fileloc: str) -> None:
        """Move what the import of `fileloc` printed to the log; the file is empty again after."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        size = os.fstat(self.fd).st_size
        if not size:
            return
        data = os.pread(self.fd, OUTPUT_KEPT_BYTES, 0)
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)  # fd 1 and 2 share this offset: they write from the start again
        if self.log_file is None:
            return
        text = data.decode("utf-8", "backslashreplace")
        if not text.endswith("\n"):
            text += "\n"
        if size > len(data):
            text += f"[ledger] ... {size - len(data)} bytes more, not kept\n"
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        entry = f"[ledger] {at} output while importing {shown_path(fileloc)} (pid {os.getpid()}):\n{text}"
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(self.log_file), exist_ok=True)
            with contextlib.suppress(OSError):
                if os.path.getsize(self.log_file) > LOG_ROTATE_BYTES:
                    os.replace(self.log_file, self.log_file + ".1")
            fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                os.write(fd, entry.encode("utf-8", "backslashreplace"))
            finally:
                os.close(fd)


def _processor_main(conn: Connection, parent_pid: int, log_file: str | None = None) -> None:
    if not die_with_parent(parent_pid, signal.SIGKILL):
        os._exit(0)
    # Ctrl-C reaches the whole process group: the manager stops its processors itself
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    output = _Output(log_file)
    while True:
        try:
            fileloc = conn.recv()
        except (EOFError, OSError):
            return
        if fileloc is None:
            return
        path, folder = fileloc
        try:
            result = parse_file(path, folder)
        finally:
            output.collect(path)
        conn.send(result)


@dataclass(eq=False)
class _Processor:
    process: BaseProcess
    conn: Connection
    fileloc: str | None = None  # the file being parsed, None when idle
    dispatched_hash: str = ""
    started: float = 0.0  # real monotonic time of dispatch

    @property
    def pid(self) -> int:
        assert self.process.pid is not None
        return self.process.pid


@dataclass(slots=True)
class _FileState:
    current_hash: str  # content hash at the latest listing (combined with its dependencies')
    parsed_hash: str | None = None  # content hash when last parsed (or seeded)
    last_parsed: float | None = None  # manager time of the last parse's end
    depends_on: tuple[str, ...] = ()  # files whose change re-parses this one (see ParseResult.depends_on)


# -- the manager (scheduler process) -------------------------------------------------------------------

class DagFileProcessorManager:
    """Keeps the DAGs folder parsed with a pool of processors; see the module docstring."""

    def __init__(
        self,
        folder: Path,
        *,
        parsing_processes: int = 2,
        min_file_process_interval: float = 30,
        dag_dir_list_interval: float = 60,
        file_timeout: float = 50,
        time: Callable[[], float] = _time.monotonic,
        log_file: str | Path | None = None,
    ) -> None:
        """`log_file`: where what DAG files print while they are imported goes (processor_log(); None: it
        is dropped). It never goes to this process's stdout or stderr."""
        if parsing_processes < 1:
            raise ValueError("parsing_processes must be >= 1")
        if file_timeout <= 0:
            raise ValueError("file_timeout must be > 0")
        self.folder = Path(folder).expanduser().resolve()
        self.parsing_processes = parsing_processes
        self.min_file_process_interval = min_file_process_interval
        self.dag_dir_list_interval = dag_dir_list_interval
        self.file_timeout = file_timeout
        self.log_file = None if log_file is None else str(Path(log_file).expanduser().absolute())
        self._time = time
        self._ctx = multiprocessing.get_context("fork")
        self._processors: list[_Processor] = []
        self._started = False
        self._files: dict[str, _FileState] = {}  # the listed files (plus seeded ones until the first listing)
        self._listed_at: float | None = None
        self._listed_real = 0.0  # real monotonic time of the latest listing
        self._forced: set[str] = set()  # files to parse at the next chance, whatever their state
        # the dispatch queue: due files in order, rebuilt when something changed or a parsed file falls due
        self._queue: deque[str] = deque()
        self._stale = True
        self._next_due_at = math.inf  # manager time when a file not in the queue falls due
        self._owners: dict[str, str] = {}  # dag_id -> the file that defines it
        self._waiting: dict[str, set[str]] = {}  # dag_id -> files refused it as a duplicate
        self._own: dict[str, str] = {}  # fileloc -> own content hash at the latest listing
        # fileloc (as listed and stored: shown_path) -> the path on disk, for names that are not valid UTF-8
        self._paths: dict[str, str] = {}
        self._folder_digest = ""  # digest of every listed file's hash: what ANY_FILE dependencies follow
        self.folder_error: str | None = None  # why the latest listing could not read the folder
        self.imports = 0  # files handed to processors so far

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the processors (idempotent); poll() and parse_all() call it when needed."""
        self._started = True
        self._fill_pool()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop every processor: idle ones are asked to exit, busy ones are killed."""
        self._started = False
        for proc in self._processors:
            if proc.fileloc is None:
                with contextlib.suppress(OSError, ValueError):
                    proc.conn.send(None)
            else:
                self._forced.add(proc.fileloc)  # parse it again after a restart
                self._stale = True
                proc.process.kill()
        deadline = _time.monotonic() + timeout
        for proc in self._processors:
            proc.process.join(max(0.0, deadline - _time.monotonic()))
            if proc.process.exitcode is None:
                proc.process.kill()
                proc.process.join(1)
            proc.conn.close()
            with contextlib.suppress(ValueError):
                proc.process.close()
        self._processors = []

    def __enter__(self) -> DagFileProcessorManager:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def seed(self, known_hashes: Mapping[str, str], owners: Mapping[str, str] | None = None,
             depends_on: Mapping[str, Iterable[str]] | None = None) -> None:
        """What the database knows (see ledger.scheduler.parsing.dag_sync.known_hashes / known_owners /
        known_dependencies), before the first listing.

        A seeded file whose content (and dependencies) still has the seeded hash counts as parsed now: it is
        not imported again before `min_file_process_interval`. A seeded file of this folder missing from it
        yields a deleted result; files outside the folder are not this manager's and are ignored.
        `owners` (dag_id -> fileloc) says which file defines each DAG, for duplicate detection.
        """
        now = self._time()
        deps = depends_on or {}
        for fileloc, digest in known_hashes.items():
            if not self._mine(fileloc):
                continue
            self._files[fileloc] = _FileState(current_hash=digest, parsed_hash=digest, last_parsed=now,
                                              depends_on=tuple(deps.get(fileloc, ())))
        if owners:
            self._owners.update(owners)
        self._stale = True

    # -- introspection --------------------------------------------------------------------------------
    @property
    def processing(self) -> dict[str, int]:
        """fileloc -> pid of the processor importing it right now."""
        return {p.fileloc: p.pid for p in self._processors if p.fileloc is not None}

    @property
    def due_count(self) -> int:
        """How many listed files are due for parsing and not being parsed."""
        return len(self._due(self._time()))

    def busy(self) -> bool:
        """A file is being parsed, or a forced, new or changed file waits for a processor.

        Files that are only due because `min_file_process_interval` passed do not count, so that
        `--exit-when-idle` can end.
        """
        if any(p.fileloc is not None for p in self._processors):
            return True
        return any(f in self._forced or s.last_parsed is None or s.parsed_hash != s.current_hash
                   for f, s in self._files.items())

    @property
    def files(self) -> list[str]:
        """The files of the latest listing."""
        return sorted(self._files)

    @property
    def processor_pids(self) -> list[int]:
        return [p.pid for p in self._processors]

    def wait_handles(self) -> list[Connection]:
        """Connections of busy processors: readable when a result is ready (or the processor died)."""
        return [p.conn for p in self._processors if p.fileloc is not None]

    # -- the loop -------------------------------------------------------------------------------------
    def poll(self) -> list[ParseResult]:
        """Never blocks: re-list when due, collect finished results, kill overdue processors, dispatch."""
        if not self._started:
            self.start()
        now = self._time()
        results: list[ParseResult] = []
        if self._listed_at is None or now - self._listed_at >= self.dag_dir_list_interval:
            results += self._refresh(now)
        results += self._collect(block=0.0)
        self._dispatch()
        return self._settle(results)

    def parse_all(self, timeout: float | None = None) -> list[ParseResult]:
        """Block until every file of a fresh listing has been parsed once (or `timeout` seconds passed).

        Returns the results of the pass (plus deleted files and anything else that finished meanwhile).
        Files not done by the timeout stay queued or in flight for later polls.
        """
        if not self._started:
            self.start()
        deadline = None if timeout is None else _time.monotonic() + timeout
        results = self._refresh(self._time())
        pending = set(self._files)
        self._forced |= pending
        self._stale = True
        while True:
            self._dispatch()
            for res in self._collect(block=0.0):
                results.append(res)
                state = self._files.get(res.fileloc)
                # a result of an import started before this pass's listing, of older content, does not count
                if state is None or res.content_hash == state.current_hash:
                    pending.discard(res.fileloc)
            if not pending:
                break
            remaining = None if deadline is None else deadline - _time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self._dispatch()
            wait_for = self._next_timeout()
            if remaining is not None:
                wait_for = min(wait_for, remaining)
            handles = self.wait_handles()
            if handles:
                wait(handles, timeout=max(0.0, wait_for))
            else:
                _time.sleep(0.01)
        return self._settle(results)

    # -- internals ------------------------------------------------------------------------------------
    def _fill_pool(self) -> None:
        while self._started and len(self._processors) < self.parsing_processes:
            parent_end, child_end = self._ctx.Pipe(duplex=True)
            process = self._ctx.Process(target=_processor_main, args=(child_end, os.getpid(), self.log_file),
                                        name="ledger-dag-processor", daemon=True)
            process.start()
            child_end.close()
            self._processors.append(_Processor(process, parent_end))

    def _mine(self, fileloc: str) -> bool:
        return fileloc.startswith(str(self.folder) + os.sep)

    def _current_hash(self, own: str, depends_on: tuple[str, ...], cache: dict[str, str]) -> str:
        """A file's own hash combined with its dependencies' hashes now (missing ones hash as empty)."""
        if not depends_on:
            return own
        if ANY_FILE in depends_on:
            return combined_hash(own, {ANY_FILE: self._folder_digest})
        deps: dict[str, str] = {}
        for dep in depends_on:
            found = self._own.get(dep) or cache.get(dep)
            if found is None:
                try:
                    found = content_hash(dep)
                except OSError:
                    found = ""
                cache[dep] = found
            deps[dep] = found
        return combined_hash(own, deps)

    def _refresh(self, now: float) -> list[ParseResult]:
        """List the folder and hash every file; files that are gone yield deleted results. A folder that
        cannot be read changes nothing (`folder_error` says why): it does not mean every file is gone."""
        self._listed_at = now
        self._listed_real = _time.monotonic()
        if not self.folder.is_dir():
            self.folder_error = f"the DAGs folder {self.folder} does not exist or is not a folder"
            return []
        self.folder_error = None
        listed: dict[str, str] = {}
        self._paths = {}
        for path in list_dag_files(self.folder):
            fileloc = shown_path(path)  # a name that is not UTF-8 is listed (and stored) with escapes
            try:
                listed[fileloc] = content_hash(path)
            except OSError:  # removed between listing and hashing
                continue
            if fileloc != path:
                self._paths[fileloc] = path
        self._own = listed
        self._folder_digest = sha256_bytes(canonical(listed).encode("utf-8"))
        gone = [f for f in self._files if f not in listed]
        cache: dict[str, str] = {}
        for fileloc, digest in listed.items():
            state = self._files.get(fileloc)
            if state is None:
                self._files[fileloc] = _FileState(current_hash=digest)
            else:
                state.current_hash = self._current_hash(digest, state.depends_on, cache)
        self._stale = True
        results = []
        for fileloc in sorted(gone):
            del self._files[fileloc]
            self._forced.discard(fileloc)
            results.append(ParseResult(fileloc, "", [], None, 0.0, deleted=True))
        return results

    def _due(self, now: float) -> list[str]:
        """Files to parse, in order: forced, new or changed ones first, then the longest unparsed."""
        busy = {p.fileloc for p in self._processors if p.fileloc is not None}
        first: list[str] = []  # forced, new or changed
        later: list[tuple[float, str]] = []  # parsed long enough ago, oldest first
        next_due_at = math.inf
        for fileloc, state in self._files.items():
            if fileloc in busy:
                continue
            if fileloc in self._forced or state.last_parsed is None or state.parsed_hash != state.current_hash:
                first.append(fileloc)
            elif now - state.last_parsed >= self.min_file_process_interval:
                later.append((state.last_parsed, fileloc))
            else:
                next_due_at = min(next_due_at, state.last_parsed + self.min_file_process_interval)
        first.sort()
        later.sort()
        self._next_due_at = next_due_at
        return first + [f for _, f in later]

    def _dispatch(self) -> None:
        self._fill_pool()
        idle = [p for p in self._processors if p.fileloc is None]
        if not idle:
            return
        now = self._time()
        if self._stale or now >= self._next_due_at:
            self._queue = deque(self._due(now))
            self._stale = False
        busy = {p.fileloc for p in self._processors if p.fileloc is not None}
        while idle and self._queue:
            fileloc = self._queue.popleft()
            if fileloc in busy or fileloc not in self._files:
                continue
            proc = idle.pop(0)
            try:
                proc.conn.send((self._paths.get(fileloc, fileloc), str(self.folder)))
            except OSError:  # the processor died while idle: replace it, parse the file with another one
                self._discard(proc)
                self._queue.appendleft(fileloc)
                continue
            proc.fileloc = fileloc
            proc.dispatched_hash = self._files[fileloc].current_hash
            proc.started = _time.monotonic()
            self._forced.discard(fileloc)
            self.imports += 1
        self._fill_pool()

    def _collect(self, block: float) -> list[ParseResult]:
        """Results of processors that finished, died or timed out (replacing dead processors)."""
        results: list[ParseResult] = []
        busy = [p for p in self._processors if p.fileloc is not None]
        if not busy:
            return results
        ready = set(wait([p.conn for p in busy], timeout=block))
        now = _time.monotonic()
        for proc in busy:
            fileloc = proc.fileloc
            assert fileloc is not None
            res: ParseResult | None = None
            if proc.conn in ready:
                try:
                    res = proc.conn.recv()
                except (EOFError, OSError):
                    proc.process.join(1)
                    code = proc.process.exitcode
                    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                    res = ParseResult(fileloc, proc.dispatched_hash, [],
                                      f"{fileloc}: the processor died while importing ({how})", now - proc.started)
                    self._discard(proc)
                else:
                    proc.fileloc = None
            elif now - proc.started > self.file_timeout:
                res = ParseResult(fileloc, proc.dispatched_hash, [],
                                  f"{fileloc}: timed out after {self.file_timeout:g} s while importing",
                                  now - proc.started)
                self._discard(proc)
            if res is not None:
                if ANY_FILE in res.depends_on and res.content_hash:  # follows every file of the folder
                    res = replace(res, content_hash=combined_hash(res.content_hash, {ANY_FILE: self._folder_digest}))
                self._finished(res, proc.started)
                if res.fileloc in self._files:  # a file deleted meanwhile has already had its result
                    results.append(res)
        if len(self._processors) < self.parsing_processes:
            self._fill_pool()
        return results

    def _discard(self, proc: _Processor) -> None:
        """Kill a processor and forget it (a new one takes its place)."""
        proc.process.kill()
        proc.process.join(5)
        proc.conn.close()
        with contextlib.suppress(ValueError):
            proc.process.close()
        self._processors.remove(proc)

    def _finished(self, res: ParseResult, started: float) -> None:
        state = self._files.get(res.fileloc)
        if state is None:
            return
        if res.content_hash and started >= self._listed_real:
            # the processor read the file after the latest listing: its hash is the newest we know
            state.current_hash = res.content_hash
        state.parsed_hash = res.content_hash or state.current_hash  # unreadable: not again at once
        state.depends_on = res.depends_on
        state.last_parsed = self._time()
        if state.parsed_hash != state.current_hash:
            self._stale = True  # changed while it was being parsed: due again now
        else:
            self._next_due_at = min(self._next_due_at, state.last_parsed + self.min_file_process_interval)

    def _next_timeout(self) -> float:
        """Seconds until the first busy processor reaches its file timeout."""
        now = _time.monotonic()
        left = [p.started + self.file_timeout - now for p in self._processors if p.fileloc is not None]
        return max(0.0, min(left, default=self.file_timeout)) + 0.01

    def _settle(self, results: list[ParseResult]) -> list[ParseResult]:
        """Decide which file owns each dag_id: the first file keeps it; later files get an import error."""
        if not results:
            return results
        # releases first, so that a DAG moving from one file to another in the same batch moves cleanly
        owned: dict[str, list[str]] = {}
        for dag_id, owner in self._owners.items():
            owned.setdefault(owner, []).append(dag_id)
        for res in results:
            if res.deleted:
                keep: set[str] = set()
            elif res.error is None:
                keep = {d.dag_id for d in res.dags}
            else:
                continue  # a broken file keeps its DAGs (they stay active with their last good version)
            for dag_id in owned.get(res.fileloc, []):
                if dag_id not in keep and self._owners.get(dag_id) == res.fileloc:
                    del self._owners[dag_id]
                    # files refused this DAG as a duplicate may have it now: parse them again at once
                    waiting = {f for f in self._waiting.pop(dag_id, set()) if f in self._files}
                    if waiting:
                        self._forced |= waiting
                        self._stale = True
        settled: list[ParseResult] = []
        for res in sorted(results, key=lambda r: (r.fileloc, not r.deleted)):
            if not res.dags:
                settled.append(res)
                continue
            kept: list[ParsedDag] = []
            refused: list[str] = []
            for dag in res.dags:
                holder = self._owners.get(dag.dag_id)
                if holder is None or holder == res.fileloc or holder not in self._files:
                    self._owners[dag.dag_id] = res.fileloc
                    kept.append(dag)
                else:
                    refused.append(f"{res.fileloc}: DAG {dag.dag_id!r} is already defined in {holder}")
                    self._waiting.setdefault(dag.dag_id, set()).add(res.fileloc)
            if refused:
                error = "\n".join(([res.error] if res.error else []) + refused)
                res = replace(res, dags=kept, error=error)
            settled.append(res)
        return settled

