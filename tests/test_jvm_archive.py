"""The suite's class-data archives (tests/jvm_archive.py, decision 0347): keyed by the JDK and PySpark's jars, and
silent in a JVM that cannot use them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import jvm_archive

pytestmark = pytest.mark.scenario  # (starts java)


def test_the_archives_folder_changes_with_pysparks_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on PATH")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"one")
    monkeypatch.setattr(jvm_archive, "spark_jars", lambda: jars)
    first = jvm_archive.folder()
    assert first is not None and first.parent == jvm_archive.CACHE and jvm_archive.folder() == first
    (jars / "spark-core.jar").write_bytes(b"a new build")
    assert jvm_archive.folder() not in (None, first)
    monkeypatch.setattr(jvm_archive, "spark_jars", lambda: None)
    assert jvm_archive.folder() is None
    assert jvm_archive.options("-Xss1m", "submit", None) == "-Xss1m"
    assert jvm_archive.options("-Xss1m", "submit", tmp_path) == "-Xss1m"  # not there yet: not named
    (tmp_path / "submit.jsa").write_bytes(b"")
    assert jvm_archive.options("-Xss1m", "submit", tmp_path).startswith(f"-Xss1m -XX:SharedArchiveFile={tmp_path}/")


def test_a_jvm_given_an_archive_it_cannot_use_prints_what_it_prints_without(tmp_path: Path) -> None:
    """An archive made for another class path (Spark's launcher's classes, from its jar): the JVM runs as without
    it and says nothing (the same options without the logging turned off do warn: the check can fail)."""
    jars = jvm_archive.spark_jars()
    if shutil.which("java") is None or jars is None:
        pytest.skip("no java on PATH or no PySpark")
    made = tmp_path / "launcher.jsa"
    (launcher_jar,) = jars.glob("spark-launcher_*.jar")
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={made}", "-cp", str(launcher_jar),
                    "org.apache.spark.launcher.Main"], capture_output=True, timeout=120)  # (usage: exits 1)
    assert made.exists()
    elsewhere = tmp_path / "classes"
    elsewhere.mkdir()

    def version(*options: str) -> str:
        done = subprocess.run(["java", *options, "-cp", str(elsewhere), "-version"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    plain = version()
    assert version(f"-XX:SharedArchiveFile={made}", *jvm_archive.QUIET.split()) == plain
    assert "Unable to use shared archive" in version(f"-XX:SharedArchiveFile={made}")
