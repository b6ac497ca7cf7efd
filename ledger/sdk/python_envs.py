"""Python tasks that run in another interpreter: a virtualenv built for their requirements, or a given Python.

* ``PythonVirtualenvTask`` (Airflow's ``PythonVirtualenvOperator``, ``@task.virtualenv``): the callable runs in a
  virtualenv with ``requirements`` installed, made from ``python_version`` (``pythonX.Y`` on PATH) or from the
  Python ledger runs on. The environment is built once per *requirement set* (requirements, interpreter,
  ``system_site_packages``, pip options) and cached under ``$LEDGER_HOME/venvs/<key>`` (or ``venv_cache_path``):
  a try takes a file lock on ``<key>.lock`` (so two tries never build the same environment at once), builds
  the folder, and writes its marker file last (atomically): a folder without the marker is a broken build,
  removed and built again. With ``system_site_packages`` (Airflow's default, True) the environment also sees
  the packages of ledger's own environment, as Airflow's sees Airflow's.
* ``ExternalPythonTask`` (``ExternalPythonOperator``, ``@task.external_python``): the callable runs in the
  interpreter at ``python``, nothing is installed.

The requirement set is part of the task's definition, so of the DAG version: a run pinned to a version runs
with that version's set (the environment of another set is another folder). The callable's source (a plain
``def``: its imports inside it, as Airflow requires) is written to a script the other interpreter runs;
arguments and the return value cross with ``pickle`` (protocol 4), as Airflow's default serializer, or with
``dill`` when the task says ``serializer="dill"`` (or ``use_dill=True``): dill must be installed beside ledger
(``pip install 'ledger[dill]'``, checked when the file is parsed) and in the other interpreter (a virtualenv task
gets it added to its requirements, pinned to ledger's version of it, as Airflow adds it; an external Python must
have it). Datetimes are passed as plain ``datetime.datetime`` (UTC), and context values that cannot be serialised
(``ti``, ``dag``) are left out unless the callable names them. The return value is the task's XCom, as for any
Python task; the interpreter's output goes to the try's log; an exit code in ``skip_on_exit_code`` skips the task.
"""

from __future__ import annotations

import ast
import contextlib
import datetime as dt
import fcntl
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.core.errors import DagDefinitionError, SkipTask
from ledger.infra.config import load_settings
from ledger.sdk.dag import PythonTask, TaskFunction

__all__ = ["EnvSpec", "ExternalPythonTask", "PythonVirtualenvTask", "ensure_env", "external_python", "virtualenv"]

MARKER = "ledger-env.json"  # written last: the environment is complete
PICKLE_PROTOCOL = 4
SERIALIZERS = ("pickle", "dill")  # the modules values cross with (both have dumps/loads with a protocol)


