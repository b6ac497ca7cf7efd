"""The SparkSession of a worker process: built from configuration on its first Spark try, reused by the
next ones, stopped when the process ends.

Configuration, from the environment of the scheduler (its workers inherit it), weakest first:

* defaults for a small machine: `DEFAULTS` below (4 shuffle partitions, no UI, dynamic partition
  overwrite, UTC session time zone, 1 GiB of driver memory, log level WARN);
* `LEDGER_SPARK_CONF`: a JSON object of spark.* settings, e.g. '{"spark.sql.shuffle.partitions": "16"}'
  (it may hold spark.master or spark.remote too);
* `LEDGER_SPARK_MASTER`: the master URL (default `local[*]`), e.g. `spark://host:7077`;
* `LEDGER_SPARK_REMOTE`: a Spark Connect address, `sc://host:15002`; the session is then a Connect client
  (the driver runs on the Connect server, and this machine needs no Java);
* a task's own `spark_conf`: runtime (SQL) settings are set for its try and put back afterwards; others
  that differ from the running session restart it (classic sessions only).

A local (classic) session needs Java 17 or newer: JAVA_HOME/bin/java, else `java` on PATH, checked once
per process; without it the try fails with one line saying so (`NO_JAVA`).

Nothing here imports pyspark until a session is built.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

ENV_CONF = "LEDGER_SPARK_CONF"
ENV_MASTER = "LEDGER_SPARK_MASTER"
ENV_REMOTE = "LEDGER_SPARK_REMOTE"

DEFAULT_MASTER = "local[*]"
DEFAULTS: dict[str, str] = {
    "spark.app.name": "ledger",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    "spark.log.level": "WARN",
}
LOCAL_DEFAULTS: dict[str, str] = {  # for local[...] masters only: no network name lookups
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
MIN_JAVA = 17
NO_JAVA = "Spark needs Java 17+: no java found (set JAVA_HOME or install a JDK)"


class SparkUnavailable(Exception):
    """Spark cannot run here; the message is the one line a failed try reports."""


class DriverLost(SparkUnavailable):
    """The JVM behind this process's session is gone: this process cannot start another one reliably, so it
    should be replaced (a LocalExecutor worker exits after reporting the try)."""


@dataclass(frozen=True)
class SparkSettings:
    master: str = DEFAULT_MASTER
    remote: str | None = None  # an sc:// address: a Spark Connect session
    conf: dict[str, str] = field(default_factory=dict)  # defaults and LEDGER_SPARK_CONF

    @property
    def is_local(self) -> bool:
        return self.remote is None and self.master.startswith("local")


def _as_conf_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def load_settings(env: Mapping[str, str] | None = None) -> SparkSettings:
    """The session's configuration from the environment (see the module's docstring)."""
    env = os.environ if env is None else env
    conf = dict(DEFAULTS)
    raw = env.get(ENV_CONF, "").strip()
    if raw:
        try:
            given = json.loads(raw)
        except ValueError as exc:
            raise SparkUnavailable(f"{ENV_CONF} is not valid JSON: {exc}") from None
        if not isinstance(given, dict) or not all(isinstance(k, str) for k in given):
            raise SparkUnavailable(f"{ENV_CONF} must be a JSON object of spark.* settings, "
                                   'e.g. {"spark.sql.shuffle.partitions": "8"}')
        conf.update({key: _as_conf_value(value) for key, value in given.items() if value is not None})
    master = env.get(ENV_MASTER, "").strip() or conf.pop("spark.master", "") or DEFAULT_MASTER
    conf.pop("spark.master", None)
    remote = env.get(ENV_REMOTE, "").strip() or conf.pop("spark.remote", "") or None
    conf.pop("spark.remote", None)
    if remote is not None and not remote.startswith("sc://"):
        raise SparkUnavailable(f"the Spark Connect address must look like sc://host:port, not {remote!r}")
    if remote is None and master.startswith("local"):
        conf = {**LOCAL_DEFAULTS, **conf}
    return SparkSettings(master=master, remote=remote, conf=conf)


# -- Java ------------------------------------------------------------------------------------------

_java_checked: dict[tuple[str, str], str] = {}  # (JAVA_HOME, PATH) -> the java that passed


def java_major(version_output: str) -> int | None:
    """17 for 'openjdk version "17.0.15" ...', 8 for 'java version "1.8.0_292"'."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def check_java(env: Mapping[str, str] | None = None) -> str:
    """The java that Spark will use, once it has shown it is 17 or newer; SparkUnavailable otherwise."""
    env = os.environ if env is None else env
    java_home, path = env.get("JAVA_HOME", ""), env.get("PATH", os.defpath)
    key = (java_home, path)
    if key in _java_checked:
        return _java_checked[key]
    if java_home:
        java = os.path.join(java_home, "bin", "java")
        if not os.access(java, os.X_OK):
            raise SparkUnavailable(f"Spark needs Java 17+: JAVA_HOME={java_home} has no bin/java "
                                   "(point JAVA_HOME at a JDK 17 or newer)")
    else:
        found = shutil.which("java", path=path)
        if found is None:
            raise SparkUnavailable(NO_JAVA)
        java = found
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkUnavailable(f"Spark needs Java 17+: `{java} -version` failed: {exc}") from None
    output = (done.stderr or "") + (done.stdout or "")
    major = java_major(output)
    if done.returncode != 0:
        first = output.strip().splitlines()[0] if output.strip() else f"exit code {done.returncode}"
        raise SparkUnavailable(f"Spark needs Java 17+: `{java} -version` failed: {first}")
    if major is not None and major < MIN_JAVA:
        raise SparkUnavailable(f"Spark needs Java 17+: {java} is Java {major} "
                               "(point JAVA_HOME at a JDK 17 or newer)")
    _java_checked[key] = java
    return java


