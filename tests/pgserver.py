"""A real, throwaway PostgreSQL server for the test suite.

``PostgresServer`` runs ``initdb`` into a fresh temporary directory and starts
``postgres`` listening on 127.0.0.1 only, on a free port, with fsync off.  When the
test process runs as root the server binaries are run as the ``postgres`` OS user
(initdb and postgres refuse to run as root); otherwise as the current user.

Fixtures (imported by the project's conftest.py)::

    postgres_server  session scope: the running PostgresServer.  Skips when
                     PostgreSQL is not installed -- except with CI=true, where it
                     fails, so that CI can never silently skip the PostgreSQL tests.
    postgres_url     function scope: SQLAlchemy URL of a fresh, empty database,
                     dropped again after the test.

tests/conftest.py adds ``migrated_postgres_url``: a fresh database copied from a template
the migrations built once per session.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import pytest

PG_OS_USER = "postgres"
DB_USER = "ledger"
HOST = "127.0.0.1"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
_PORT_ATTEMPTS = 3
_LOG_TAIL = 8000


def _is_root() -> bool:
    return os.geteuid() == 0


def _version_key(bindir: str) -> tuple[int, ...]:
    m = re.search(r"/postgresql/([0-9.]+)/bin$", bindir)
    return tuple(int(p) for p in m.group(1).split(".") if p) if m else (0,)


def find_bindir() -> str | None:
    """Directory holding ``initdb`` and ``postgres``, or None.

    ``$LEDGER_PG_BINDIR`` wins, then ``pg_config --bindir``, then the newest
    ``/usr/lib/postgresql/*/bin`` (Debian/Ubuntu layout; pg_config may belong to a
    client-only package, so its answer is only used when the server is there).
    """
    candidates: list[str] = []
    if os.environ.get("LEDGER_PG_BINDIR"):
        candidates.append(os.environ["LEDGER_PG_BINDIR"])
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False)
            if out.returncode == 0 and out.stdout.strip():
                candidates.append(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)
    for d in candidates:
        if all(os.access(os.path.join(d, exe), os.X_OK) for exe in ("initdb", "postgres")):
            return d
    return None


def postgres_available() -> str | None:
    """None if a throwaway server can be started here, else the reason why not."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"psycopg is not installed ({exc})"
    if find_bindir() is None:
        return (
            "PostgreSQL server binaries (initdb, postgres) not found: looked at "
            "pg_config --bindir and /usr/lib/postgresql/*/bin; install the 'postgresql' package"
        )
    if _is_root():
        try:
            pwd.getpwnam(PG_OS_USER)
        except KeyError:
            return f"running as root but there is no {PG_OS_USER!r} OS user to run PostgreSQL as"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _traversable_by_others(path: str) -> bool:
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            if not d.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _make_basedir() -> str:
    """A fresh temp dir the server user can reach, with a short path (unix socket limit)."""
    default = tempfile.gettempdir()
    ok = len(default) <= 40 and (not _is_root() or _traversable_by_others(default))
    parent = default if ok else ("/tmp" if os.path.isdir("/tmp") else default)
    return tempfile.mkdtemp(prefix="ledger-pg-", dir=parent)