def _say(text: str) -> None:
    sys.stdout.write(f"[ledger] {text}\n")
    sys.stdout.flush()


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """What an environment is built from; its key names its folder."""

    python: str  # the interpreter it is made from (a path)
    requirements: tuple[str, ...]
    system_site_packages: bool
    pip_install_options: tuple[str, ...] = ()
    index_urls: tuple[str, ...] = ()
    parent_site: tuple[str, ...] = ()  # ledger's own site-packages, seen with system_site_packages

    def key(self) -> str:
        text = json.dumps([self.python, list(self.requirements), self.system_site_packages,
                           list(self.pip_install_options), list(self.index_urls), list(self.parent_site)])
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def _version_of(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _run(args: Sequence[str]) -> None:
    """A build step, its output in the try's log; CalledProcessError when it fails."""
    sys.stdout.flush()
    subprocess.run(list(args), check=True, stdin=subprocess.DEVNULL)


def ensure_env(spec: EnvSpec, cache: Path) -> Path:
    """The interpreter of the environment of `spec` under `cache`, built first unless it exists."""
    folder = cache / spec.key()
    python = folder / "bin" / "python"
    if (folder / MARKER).exists():
        return python
    with _locked(cache / f"{spec.key()}.lock"):
        if (folder / MARKER).exists():  # another try built it while this one waited
            _say(f"using the environment {folder} (built by another try)")
            return python
        if folder.exists():
            _say(f"removing the incomplete environment {folder}")
            shutil.rmtree(folder)
        wanted = ", ".join(spec.requirements) or "no requirements"
        _say(f"building the environment {folder} from {spec.python}: {wanted}")
        try:
            # no pip inside (ensurepip is most of a build's time): ledger's own pip installs into it
            _run([spec.python, "-m", "venv", "--without-pip",
                  *(["--system-site-packages"] if spec.system_site_packages else []), str(folder)])
            if spec.parent_site:
                version = _version_of(str(python))
                site_dir = folder / "lib" / f"python{version}" / "site-packages"
                (site_dir / "_ledger_parent.pth").write_text("".join(p + "\n" for p in spec.parent_site))
            if spec.requirements:
                index = [a for i, url in enumerate(spec.index_urls) for a in
                         (("--index-url" if i == 0 else "--extra-index-url"), url)]
                _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
                      "--no-input", *spec.pip_install_options, *index, *spec.requirements])
        except (OSError, subprocess.CalledProcessError) as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"building the environment for {', '.join(spec.requirements) or 'no requirements'} "
                               f"failed: {exc}") from None
        tmp = folder / (MARKER + ".tmp")
        tmp.write_text(json.dumps({"python": spec.python, "requirements": list(spec.requirements),
                                   "system_site_packages": spec.system_site_packages,
                                   "built_at": dt.datetime.now(dt.UTC).isoformat()}))
        os.replace(tmp, folder / MARKER)
        _say(f"built the environment {folder}")
    return python


# -- the callable in another interpreter -------------------------------------------------------------------

def callable_source(fn: Callable[..., Any], *, where: str) -> str:
    """The source of a plain function, without its decorators (DagDefinitionError when it has none)."""
    if not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        raise DagDefinitionError(f"{where}: python_callable must be a function defined with def (it runs in "
                                 "another interpreter from its source)")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise DagDefinitionError(f"{where}: the source of {fn.__qualname__} cannot be read") from None
    tree = ast.parse(source)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if node is None:
        raise DagDefinitionError(f"{where}: the source of {fn.__qualname__} is not a def")
    node.decorator_list = []
    return ast.unparse(node)


_RUNNER = """

def _ledger_main():
    import sys
    import {serializer} as _ledger_serializer
    with open(sys.argv[1], "rb") as f:
        args, kwargs = _ledger_serializer.load(f)
    result = {name}(*args, **kwargs)
    with open(sys.argv[2], "wb") as f:
        _ledger_serializer.dump(result, f, protocol={protocol})


if __name__ == "__main__":
    _ledger_main()
"""


def _plain(value: Any) -> Any:
    """A value the other interpreter can unpickle without ledger's packages: pendulum datetimes as datetime."""
    if isinstance(value, dt.datetime) and type(value) is not dt.datetime:
        return dt.datetime.fromtimestamp(value.timestamp(), dt.UTC)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value) if type(value) in (list, tuple) else value
    return value


def _serializable(serializer: Any, value: Any) -> bool:
    try:
        serializer.dumps(value, protocol=PICKLE_PROTOCOL)
    except Exception:
        return False
    return True


def run_elsewhere(python: str, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], *,
                  skip_on_exit_code: Sequence[int], env: dict[str, str] | None, serializer: str = "pickle") -> Any:
    """Call `fn(*args, **kwargs)` in the interpreter `python`, the values crossing with `serializer` (a module of
    SERIALIZERS); its return value (deserialised here)."""
    lib = importlib.import_module(serializer)
    named = set(inspect.signature(fn).parameters)
    passed: dict[str, Any] = {}
    for key, value in kwargs.items():
        plain = _plain(value)
        if _serializable(lib, plain):
            passed[key] = plain
        elif key in named:
            raise TypeError(f"the argument {key!r} ({type(value).__name__}) cannot be passed to another interpreter")
    plain_args = [_plain(a) for a in args]
    # annotations are not evaluated: the names they use are the DAG file's, not the script's
    source = "from __future__ import annotations\n\n" + callable_source(fn, where=f"callable {fn.__qualname__}") \
        + _RUNNER.format(name=fn.__name__, protocol=PICKLE_PROTOCOL, serializer=serializer)
    with tempfile.TemporaryDirectory(prefix="ledger-call-") as tmp:
        script, given, result = Path(tmp, "script.py"), Path(tmp, "args.pickle"), Path(tmp, "result.pickle")
        script.write_text(source)
        given.write_bytes(lib.dumps((plain_args, passed), protocol=PICKLE_PROTOCOL))
        _say(f"calling {fn.__name__} in {python}" + ("" if serializer == "pickle" else f" ({serializer})"))
        sys.stdout.flush()
        code = subprocess.call([python, str(script), str(given), str(result)], stdin=subprocess.DEVNULL, env=env,
                               cwd=tmp)
        if code in skip_on_exit_code:
            raise SkipTask(f"{python} exited with {code}, one of skip_on_exit_code")
        if code != 0:
            raise RuntimeError(f"{fn.__name__} failed in {python} (exit code {code})")
        with open(result, "rb") as f:
            return lib.load(f)


