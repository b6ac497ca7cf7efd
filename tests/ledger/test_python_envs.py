"""Virtualenv and external-Python tasks (ledger/sdk/python_envs.py): environments built once per requirement set,
under a lock, complete or rebuilt; the callable runs in the other interpreter with its arguments and value."""

from __future__ import annotations

import concurrent.futures
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger import DAG, task
from ledger.core.errors import DagDefinitionError, SkipTask
from ledger.sdk.describe import structure_of
from ledger.sdk.python_envs import MARKER, EnvSpec, ExternalPythonTask, PythonVirtualenvTask, ensure_env, run_elsewhere

START = pendulum.datetime(2024, 1, 1, tz="UTC")


def tiny_wheel(folder: Path, version: str = "1.0") -> Path:
    """A local wheel (no index, no build step): `import tinypkg; tinypkg.VERSION`."""
    path = folder / f"tinypkg-{version}-py3-none-any.whl"
    info = f"tinypkg-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("tinypkg/__init__.py", f"VERSION = {version!r}\n")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: tinypkg\nVersion: {version}\n")
        wheel.writestr(f"{info}/WHEEL",
                       "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    return path


def tiny_version(suffix: str) -> Any:
    import tinypkg  # type: ignore[import-not-found]

    return tinypkg.VERSION + suffix


def test_an_environment_is_built_once_with_its_requirements_and_runs_the_callable(tmp_path: Path) -> None:
    spec = EnvSpec(sys.executable, (str(tiny_wheel(tmp_path)),), False)
    python = ensure_env(spec, tmp_path / "venvs")
    assert (python.parent.parent / MARKER).exists()
    assert run_elsewhere(str(python), tiny_version, ["!"], {}, skip_on_exit_code=[], env=None) == "1.0!"
    built = (python.parent.parent / MARKER).stat().st_mtime_ns
    assert ensure_env(spec, tmp_path / "venvs") == python  # cached: not built again
    assert (python.parent.parent / MARKER).stat().st_mtime_ns == built
    (tmp_path / "v2").mkdir()
    other = ensure_env(EnvSpec(sys.executable, (str(tiny_wheel(tmp_path / "v2", "2.0")),), False), tmp_path / "venvs")
    assert other != python  # another requirement set: another environment
    assert run_elsewhere(str(other), tiny_version, ["?"], {}, skip_on_exit_code=[], env=None) == "2.0?"


def test_two_tries_building_the_same_environment_build_it_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    spec = EnvSpec(sys.executable, (), False)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # the lock is a file lock: threads contend as processes
        found = list(pool.map(lambda _: ensure_env(spec, tmp_path), range(2)))
    assert found[0] == found[1]
    out = capsys.readouterr().out
    assert out.count("building the environment") == 1
    assert "built by another try" in out


def test_an_environment_left_incomplete_is_built_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = EnvSpec(sys.executable, (), False)
    half = tmp_path / spec.key()
    (half / "bin").mkdir(parents=True)  # a build that died before its marker
    python = ensure_env(spec, tmp_path)
    assert "removing the incomplete environment" in capsys.readouterr().out
    assert (half / MARKER).exists() and python.exists()


def test_a_requirement_that_cannot_install_fails_the_build_and_leaves_nothing(tmp_path: Path) -> None:
    spec = EnvSpec(sys.executable, (str(tmp_path / "missing-1.0-py3-none-any.whl"),), False, ("--no-index",))
    with pytest.raises(RuntimeError, match=r"building the environment .* failed"):
        ensure_env(spec, tmp_path / "venvs")
    assert not (tmp_path / "venvs" / spec.key()).exists()


def add(a: int, b: int, when: Any = None, **context: Any) -> Any:
    import datetime
    import sys

    assert "ti" not in context  # a context value that cannot be pickled is left out
    assert type(when) is datetime.datetime  # a pendulum DateTime arrives as a plain datetime
    return {"sum": a + b, "python": sys.executable, "when": when.isoformat()}


def leave(code: int) -> None:
    import sys

    sys.exit(code)


def test_arguments_and_the_value_cross_with_pickle_and_exit_codes_skip_or_fail() -> None:
    got = run_elsewhere(sys.executable, add, [1], {"b": 2, "when": START, "ti": threading.Lock()}, skip_on_exit_code=[],
                        env=None)
    assert got == {"sum": 3, "python": sys.executable, "when": "2024-01-01T00:00:00+00:00"}
    with pytest.raises(TypeError, match="'when'"):
        run_elsewhere(sys.executable, add, [1, 2], {"when": threading.Lock()}, skip_on_exit_code=[], env=None)
    with pytest.raises(SkipTask):
        run_elsewhere(sys.executable, leave, [99], {}, skip_on_exit_code=[99], env=None)
    with pytest.raises(RuntimeError, match=r"exit code 3"):
        run_elsewhere(sys.executable, leave, [3], {}, skip_on_exit_code=[99], env=None)


def adder(n: int) -> Any:
    import sys

    return lambda x: (x + n, "dill" in sys.modules)  # pickle cannot pass a lambda back


def test_values_cross_with_dill_both_ways_when_the_task_says_so() -> None:
    got = run_elsewhere(sys.executable, adder, [2], {}, skip_on_exit_code=[], env=None, serializer="dill")
    assert got(40) == (42, True)  # the lambda made in the other interpreter, read back here with dill
    with pytest.raises(RuntimeError, match="exit code 1"):  # pickle cannot write the lambda it returns
        run_elsewhere(sys.executable, adder, [2], {}, skip_on_exit_code=[], env=None)
    double = eval("lambda x: x * 2", {})  # a function of no module: dill writes it whole, pickle by name only
    twice = run_elsewhere(sys.executable, apply, [], {"fn": double, "x": 21}, skip_on_exit_code=[], env=None,
                          serializer="dill")
    assert twice == 42
    with pytest.raises(TypeError, match="'fn'"):
        run_elsewhere(sys.executable, apply, [], {"fn": double, "x": 21}, skip_on_exit_code=[], env=None)


def apply(fn: Any, x: int) -> Any:
    return fn(x)


def test_dill_is_part_of_the_version_and_of_a_virtualenvs_requirements() -> None:
    import dill  # type: ignore[import-untyped]

    def work() -> int:
        return 1

    with DAG("venv", start_date=START) as dag:
        chosen = PythonVirtualenvTask("chosen", work, requirements=["tinypkg"], serializer="dill")
        named = PythonVirtualenvTask("named", work, requirements=["Dill>=0.3"], use_dill=True)
        ExternalPythonTask("outside", work, python=sys.executable, serializer="dill")
        plain = PythonVirtualenvTask("plain", work, requirements=["tinypkg"])
    tasks = {t["task_id"]: t["definition"] for t in structure_of(dag)["tasks"]}
    assert tasks["chosen"]["serializer"] == tasks["named"]["serializer"] == tasks["outside"]["serializer"] == "dill"
    assert "serializer" not in tasks["plain"]  # pickle, the default: versions made before are unchanged
    assert chosen.env_spec().requirements == ("tinypkg", f"dill=={dill.__version__}")  # ledger's version of it
    assert named.env_spec().requirements == ("Dill>=0.3",)  # the DAG's own requirement of it is kept
    assert plain.env_spec().requirements == ("tinypkg",)


def test_dill_without_dill_beside_ledger_is_refused_at_parse_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dill", None)  # how Python marks a module that cannot be imported
    with DAG("bad", start_date=START), pytest.raises(DagDefinitionError, match=r"pip install 'ledger\[dill\]'"):
        PythonVirtualenvTask("t", add, serializer="dill")


def test_the_requirement_set_is_part_of_the_version() -> None:
    def work() -> int:
        return 1

    structures = []
    for reqs in (["tinypkg==1.0"], ["tinypkg==2.0"]):
        with DAG("venv", start_date=START) as dag:
            PythonVirtualenvTask("work", work, requirements=reqs)
        structures.append(structure_of(dag))
    [first], [second] = ([t["definition"] for t in s["tasks"] if t["task_id"] == "work"] for s in structures)
    assert first["requirements"] == ["tinypkg==1.0"] and second["requirements"] == ["tinypkg==2.0"]
    assert first["system_site_packages"] is True  # Airflow's default


def test_decorators_make_virtualenv_and_external_python_tasks() -> None:
    with DAG("decorated", start_date=START) as dag:
        @task.virtualenv(requirements=["tinypkg"], system_site_packages=False)  # type: ignore[attr-defined]
        def inside(x: int) -> int:
            return x

        @task.external_python(python=sys.executable, task_id="outside")  # type: ignore[attr-defined]
        def elsewhere(x: int) -> int:
            return x

        inside(1)
        elsewhere.override(task_id="again")(2)
    assert isinstance(dag.tasks["inside"], PythonVirtualenvTask)
    assert dag.tasks["inside"].requirements == ["tinypkg"]
    assert isinstance(dag.tasks["again"], ExternalPythonTask) and dag.tasks["again"].python == sys.executable


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"python_callable": lambda: 1}, "defined with def"),
    ({"python_callable": add, "serializer": "cloudpickle"}, "serializer='cloudpickle' is not supported; use 'pickle'"),
    ({"python_callable": add, "requirements": [""]}, "list of requirement strings"),
    ({"python_callable": add, "python_version": "three"}, "not a version"),
    ({"python_callable": add, "requirements": "requirements.txt"}, "a requirements file is not supported"),
])
def test_what_cannot_run_in_another_interpreter_is_refused_at_parse_time(kwargs: dict[str, Any], message: str) -> None:
    with DAG("bad", start_date=START), pytest.raises(DagDefinitionError, match=message):
        PythonVirtualenvTask("t", **kwargs)
