"""The scenario tests start `ledger` commands from a warm interpreter (tests/launcher.py, decision 0328): each is
still the real console script in a process of its own, which sees what the console script started by
subprocess.Popen sees. CI runs this module both ways (LEDGER_TEST_CLI=subprocess: every command the console
script's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import launcher
from tests.conftest import DAILY_DAG, LEDGER, Cli
from tests.scheduler.test_scheduler_cli import FAST, query

# a DAG file that writes what the process parsing it sees (a DAG file processor, forked by the command)
PROBE = """
import json, os, sys
from pathlib import Path

process = sys.modules["multiprocessing.process"]  # (the DAG file processor forks with multiprocessing)
billiard = sys.modules.get("billiard.process")  # (Celery's copy of it, if the command's process has it)
Path(os.environ["LEDGER_PROBE_TO"]).write_text(json.dumps({
    "env": dict(os.environ), "cwd": os.getcwd(), "argv": sys.argv, "orig_argv": sys.orig_argv,
    "path": sys.path, "executable": sys.executable, "flags": list(sys.flags), "command": os.getppid(),
    "modules": sorted(m for m in sys.modules if m == "tests" or m.startswith("tests.")),
    "mp_dir": process.ORIGINAL_DIR, "mp_key": process.current_process().authkey.hex(),
    "mp_main": getattr(sys.modules.get("__mp_main__"), "__file__", None),
    "billiard_dir": billiard and billiard.ORIGINAL_DIR,
    "billiard_key": billiard and billiard.current_process().authkey.hex()}))

import pendulum
from ledger import DAG, BashTask

