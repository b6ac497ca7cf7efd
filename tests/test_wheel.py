"""The wheel installs anywhere: built from the repository, installed by deploy/install.sh (the image's install step)
into a new virtualenv outside the repository, and used from an empty folder: the database, a DAG with a Python, a
Bash and a Spark task and an Airflow-style DAG through the scheduler, the webserver's pages and static files, the
worker's help. Nothing of the checkout is on the path."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAGS = {
    "mixed.py": '''\
import pendulum
import scheduler

from ledger import DAG, BashTask, PythonTask, SparkTask


def count(spark, context):
    assert spark.range(5).count() == 5


def hello(context):
    assert scheduler.X == 2  # the DAGs folder's own helper: ledger takes no such name (decision 0296)
    print("python task ran")


with DAG("mixed", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    PythonTask("hello", hello) >> BashTask("bash", "echo bash task ran") >> SparkTask("spark", count)
''',
    "from_airflow.py": '''\
import pendulum
from airflow import DAG
from airflow.operators.bash import BashOperator

with DAG("from_airflow", schedule=None, start_date=pendulum.datetime(2024, 3, 1, tz="UTC")):
    BashOperator(task_id="echo", bash_command="echo {{ ds }}")
''',
    "scheduler.py": "X = 2\n",
}


def wheel_content_hash(wheel: Path) -> str:
    """What the wheel holds, not how it was zipped: its members' names and bytes (a zip's timestamps change with
    every build of the same tree)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            digest.update(name.encode() + b"\0" + hashlib.sha256(archive.read(name)).digest())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding the wheel built from this checkout (and its dependencies), outside the repository.

    The wheel is built every time; deploy/install.sh installs it into a virtualenv kept in this user's cache under
    the hash of the wheel's content, of install.sh and of the Python running it. A later run whose wheel holds the same
    bytes uses that virtualenv instead of installing again (most of this test's time); the one left from an older
    wheel is removed. A virtualenv is complete once its `installed` file exists."""
    where = tmp_path_factory.mktemp("wheel")
    # an sdist, and the wheel built from that sdist: what the sdist leaves out, the wheel lacks
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(where / "dist"), str(REPO)], check=True,
                   capture_output=True, timeout=900)
    [wheel] = (where / "dist").glob("ledger-*.whl")
    assert len(list((where / "dist").glob("ledger-*.tar.gz"))) == 1
    install = REPO / "deploy" / "install.sh"
    key = hashlib.sha256(f"{wheel_content_hash(wheel)} {hashlib.sha256(install.read_bytes()).hexdigest()} "
                         f"{sys.version}".encode()).hexdigest()[:20]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ledger-tests"
    venv = cache / f"wheel-venv-{key}"
    if (venv / "installed").exists():
        return venv
    cache.mkdir(parents=True, exist_ok=True)
    for old in cache.glob("wheel-venv-*"):  # an older wheel's, or one whose install did not finish
        shutil.rmtree(old, ignore_errors=True)
    # pip byte-compiles every module it installs (about 6,000 here, half of the install's CPU); the test's
    # commands compile only what they import, as they import it. (pip reads PIP_NO_COMPILE inverted: "0" is
    # --no-compile.)
    env = {**os.environ, "PIP_NO_COMPILE": "0"}
    done = subprocess.run(["sh", str(install), str(wheel), str(venv)], capture_output=True, text=True, timeout=1200,
                          env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    (venv / "installed").write_text(f"{wheel.name}\n")
    return venv


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEDGER_", "PYTHON"))}
    env.update(LEDGER_HOME=str(home), NO_COLOR="1", COLUMNS="200")
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_wheel_runs_a_pipeline_serves_the_web_view_and_keeps_out_of_the_checkout(installed: Path,
                                                                                      tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    for name, source in DAGS.items():
        (home / "dags" / name).write_text(source)
    env = _env(home)

    def ledger(*args: str) -> str:
        done = subprocess.run([str(installed / "bin" / "ledger"), *args], cwd=empty, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import ledger, ledger.cli; "
                            "print(ledger.__file__); print(ledger.cli.__file__)"], cwd=empty, env=env,
                           capture_output=True, text=True, check=True)
    assert str(REPO) not in where.stdout and str(installed) in where.stdout
    # one top-level name, `ledger`: a DAGs folder's `scheduler`, `backfill`, `cli` or `migrations` is the user's
    taken = subprocess.run([str(installed / "bin" / "python"), "-c", "import importlib.util; print([name for name in "
                            "('scheduler', 'backfill', 'cli', 'migrations') if importlib.util.find_spec(name)])"],
                           cwd=empty, env=env, capture_output=True, text=True, check=True)
    assert taken.stdout.strip() == "[]"

    assert "upgraded" in ledger("db", "upgrade")  # the migrations come from the wheel
    ledger("trigger", "mixed")
    ledger("trigger", "from_airflow", "--logical-date", "2024-03-01")
    ledger("scheduler", "--exit-when-idle")
    states = {dag: json.loads(ledger("timeline", dag, "--json"))[-1]["state"] for dag in ("mixed",
                                                                                                 "from_airflow")}
    assert states == {"mixed": "success", "from_airflow": "success"}

    help_modules = subprocess.run(
        [str(installed / "bin" / "python"), "-c", "import sys\nfrom ledger.cli.app import run\nsys.argv = ['ledger', "
         "'--help']\ntry:\n    run()\nexcept SystemExit:\n    pass\nprint('pyspark' in sys.modules)"],
        cwd=empty, env=env, capture_output=True, text=True, check=True)
    assert help_modules.stdout.strip().endswith("False")  # `ledger --help` never loads Spark
    assert "Run a Celery worker" in ledger("worker", "--help")

    port = _free_port()
    web = subprocess.Popen([str(installed / "bin" / "ledger"), "webserver", "--port", str(port)], cwd=empty, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert web.stdout is not None
        first = web.stdout.readline()  # it says where it serves once it is about to listen
        assert f"http://127.0.0.1:{port}/" in first, first
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/") as page:
                    html = page.read().decode()
                break
            except OSError:
                assert web.poll() is None and time.monotonic() < deadline, "the webserver did not answer"
                time.sleep(0.1)
        assert "mixed" in html  # a template of the wheel, rendered
        stylesheet = next(part.split('"')[1] for part in html.split("href=")[1:] if ".css" in part.split('"')[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{stylesheet}") as css:
            assert css.status == 200 and css.read()  # a static file of the wheel
    finally:
        web.terminate()
        web.wait(30)