# -- the session -------------------------------------------------------------------------------------

_lock = threading.RLock()
_session: Any = None  # the SparkSession of this process, once built
_session_settings: SparkSettings | None = None
_session_pid = 0  # the process that built it: a forked child must not use its parent's session
_atexit_registered = False
_relay_target = 2  # where the JVM's output is copied to (fd 2, i.e. the log of the running try)
_relay_lock = threading.Lock()

Say = Callable[[str], None]


def _quiet(text: str) -> None:
    pass


def current() -> Any:
    """The session of this process, or None."""
    return _session


def is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _alive(spark: Any) -> bool:
    """False when the session was stopped (by task code, say): a new one can be built. DriverLost when its
    JVM has died."""
    if is_connect(spark):
        return not bool(getattr(spark, "is_stopped", False))
    context = spark.sparkContext
    if getattr(context, "_jsc", None) is None:
        return False
    try:
        return not bool(context._jsc.sc().isStopped())
    except Exception as exc:
        raise DriverLost(f"the worker's Spark driver (JVM) is gone: {' '.join(str(exc).split())[:200]}") from None


def driver_lost() -> bool:
    """Has the JVM behind this process's session died (e.g. killed for lack of memory)?"""
    spark = _session
    if spark is None:
        return False
    try:
        _alive(spark)
    except DriverLost:
        return True
    return False


def describe(spark: Any) -> str:
    if is_connect(spark):
        return f"Spark Connect {_session_settings.remote if _session_settings else '?'}, " \
               f"Spark {spark.version}, session {getattr(spark, 'session_id', '?')}"
    context = spark.sparkContext
    return f"Spark {spark.version}, master {context.master}, app {context.applicationId}"


