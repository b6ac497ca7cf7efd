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
    ({"python_callable": add, "serializer": "dill"}, "serializer='dill' is not supported"),
    ({"python_callable": add, "use_dill": True}, "serializer='dill' is not supported"),
    ({"python_callable": add, "requirements": [""]}, "list of requirement strings"),
    ({"python_callable": add, "python_version": "three"}, "not a version"),
    ({"python_callable": add, "requirements": "requirements.txt"}, "a requirements file is not supported"),
])
def test_what_cannot_run_in_another_interpreter_is_refused_at_parse_time(kwargs: dict[str, Any], message: str) -> None:
    with DAG("bad", start_date=START), pytest.raises(DagDefinitionError, match=message):
        PythonVirtualenvTask("t", **kwargs)