# -- the tasks ----------------------------------------------------------------------------------------------

class _ElsewhereTask(PythonTask):
    """A PythonTask whose callable runs in another interpreter (see the module docstring)."""

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *, serializer: str | None = None,
                 use_dill: bool = False, skip_on_exit_code: int | Sequence[int] | None = None,
                 env_vars: dict[str, str] | None = None, inherit_env: bool = True, expect_airflow: bool = True,
                 string_args: Sequence[str] | None = None, templates_exts: Sequence[str] | None = None,
                 **kwargs: Any) -> None:
        where = f"task {task_id!r}"
        chosen = "dill" if use_dill else (serializer or "pickle")
        if chosen not in SERIALIZERS:
            raise DagDefinitionError(f"{where}: serializer={chosen!r} is not supported; use 'pickle' (the default) "
                                     "or 'dill'")
        if chosen == "dill" and importlib.util.find_spec("dill") is None:
            raise DagDefinitionError(f"{where}: serializer='dill' needs dill beside ledger: pip install 'ledger[dill]'")
        self.serializer = chosen
        if string_args:
            raise DagDefinitionError(f"{where}: string_args is not supported; pass op_args or op_kwargs")
        callable_source(python_callable, where=where)
        codes = [] if skip_on_exit_code is None else (
            [skip_on_exit_code] if isinstance(skip_on_exit_code, int) else list(skip_on_exit_code))
        self.skip_on_exit_code = codes
        self.env_vars = dict(env_vars or {})
        self.inherit_env = inherit_env
        super().__init__(task_id, python_callable, **kwargs)

    def _environment_settings(self) -> dict[str, Any]:
        return {**({} if self.serializer == "pickle" else {"serializer": self.serializer}),
                **({"skip_on_exit_code": self.skip_on_exit_code} if self.skip_on_exit_code else {}),
                **({"env_vars": self.env_vars} if self.env_vars else {}),
                **({} if self.inherit_env else {"inherit_env": False})}

    def interpreter(self) -> str:
        raise NotImplementedError

    def invoke(self, *args: Any, **kwargs: Any) -> Any:
        env = {**(os.environ if self.inherit_env else {}), **self.env_vars}
        return run_elsewhere(self.interpreter(), self.python_callable, args, kwargs,
                             skip_on_exit_code=self.skip_on_exit_code, env=env, serializer=self.serializer)