class PostgresServer:
    """A throwaway PostgreSQL server (``start()`` / ``stop()``)."""

    def __init__(self, bindir: str | None = None) -> None:
        self.bindir = bindir or find_bindir()
        self.port: int | None = None
        self.basedir: str | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._log_offset = 0  # where the current server attempt's log starts
        self._owner_pid = os.getpid()

    # -- public API -----------------------------------------------------------------

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the ``postgres`` maintenance database."""
        return self.url_for("postgres")

    def url_for(self, dbname: str) -> str:
        if self.port is None:
            raise RuntimeError("PostgreSQL server is not started")
        return f"postgresql+psycopg://{DB_USER}@{HOST}:{self.port}/{quote(dbname, safe='')}"

    @property
    def datadir(self) -> str:
        assert self.basedir is not None
        return os.path.join(self.basedir, "data")

    @property
    def logfile(self) -> str:
        assert self.basedir is not None
        return os.path.join(self.basedir, "postgres.log")

    def start(self) -> PostgresServer:
        if self.proc is not None:
            return self
        if self.bindir is None:
            raise RuntimeError(postgres_available() or "PostgreSQL server binaries not found")
        self._owner_pid = os.getpid()
        atexit.register(self._atexit_stop)
        try:
            self.basedir = _make_basedir()
            self._prepare_dirs()
            self._initdb()
            self._start_on_free_port()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then SIGKILL if needed; remove the temp dir. Idempotent."""
        self._stop_proc()
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        if self.basedir is not None:
            shutil.rmtree(self.basedir, ignore_errors=True)
            self.basedir = None
        self.port = None
        atexit.unregister(self._atexit_stop)

    def restart(self, down_for: float = 0.0) -> None:
        """Fast shutdown (as `pg_ctl restart -m fast`: open transactions are aborted, clients disconnected),
        `down_for` seconds without a server, then the same data directory on the same port again."""
        if self.port is None or self.basedir is None:
            raise RuntimeError("PostgreSQL server is not started")
        self._stop_proc()
        time.sleep(down_for)
        self._spawn()
        self._wait_ready()

    def _atexit_stop(self) -> None:
        # A forked child (e.g. a scheduler worker) exiting normally must not stop our server.
        if os.getpid() == self._owner_pid:
            self.stop()

    def connect(self, dbname: str = "postgres", **kwargs: Any) -> Any:
        """A psycopg connection (autocommit) to ``dbname``."""
        import psycopg

        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 5)
        return psycopg.connect(host=HOST, port=self.port, user=DB_USER, dbname=dbname, sslmode="disable", **kwargs)

    def create_database(self, name: str, template: str | None = None) -> str:
        """CREATE DATABASE ``name`` (a copy of the database ``template`` when given, which must have no
        connection open); returns its SQLAlchemy URL."""
        from psycopg import sql

        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement = sql.SQL("{} TEMPLATE {}").format(statement, sql.Identifier(template))
        with self.connect() as conn:
            conn.execute(statement)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE ``name``, terminating any connections still open to it."""
        from psycopg import sql

        with self.connect() as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def log_tail(self, limit: int = _LOG_TAIL, since: int = 0) -> str:
        """The end of the server log (from byte offset ``since``)."""
        try:
            with open(self.logfile, "rb") as fh:
                fh.seek(since)
                data = fh.read()
        except (OSError, AssertionError):
            return "(no server log)"
        return data.decode(errors="replace")[-limit:]

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------

    def _run_as(self) -> dict[str, Any]:
        """Popen keyword arguments that drop root privileges to the postgres user."""
        if not _is_root():
            return {}
        pw = pwd.getpwnam(PG_OS_USER)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        env.pop("LANG", None)
        if _is_root():
            env["HOME"] = self.basedir or "/"
            env["USER"] = env["LOGNAME"] = PG_OS_USER
        return env

    def _prepare_dirs(self) -> None:
        assert self.basedir is not None
        os.makedirs(os.path.join(self.basedir, "sock"))
        if _is_root():
            pw = pwd.getpwnam(PG_OS_USER)
            for d in (self.basedir, os.path.join(self.basedir, "sock")):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            os.chmod(self.basedir, 0o700)

    def _initdb(self) -> None:
        assert self.bindir is not None and self.basedir is not None
        cmd = [
            os.path.join(self.bindir, "initdb"),
            "-D", self.datadir,
            "-A", "trust",
            "-U", DB_USER,
            "--encoding", "UTF8",
            "--no-locale",
            "--nosync",
        ]  # fmt: skip
        try:
            out = subprocess.run(
                cmd,
                cwd=self.basedir,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
                **self._run_as(),
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"initdb timed out: {' '.join(cmd)}") from exc
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed (exit {out.returncode}): {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")

    def _spawn(self) -> None:
        assert self.bindir is not None and self.basedir is not None
        if self._log_fh is None:
            self._log_fh = open(self.logfile, "ab")  # noqa: SIM115 - kept open for the server
        self._log_offset = self._log_fh.tell()
        cmd = [
            os.path.join(self.bindir, "postgres"),
            "-D", self.datadir,
            "-h", HOST,
            "-p", str(self.port),
            "-k", os.path.join(self.basedir, "sock"),
            "-F",
            "-c", "max_connections=200",
            "-c", "full_page_writes=off",
            "-c", "synchronous_commit=off",
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.basedir,
            env=self._env(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal must not hit the server
            **self._run_as(),
        )

    def _wait_ready(self) -> None:
        import psycopg

        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        last_error: Exception | None = None
        while True:
            code = self.proc.poll()
            if code is not None:
                log = self.log_tail(since=self._log_offset)
                if "Address already in use" in log:
                    raise _PortInUse()
                raise RuntimeError(f"PostgreSQL exited during startup (exit code {code}). Log:\n{log}")
            try:
                with self.connect(connect_timeout=2):
                    return
            except psycopg.OperationalError as exc:
                last_error = exc
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"PostgreSQL did not accept connections on {HOST}:{self.port} within "
                    f"{START_TIMEOUT:.0f}s (last error: {last_error}). Log:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def _start_on_free_port(self) -> None:
        for _ in range(_PORT_ATTEMPTS):
            self.port = _free_port()
            self._spawn()
            try:
                self._wait_ready()
                return
            except _PortInUse:
                # Another process took the port between our probe and the server's bind.
                self._stop_proc(graceful=False)
        raise RuntimeError(f"PostgreSQL could not bind a free port. Log:\n{self.log_tail()}")

    def _stop_proc(self, graceful: bool = True) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if graceful and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)  # "fast" shutdown
                proc.wait(timeout=STOP_TIMEOUT)
                return
            except subprocess.TimeoutExpired:
                pass
        # Not yet reaped, so the process group id cannot have been reused.
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # postmaster and any backends
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


class _PortInUse(Exception):
    pass


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's throwaway PostgreSQL server."""
    reason = postgres_available()
    if reason is not None:
        if _ci():
            pytest.fail(f"PostgreSQL is required when CI=true: {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL not available: {reason}")
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL of a fresh, empty database (dropped after the test)."""
    name = f"t_{uuid.uuid4().hex}"
    url = postgres_server.create_database(name)
    yield url
    with contextlib.suppress(Exception):  # the server goes away with the session anyway
        postgres_server.drop_database(name)