with DAG("probe", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    BashTask("t", bash_command="true")
"""


def probe(cli: Cli, start: Any, name: str, **extra: str) -> tuple[Any, dict[str, Any], str]:
    """`ledger dags list` of a DAGs folder holding PROBE, started by `start` (launcher.popen or subprocess.Popen)
    in a working directory of its own: (its handle, what its DAG file processor saw, its output)."""
    where = cli.home / name
    (where / "dags").mkdir(parents=True)
    (where / "dags" / "probe.py").write_text(PROBE)  # a DAGs folder of its own: the file is parsed again
    env = {**cli.env, "LEDGER_DAGS_FOLDER": str(where / "dags"), "LEDGER_PROBE_TO": str(where / "probe.json"), **extra}
    with start([LEDGER, "dags", "list"], env=env, cwd=where, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
               text=True) as proc:
        out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    return proc, json.loads((where / "probe.json").read_text()), out


def test_a_warm_command_sees_what_the_console_scripts_process_sees(ready_cli: Cli) -> None:
    cold_proc, cold, cold_out = probe(ready_cli, subprocess.Popen, "cold")
    warm_proc, warm, warm_out = probe(ready_cli, launcher.popen, "warm")
    assert warm_out.replace("/warm/", "/cold/") == cold_out  # each has a folder of its own, named after it
    assert isinstance(warm_proc, launcher.Launched) != (os.environ.get("LEDGER_TEST_CLI") == "subprocess")
    assert warm["command"] == warm_proc.pid and cold["command"] == cold_proc.pid  # the pid the test holds
    assert Path(warm["cwd"]).name == "warm" and Path(cold["cwd"]).name == "cold"
    assert Path(warm["mp_dir"]).name == "warm" and Path(cold["mp_dir"]).name == "cold"  # multiprocessing's too
    for seen, folder in ((warm, "warm"), (cold, "cold")):  # and Celery's copy of it, where the process has one
        assert seen["billiard_dir"] is None or Path(seen["billiard_dir"]).name == folder
    assert "launcher_zygote" not in str(warm["mp_main"])  # the warm interpreter's script is not the command's
    for seen in ("env", "argv", "orig_argv", "path", "executable", "flags"):
        assert json.dumps(warm[seen]).replace("/warm/", "/cold/") == json.dumps(cold[seen]), seen
    assert warm["modules"] == cold["modules"] == []  # nothing of the tests in the command


def test_each_command_has_the_environment_it_is_given_and_no_other(ready_cli: Cli) -> None:
    """The environment is replaced whole: a LEDGER_* variable one command had is not seen by the next."""
    _, first, _ = probe(ready_cli, launcher.popen, "first", LEDGER_PROBE_ONLY_HERE="1")
    _, second, _ = probe(ready_cli, launcher.popen, "second")
    assert first["env"]["LEDGER_PROBE_ONLY_HERE"] == "1"
    assert "LEDGER_PROBE_ONLY_HERE" not in second["env"]
    assert first["mp_key"] != second["mp_key"]  # multiprocessing's authentication key is each command's own
    assert first["billiard_key"] is None or first["billiard_key"] != second["billiard_key"]


@pytest.fixture
def own_launchers(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[Any, launcher.Launcher]]:
    """This test's warm interpreters, none of the test process's (whatever the tests before it started)."""
    started: dict[Any, launcher.Launcher] = {}
    monkeypatch.setattr(launcher, "_launchers", started)
    yield started
    for warm in started.values():
        warm.close()


def test_a_command_whose_environment_differs_beyond_ledgers_variables_is_forked_from_one_started_with_it(
        ready_cli: Cli, own_launchers: dict[Any, launcher.Launcher]) -> None:
    """The warm interpreter's imports may read any variable but LEDGER_* ones: a command in another environment
    gets a warm interpreter of its own, started in that environment, and sees what the console script sees."""
    subprocess_mode = os.environ.get("LEDGER_TEST_CLI") == "subprocess"
    _, cold, _ = probe(ready_cli, subprocess.Popen, "cold", COLUMNS="40")
    warm_proc, warm, _ = probe(ready_cli, launcher.popen, "warm", COLUMNS="40")
    same_proc, _, _ = probe(ready_cli, launcher.popen, "same")
    assert json.dumps(warm["env"]).replace("/warm/", "/cold/") == json.dumps(cold["env"])
    assert warm["env"]["COLUMNS"] == "40"
    for proc in (warm_proc, same_proc):
        assert isinstance(proc, launcher.Launched) != subprocess_mode
    assert sorted(dict(key)["COLUMNS"] for key in own_launchers) == ([] if subprocess_mode else ["200", "40"])


def held(cli: Cli, columns: str) -> Any:
    """`ledger users create` in an environment of its own (COLUMNS), running until the test writes its password."""
    return launcher.popen([LEDGER, "users", "create", f"held{columns}"], env={**cli.env, "COLUMNS": columns},
                          cwd=cli.home, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def release(proc: Any) -> None:
    out, _ = proc.communicate(b"a password\n", timeout=300)
    assert proc.returncode == 0, out


def version(cli: Cli, columns: str) -> Any:
    with launcher.popen([LEDGER, "version"], env={**cli.env, "COLUMNS": columns}, stdout=subprocess.PIPE) as proc:
        assert proc.communicate(timeout=300)[0].startswith(b"ledger ")
    return proc


def test_past_the_most_warm_interpreters_and_under_the_subprocess_switch_the_console_script_runs(
        ready_cli: Cli, own_launchers: dict[Any, launcher.Launcher], monkeypatch: pytest.MonkeyPatch) -> None:
    """A command in a new environment while each warm interpreter runs one runs the console script."""
    monkeypatch.setattr(launcher, "MOST", 1)
    running = held(ready_cli, "40")
    procs = [running, version(ready_cli, "41"), version(ready_cli, "40")]
    release(running)
    expected = subprocess.Popen if os.environ.get("LEDGER_TEST_CLI") == "subprocess" else launcher.Launched
    assert [type(proc) for proc in procs] == [expected, subprocess.Popen, expected]
    monkeypatch.setenv("LEDGER_TEST_CLI", "subprocess")
    with launcher.popen([LEDGER, "version"], env={**ready_cli.env, "COLUMNS": "40"},
                        stdout=subprocess.DEVNULL) as proc:
        assert isinstance(proc, subprocess.Popen)


def test_past_the_most_warm_interpreters_the_least_recently_used_idle_one_makes_room(
        ready_cli: Cli, own_launchers: dict[Any, launcher.Launcher], monkeypatch: pytest.MonkeyPatch) -> None:
    """Which commands are forked never depends on the tests before: a warm interpreter whose commands have all
    ended is closed for a command in a new environment, the least recently used idle one first."""
    if os.environ.get("LEDGER_TEST_CLI") == "subprocess":
        pytest.skip("no warm interpreter under LEDGER_TEST_CLI=subprocess")
    monkeypatch.setattr(launcher, "MOST", 2)
    for columns in ("40", "41", "40", "42"):  # 41 was used least recently when 42 came
        assert isinstance(version(ready_cli, columns), launcher.Launched), columns
    assert [dict(key)["COLUMNS"] for key in own_launchers] == ["40", "42"]
    running = held(ready_cli, "40")  # 40 is busy (and the most recently used): 42 makes room for 43
    assert isinstance(running, launcher.Launched)
    assert isinstance(version(ready_cli, "43"), launcher.Launched)
    assert [dict(key)["COLUMNS"] for key in own_launchers] == ["40", "43"]
    release(running)


def test_a_warm_interpreter_that_has_gone_is_started_again(
        ready_cli: Cli, own_launchers: dict[Any, launcher.Launcher]) -> None:
    if os.environ.get("LEDGER_TEST_CLI") == "subprocess":
        pytest.skip("no warm interpreter under LEDGER_TEST_CLI=subprocess")
    assert launcher.run([LEDGER, "version"], env=ready_cli.env, capture_output=True, timeout=300).returncode == 0
    (first,) = own_launchers.values()
    first.process.kill()
    first.process.wait()
    with launcher.popen([LEDGER, "version"], env=ready_cli.env, stdout=subprocess.PIPE) as proc:
        assert proc.communicate(timeout=300)[0].startswith(b"ledger ")
    assert isinstance(proc, launcher.Launched)
    (second,) = own_launchers.values()
    assert second is not first and second.alive()


def test_exit_statuses_and_streams_are_the_commands(ready_cli: Cli) -> None:
    """A warm command ends without the interpreter's teardown (decision 0360): its status, and what it wrote to
    block-buffered pipes (the help, longer than one line), are still the console script's."""
    for args in (["version"], ["nosuchcommand"], ["backfill", "nope", "--start", "2024-03-01", "--end", "x"],
                 ["--help"], ["runs", "list"]):
        warm = launcher.run([LEDGER, *args], capture_output=True, text=True, env=ready_cli.env, cwd=ready_cli.home,
                            timeout=300)
        cold = subprocess.run([LEDGER, *args], capture_output=True, text=True, env=ready_cli.env, cwd=ready_cli.home,
                              timeout=300)
        assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr), args


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_the_pid_the_test_holds_reaches_the_command(ready_cli: Cli, signum: int) -> None:
    """`ledger scheduler` (no --exit-when-idle: it runs until stopped) in a session of its own, made before `popen`
    returns; once it has run a try (its signal handlers are in place), the test signals the pid it holds and sees
    the status the signal gives the scheduler: 0 after a SIGTERM (it stops), -9 after a SIGKILL; reaped after
    either."""
    ready_cli.write_dag("daily.py", DAILY_DAG)
    ready_cli.ok("trigger", "daily", "--logical-date", "2024-03-01")
    with launcher.popen([LEDGER, "scheduler"], env={**ready_cli.env, **FAST}, cwd=ready_cli.home,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True) as proc:
        assert os.getpgid(proc.pid) == proc.pid  # its own group from the moment the test holds its pid
        deadline = time.monotonic() + 300
        while not query(ready_cli, "SELECT 1 FROM task_try WHERE state = 'success'"):
            assert time.monotonic() < deadline and proc.poll() is None, "no try ran"
            time.sleep(0.1)
        assert os.getpgid(proc.pid) == proc.pid
        os.kill(proc.pid, signum)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == (0 if signum == signal.SIGTERM else -signal.SIGKILL), out
        with pytest.raises(ProcessLookupError):  # ended and reaped
            os.kill(proc.pid, 0)