class PythonVirtualenvTask(_ElsewhereTask):
    kind = "python_virtualenv"

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *,
                 requirements: str | Sequence[str] | None = None, python_version: str | None = None,
                 system_site_packages: bool = True, pip_install_options: Sequence[str] | None = None,
                 index_urls: Sequence[str] | None = None, venv_cache_path: str | os.PathLike[str] | None = None,
                 **kwargs: Any) -> None:
        where = f"task {task_id!r}"
        if isinstance(requirements, str) and requirements.strip().endswith(".txt"):
            raise DagDefinitionError(f"{where}: requirements={requirements!r}: a requirements file is not supported; "
                                     "give the requirements as a list of strings")
        reqs = requirements.splitlines() if isinstance(requirements, str) else list(requirements or [])
        reqs = [r for r in reqs if r.strip()] if isinstance(requirements, str) else reqs
        if not all(isinstance(r, str) and r.strip() for r in reqs):
            raise DagDefinitionError(f"{where}: requirements must be a list of requirement strings")
        if python_version is not None and not str(python_version).replace(".", "").isdigit():
            raise DagDefinitionError(f"{where}: python_version {python_version!r} is not a version like '3.11'")
        self.requirements = [r.strip() for r in reqs]
        self.python_version = None if python_version is None else str(python_version)
        self.system_site_packages = bool(system_site_packages)
        self.pip_install_options = list(pip_install_options or [])
        self.index_urls = list(index_urls or [])
        self.venv_cache_path = None if venv_cache_path is None else str(venv_cache_path)
        super().__init__(task_id, python_callable, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "requirements": self.requirements, "python_version": self.python_version,
                "system_site_packages": self.system_site_packages,
                **({"pip_install_options": self.pip_install_options} if self.pip_install_options else {}),
                **({"index_urls": self.index_urls} if self.index_urls else {}), **self._environment_settings()}

    def env_spec(self) -> EnvSpec:
        if self.python_version is None:
            base = sys.executable  # a venv made from a venv's Python is made from its base interpreter
        else:
            found = shutil.which(f"python{self.python_version}")
            if found is None:
                raise RuntimeError(f"python_version {self.python_version}: no python{self.python_version} on PATH "
                                   "on this host")
            base = found
        same = self.python_version is None or self.python_version == "{}.{}".format(*sys.version_info[:2])
        parent = tuple(site.getsitepackages()) if self.system_site_packages and same else ()
        return EnvSpec(os.path.realpath(base), tuple(self._with_serializer(self.requirements)),
                       self.system_site_packages,
                       tuple(self.pip_install_options), tuple(self.index_urls), parent)

    def _with_serializer(self, requirements: list[str]) -> list[str]:
        """The requirements and, for dill, dill itself at ledger's version of it (the two sides read each other's
        bytes), unless a requirement names it already."""
        if self.serializer == "pickle" or any(re.split(r"[\s<>=!~\[;@]", r, maxsplit=1)[0].lower() == self.serializer
                                               for r in requirements):
            return requirements
        from importlib import metadata  # (here: it loads the email package, which a DAG file need not: issue 43)

        return [*requirements, f"{self.serializer}=={metadata.version(self.serializer)}"]

    def interpreter(self) -> str:
        cache = Path(self.venv_cache_path) if self.venv_cache_path else load_settings().home / "venvs"
        return str(ensure_env(self.env_spec(), cache))


class ExternalPythonTask(_ElsewhereTask):
    kind = "external_python"

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *, python: str, **kwargs: Any) -> None:
        if not python or not isinstance(python, str):
            raise DagDefinitionError(f"task {task_id!r}: python must be the path of a Python interpreter")
        self.python = python
        super().__init__(task_id, python_callable, **kwargs)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "python": self.python, **self._environment_settings()}

    def interpreter(self) -> str:
        if not os.access(self.python, os.X_OK):
            raise RuntimeError(f"the interpreter {self.python} does not exist or cannot be run on this host")
        return self.python


class _EnvTaskFunction(TaskFunction):
    task_class: type[PythonTask]


class _VirtualenvFunction(_EnvTaskFunction):
    task_class = PythonVirtualenvTask


class _ExternalPythonFunction(_EnvTaskFunction):
    task_class = ExternalPythonTask


def _decorator(cls: type[TaskFunction]) -> Callable[..., Any]:
    def decorate(fn: Callable[..., Any] | None = None, /, *, task_id: str | None = None, **kwargs: Any) -> Any:
        def wrap(func: Callable[..., Any]) -> TaskFunction:
            return cls(func, task_id, kwargs)

        return wrap(fn) if fn is not None else wrap

    return decorate


virtualenv = _decorator(_VirtualenvFunction)  # @task.virtualenv(requirements=[...])
external_python = _decorator(_ExternalPythonFunction)  # @task.external_python(python="/path/python")


def is_venv_installed() -> bool:
    """Airflow's check before a virtualenv task: ledger builds environments with the standard library's venv."""
    return True
