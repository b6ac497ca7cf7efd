"""The suite's JVMs map Spark's classes from an archive instead of loading them from the jars (decision 0347).

Each Spark session the tests start (a try's, a worker's, the Spark Connect server, Airflow's spark-submit) is two
JVMs: spark-submit's launcher, then the driver, which loads and verifies several thousand of Spark's classes before
it runs anything. HotSpot can keep the classes a run loaded in a class-data archive (AppCDS: written by
`-XX:ArchiveClassesAtExit`, read by `-XX:SharedArchiveFile`); a session that maps them from it takes about half the
CPU (docs/benchmarks.md, "Ninth pass"). The archives live in ~/.cache/ledger-tests/jvm-classes, one folder per
java binary and PySpark jars folder (a changed install makes a new one), and are made once per machine: the first
session that will start a JVM starts `python tests/jvm_archive.py FOLDER` in the background, which runs one small
Spark job through spark-submit with both JVMs writing their archives, and renames them into place once it has
ended; from the next test on, the test process names them in the JVMs' options. A JVM started before they are
there, or one whose class path differs from the archive's, loads its classes from the jars as before; the JVMs' own
messages about an archive they cannot use are turned off, so that no output a test compares changes."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ledger-tests" / "jvm-classes"
JOBS = ("submit", "launcher")  # the driver (SPARK_SUBMIT_OPTS), spark-submit's launcher (SPARK_LAUNCHER_OPTS)
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"  # (an archive a JVM cannot use is otherwise a warning on its output)
JOB = """
from pyspark.sql import SparkSession
import sys
spark = SparkSession.builder.appName("ledger-jvm-archive").getOrCreate()
frame = spark.range(1000).selectExpr("id % 7 AS key", "id AS value", "CAST(id AS STRING) AS name")
frame.groupBy("key").agg({"value": "sum", "name": "max"}).write.mode("overwrite").parquet(sys.argv[1])
spark.read.parquet(sys.argv[1]).join(frame, "key").filter("value > 10").orderBy("key").limit(5).collect()
frame.createOrReplaceTempView("t")
spark.sql("SELECT key, count(*) AS n FROM t GROUP BY key ORDER BY n DESC").collect()
spark.stop()
"""


def spark_jars() -> Path | None:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    jars = Path(spec.origin).parent / "jars"
    return jars if jars.is_dir() else None


def folder() -> Path | None:
    """Where this machine's archives are for the java on PATH and PySpark's jars; None without either."""
    java, jars = shutil.which("java"), spark_jars()
    if java is None or jars is None:
        return None
    real = Path(java).resolve()
    seen = hashlib.sha256(f"{real} {real.stat().st_mtime_ns} {real.stat().st_size}".encode())
    for jar in sorted(jars.iterdir()):
        stat = jar.stat()
        seen.update(f"{jar.name} {stat.st_mtime_ns} {stat.st_size}\n".encode())
    return CACHE / seen.hexdigest()[:16]


def ready(where: Path | None) -> bool:
    return where is not None and all((where / f"{job}.jsa").exists() for job in JOBS)


def options(base: str, job: str, where: Path | None) -> str:
    """`base` with the archive of `job` ("submit" or "launcher") to map once it is there (a JVM told to map a file
    that does not exist maps none, not even the JDK's own archive of its classes)."""
    if where is None or not (where / f"{job}.jsa").exists():
        return base
    return f"{base} -XX:SharedArchiveFile={where / f'{job}.jsa'} {QUIET}"


def start(where: Path | None, base: str) -> None:
    """Make the archives in the background unless they are there (one maker at a time: the others return), for
    JVMs started with `base` (the same collector and compiler as the JVMs that will map them)."""
    if where is None or ready(where):
        return
    where.mkdir(parents=True, exist_ok=True)
    with open(where / "make.log", "ab") as log:
        subprocess.Popen([sys.executable, __file__, str(where)], stdin=subprocess.DEVNULL, stdout=log,
                         stderr=subprocess.STDOUT, start_new_session=True,
                         env={**os.environ, "LEDGER_TEST_JVM_OPTIONS": base})


def make(where: Path, base: str) -> int:
    """Run JOB through spark-submit with both JVMs writing their archives; rename them into place once it ended."""
    with open(where / "make.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another maker has it
        if ready(where):
            return 0
        jars = spark_jars()
        assert jars is not None
        with tempfile.TemporaryDirectory(dir=where) as scratch:
            made = {job: Path(scratch) / f"{job}.jsa" for job in JOBS}
            script = Path(scratch) / "job.py"
            script.write_text(JOB)
            env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                   "SPARK_SUBMIT_OPTS": f"{base} -XX:ArchiveClassesAtExit={made['submit']}",
                   "SPARK_LAUNCHER_OPTS": f"{base} -XX:ArchiveClassesAtExit={made['launcher']}"}
            done = subprocess.run([str(jars.parent / "bin" / "spark-submit"), "--master", "local[2]",
                                   "--conf", "spark.ui.enabled=false", str(script), str(Path(scratch) / "out")],
                                  env=env, stdin=subprocess.DEVNULL, timeout=600)
            if done.returncode != 0 or not all(path.exists() for path in made.values()):
                print(f"no archive: spark-submit exited {done.returncode}", flush=True)
                return 1
            for job, path in made.items():
                os.replace(path, where / f"{job}.jsa")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(make(Path(sys.argv[1]), os.environ.get("LEDGER_TEST_JVM_OPTIONS", "")))