# imports the warm interpreter's PRELOAD in a fresh interpreter, recording each environment variable read meanwhile
RECORD_READS = """
import json, os, runpy, sys
read = set()
kind = type(os.environ)
plain_get, plain_iter = kind.__getitem__, kind.__iter__
def getitem(self, key):
    read.add(key)
    return plain_get(self, key)
def iterate(self):
    caller = sys._getframe(1)  # a copy of the whole environment, by the first caller outside the mapping's code
    while caller.f_globals["__name__"] in ("_collections_abc", "collections.abc", "os"):
        caller = caller.f_back
    read.add("copied by " + caller.f_globals["__name__"])
    return plain_iter(self)
zygote = runpy.run_path(sys.argv[1], run_name="preload")  # (defines PRELOAD; main() runs only as __main__)
kind.__getitem__, kind.__iter__ = getitem, iterate
import importlib
for name in zygote["PRELOAD"]:
    importlib.import_module(name)
kind.__getitem__, kind.__iter__ = plain_get, plain_iter
print(json.dumps(sorted(read)))
"""


def test_the_warm_interpreters_modules_read_no_ledger_variable_when_imported() -> None:
    """The rule tests/launcher.py rests on: a command forked from a warm interpreter sees its own LEDGER_*
    variables only if no preloaded module read one (or copied the environment) when it was imported."""
    done = subprocess.run([launcher._interpreter(), "-c", RECORD_READS, launcher.ZYGOTE], capture_output=True,
                          text=True, timeout=300, env={k: v for k, v in os.environ.items()
                                                      if not k.startswith("LEDGER_")})
    assert done.returncode == 0, done.stderr
    read = json.loads(done.stdout)
    assert [name for name in read if name.startswith("LEDGER_")] == []
    # copies of the whole environment: croniter asks platform.architecture(), which passes its copy to `file`;
    # wsgiref keeps one as the base of its servers' request environments (prometheus_client's metrics server)
    assert [name for name in read if name.startswith("copied by ")] == ["copied by platform",
                                                                      "copied by wsgiref.handlers"]