def _relay(read_fd: int) -> None:
    """Copy what the JVM writes to its stdout/stderr to fd 2 (the running try's log), until it exits."""
    global _relay_target
    while True:
        try:
            chunk = os.read(read_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        with _relay_lock:
            view = memoryview(chunk)
            while view:
                try:
                    written = os.write(_relay_target, view)
                except OSError:
                    break
                view = view[written:]
    with contextlib.suppress(OSError):
        os.close(read_fd)


@contextlib.contextmanager
def _jvm_output_to_running_try() -> Iterator[None]:
    """While a classic session launches its JVM: give the JVM a pipe for stdout and stderr, copied by a
    thread to whatever fd 2 is at the time (each try's log in turn), not to the log of the first try."""
    global _relay_target
    from pyspark import SparkContext

    if getattr(SparkContext, "_gateway", None) is not None:  # the JVM is already up
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_inheritable(read_fd, False)
    saved_err = os.dup(2)
    saved_out = os.dup(1)
    with _relay_lock:
        _relay_target = saved_err
    threading.Thread(target=_relay, args=(read_fd,), name="ledger-spark-output", daemon=True).start()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        with _relay_lock:
            _relay_target = 2
        os.close(saved_out)
        os.close(saved_err)


def _build(settings: SparkSettings, extra: Mapping[str, str], say: Say) -> Any:
    global _session, _session_settings, _session_pid, _atexit_registered
    began = time.monotonic()
    conf = {**settings.conf, **extra}
    if settings.remote is not None:
        try:
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.remote(settings.remote)
            for key, value in conf.items():  # the server's own settings (UI, memory, ...) are not ours to set
                if key.startswith("spark.sql.") or key not in DEFAULTS:
                    builder = builder.config(key, value)
            spark = builder.getOrCreate()
        except ImportError as exc:
            raise SparkUnavailable("Spark Connect needs pyspark's connect extras (pip install 'pyspark[connect]'):"
                                   f" {exc}") from None
    else:
        check_java()
        if settings.is_local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python UDF workers run our interpreter
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(settings.master)
        for key, value in conf.items():
            builder = builder.config(key, value)
        with _jvm_output_to_running_try():
            spark = builder.getOrCreate()
        with contextlib.suppress(Exception):
            spark.sparkContext.setLogLevel(conf.get("spark.log.level", "WARN"))
    _session, _session_settings = spark, settings
    _session_pid = os.getpid()
    if not _atexit_registered:
        atexit.register(stop_session)
        _atexit_registered = True
    say(f"Spark session started in {time.monotonic() - began:.1f} s ({describe(spark)})")
    return spark


def _apply(spark: Any, conf: Mapping[str, str]) -> tuple[list[tuple[str, str | None]], str | None]:
    """Set a try's runtime settings; returns what to put back, and the first setting that cannot change on
    this session (with why), if any."""
    previous: list[tuple[str, str | None]] = []
    for key, value in conf.items():
        try:
            current_value = spark.conf.get(key, None)
        except Exception:
            current_value = None
        if current_value == value:
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:
            _restore(spark, previous)
            return [], f"{key}={value}: {' '.join(str(exc).split())[:200]}"
        previous.append((key, current_value))
    return previous, None


def _restore(spark: Any, previous: list[tuple[str, str | None]]) -> None:
    for key, value in reversed(previous):
        with contextlib.suppress(Exception):
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextlib.contextmanager
def session(task_conf: Mapping[str, str] | None = None, *, say: Say = _quiet) -> Iterator[Any]:
    """The process's session (built on first use) with `task_conf` applied for the duration."""
    task_conf = dict(task_conf or {})
    with _lock:
        settings = load_settings()
        spark = _session
        if spark is not None and _session_pid != os.getpid():
            raise SparkUnavailable("this process was forked from one that runs a Spark session, which it "
                                   "cannot share: run Spark tries in a process started afresh")
        if spark is not None and not _alive(spark):
            say("the Spark session was stopped: starting a new one")
            stop_session()
            spark = None
        if spark is not None and _session_settings is not None and (
                (settings.remote, settings.master) != (_session_settings.remote, _session_settings.master)):
            say("the Spark configuration changed: restarting the session")
            stop_session()
            spark = None
        if spark is None:
            # settings outside spark.sql.* are mostly fixed once a session runs: start with the task's
            static = {k: v for k, v in task_conf.items() if not k.startswith("spark.sql.")}
            spark = _build(settings, static, say)
        else:
            say(f"Spark session reused ({describe(spark)})")
        previous, refused = _apply(spark, task_conf)
        if refused is not None:
            if is_connect(spark):
                raise SparkUnavailable(f"spark_conf {refused}")
            say(f"restarting the Spark session for spark_conf {refused}")
            stop_session()
            spark = _build(settings, task_conf, say)
            previous, refused = _apply(spark, task_conf)
            if refused is not None:
                raise SparkUnavailable(f"spark_conf {refused}")
    try:
        yield spark
    finally:
        _restore(spark, previous)


def cancel_all() -> None:
    """Cancel the Spark work running on this process's session (all of it: one try runs at a time)."""
    spark = _session
    if spark is None:
        return
    with contextlib.suppress(Exception):
        if is_connect(spark):
            spark.interruptAll()
        else:
            spark.sparkContext.cancelAllJobs()


def stop_session() -> None:
    """Stop this process's session, if any (also run at exit)."""
    global _session, _session_settings
    with _lock:
        spark, _session, _session_settings = _session, None, None
    if spark is not None and _session_pid == os.getpid():  # never a session inherited through fork
        with contextlib.suppress(Exception):
            spark.stop()


def discard_session() -> None:
    """Forget a session whose try would not stop: stop it in the background (it may hang)."""
    global _session, _session_settings
    spark, _session, _session_settings = _session, None, None
    if spark is not None and _session_pid == os.getpid():
        threading.Thread(target=lambda: spark.stop(), name="ledger-spark-stop", daemon=True).start()
