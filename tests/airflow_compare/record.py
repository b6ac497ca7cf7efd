"""Record what Apache Airflow itself does with its own example DAG folders, for the comparison with ledger
(tests/airflow_compare/test_airflow_examples.py).

    python -m tests.airflow_compare.record /work/airflow-venvs/2.10

The argument is a virtualenv, outside the repository, with apache-airflow installed (and no provider beyond the
ones its own install brings). For each example folder of that Airflow (`airflow/example_dags`, and Airflow 3's
standard provider's `airflow/providers/standard/example_dags`), in a temporary AIRFLOW_HOME with its own SQLite
database, one process of the venv's Python:

1. loads each .py file of the folder with Airflow's DagBag and keeps whether it loaded (else the last line of its
   error) and the DAGs it defines;
2. runs each DAG of a file that loaded as `airflow dags test DAG DATE` runs it (the DAG's test() at that logical
   date), with a deadline (a sensor waiting on something no test makes waits for ever: "timeout"), and keeps the
   run's state. Each test runs in a child forked from that process, after the process has built, once, what
   Airflow 3's test() would otherwise build in every child on its first task (the in-process execution API's
   versioned routes: most of a small DAG's test), so a DAG's test takes seconds rather than minutes.

It writes tests/airflow_compare/airflow-<series>.json (series "2.10", "3", "3-standard"), with the distribution,
its version and the folder's path inside its wheel: the test fetches that release's wheel from PyPI and loads the
folder from it in ledger when no Airflow venv is given (Airflow's files are not copied into this repository).
Airflow runs only in the venv's own processes: ledger's never import it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATE = "2024-03-05"  # the logical date of every `dags test`, Airflow's and ledger's
DEADLINE = 600  # seconds one DAG's test may take before it counts as waiting for ever (on a busy host)

# Run by the venv's Python: Airflow's version and its example folders (Airflow 3's standard provider has its own).
WHERE = """
import json, pathlib, airflow
from importlib.metadata import distributions
folders = {"": pathlib.Path(airflow.__file__).parent / "example_dags"}
try:
    import airflow.providers.standard.example_dags as standard
    folders["-standard"] = pathlib.Path(standard.__file__).parent
except ImportError:
    pass
top = pathlib.Path(airflow.__file__).parent.parent


def owner(inside):
    # the distribution whose wheel holds the folder (Airflow 3's is apache-airflow-core, not apache-airflow)
    return next((d.metadata["Name"], d.version) for d in distributions()
                if any(f.as_posix() == inside + "/__init__.py" for f in d.files or ()))


inside = {k: f.relative_to(top).as_posix() for k, f in folders.items()}
print(json.dumps([airflow.__version__, {k: [str(f), *owner(inside[k]), inside[k]] for k, f in folders.items()}]))
"""

# Run by the venv's Python with the folder and the date as arguments: each .py file's load (Airflow's DagBag, one
# file at a time) and, for each DAG of a file that loaded, what `airflow dags test DAG DATE` does (the DAG's
# test(), as the command calls it, in a forked child: Airflow starts once per folder, and a child that passes the
# deadline is killed), as JSON on the last line.
RUN = """
import inspect, json, os, pathlib, select, signal, sys, time, warnings
import pendulum
warnings.simplefilter("ignore")
from airflow import settings
try:
    from airflow.models.dagbag import DagBag
except ImportError:
    from airflow.dag_processing.dagbag import DagBag
folder, date, deadline = pathlib.Path(sys.argv[1]), pendulum.parse(sys.argv[2]), float(sys.argv[3])
only = set(sys.argv[4:])  # the files whose DAGs this process tests (none named: every file's)


def test(dag):
    # the DAG's test() in a child of this process, as `airflow dags test` calls it: its run's state
    when = "logical_date" if "logical_date" in inspect.signature(dag.test).parameters else "execution_date"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        me = os.getpid()  # Airflow may fork within test(): only this process answers, and every copy ends here
        try:
            os.close(read)
            settings.engine.dispose(close=False)  # the child's own database connections
            run = dag.test(**{when: date})
            state = str(getattr(run.state, "value", run.state)) if run is not None else "error: no run"
        except BaseException as exc:
            state = "error: " + ((str(exc).strip().splitlines() or [type(exc).__name__])[-1])
        finally:
            if os.getpid() == me:
                os.write(write, state.encode()[:4000])
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], deadline)
    state = os.read(read, 4000).decode() if ready else ""
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read)
    return state or ("timeout" if not ready else "error: no outcome")


def warm():
    # Airflow 3's test() runs each task through an in-process copy of its execution API, whose versioned routes
    # (cadwyn) are built on the app's first request: most of a small DAG's test, paid again by every forked child
    # unless the parent builds them first. One request through the app's ASGI transport, on an event loop that
    # ends with it, builds them and leaves no thread behind to fork.
    try:
        from airflow.sdk.execution_time.supervisor import in_process_api_server
    except ImportError:  # Airflow 2 runs its tasks without it
        return
    import asyncio, httpx

    async def ask():
        async with httpx.AsyncClient(transport=in_process_api_server().atransport, base_url="http://local") as c:
            (await c.get("/health")).raise_for_status()

    asyncio.run(ask())


out, bags = {}, {}
for path in sorted(folder.rglob("*.py")):
    options = inspect.signature(DagBag).parameters  # Airflow 3 has no include_examples (load_examples is off)
    bag = DagBag(dag_folder=str(path), safe_mode=False,
                 **({"include_examples": False} if "include_examples" in options else {}))
    errors = list(bag.import_errors.values())
    out[str(path.relative_to(folder))] = {"error": errors[0].strip().splitlines()[-1] if errors else None,
                                          "dags": {}}
    bags[path] = bag if not errors else None
ignored = (folder / ".airflowignore").read_text()
warm()
defined = {dag_id: path for path, bag in bags.items() if bag is not None for dag_id in bag.dags}
for path, bag in bags.items():
    if bag is None or (only and str(path.relative_to(folder)) not in only):
        continue
    # Airflow 3's test() parses its whole DAG bundle before each run: the bundle is this file, the files that
    # define a DAG it names (a trigger's target, a sensor's DAG) and the folder's packages (libs/, plugins/)
    text = path.read_text(errors="replace")
    keep = {path} | {p for dag_id, p in defined.items() if dag_id in text}
    (folder / ".airflowignore").write_text(ignored + "".join(
        f"{p.relative_to(folder)}\\n" for p in sorted(folder.glob("*.py")) if p not in keep))
    found = out[str(path.relative_to(folder))]
    for dag_id, dag in sorted(bag.dags.items()):
        if getattr(dag, "parent_dag", None) is None:  # a SubDAG runs inside its parent
            found["dags"][dag_id] = test(dag)
            print(path.name, dag_id, found["dags"][dag_id], file=sys.stderr, flush=True)
print(json.dumps(out))
"""


def venv_python(venv: Path) -> str:
    return str(venv / "bin" / "python")


def example_folders(venv: Path) -> tuple[str, dict[str, Path]]:
    """Airflow's version and its example folders, by the suffix of their fixture's name."""
    version, found = where(venv)
    return version, {suffix: Path(f[0]) for suffix, f in found.items()}


def where(venv: Path) -> tuple[str, dict[str, list[str]]]:
    """Airflow's version and, by suffix, each example folder: [path, distribution, its version, path in its wheel]."""
    done = subprocess.run([venv_python(venv), "-c", WHERE], check=True, stdout=subprocess.PIPE, text=True)
    version, folders = json.loads(done.stdout)
    return version, folders


def series(version: str) -> str:
    """The fixture's series: "2.10" for Airflow 2.10.x, "3" for any 3.x."""
    return "3" if version.startswith("3.") else ".".join(version.split(".")[:2])


def airflow_env(home: Path, dags: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "LEDGER_"))}
    # the folder's own plugins (plugins/: a priority strategy, timetables) are Airflow's plugins, as for a user who
    # copied the folder: Airflow 3's test serializes every DAG of the folder, and one needs its plugin
    env.update(AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(dags), AIRFLOW__CORE__LOAD_EXAMPLES="False",
               AIRFLOW__CORE__PLUGINS_FOLDER=str(dags / "plugins"), AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="300",
               AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home / 'airflow.db'}")
    return env


def record_folder(venv: Path, folder: Path, deadline: float = DEADLINE, jobs: int = 1) -> dict[str, Any]:
    """Airflow's results on one example folder: `jobs` processes side by side, each testing the DAGs of every
    `jobs`-th file in an AIRFLOW_HOME and database of its own (Airflow's test() spends most of its time waiting)."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.py") if "__pycache__" not in p.parts)
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        parts = list(pool.map(lambda n: record_part(venv, folder, deadline, files[n::jobs] if jobs > 1 else []),
                              range(jobs)))
    found: dict[str, Any] = parts[0]
    for part in parts[1:]:
        for rel, result in part.items():
            found[rel]["dags"].update(result["dags"])
    return found


def record_part(venv: Path, folder: Path, deadline: float, only: list[str]) -> dict[str, Any]:
    """Airflow's loads of the folder's files, and its tests of the DAGs of the files `only` names (none: all)."""
    with tempfile.TemporaryDirectory(prefix="airflow-record-") as tmp:
        home, dags = Path(tmp) / "home", Path(tmp) / "dags"
        home.mkdir()
        shutil.copytree(folder, dags, ignore=shutil.ignore_patterns("__pycache__"))
        # Airflow 3's test() serializes every DAG of the folder first; a file that names its plugin's class by the
        # installed package's path (airflow.example_dags.plugins...), which a plugins folder registers under
        # another name, would fail every test of the folder: such files are left out of the folder's scan (their
        # own load and test are still recorded)
        (dags / ".airflowignore").write_text("".join(
            f"{path.relative_to(dags)}\n" for path in sorted(dags.rglob("*.py"))
            if "airflow.example_dags.plugins" in path.read_text(errors="replace")))
        env = airflow_env(home, dags)
        subprocess.run([str(venv / "bin" / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True)
        done = subprocess.run([venv_python(venv), "-c", RUN, str(dags), DATE, str(deadline), *only], env=env,
                              cwd=home, check=True, stdout=subprocess.PIPE, text=True)
        files: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return files


def record(venv: Path, out: Path = HERE, deadline: float = DEADLINE, jobs: int = 1) -> list[Path]:
    """Airflow's results on each of its example folders, written to `out`/airflow-<series>.json (those files)."""
    version, folders = where(venv)
    written = []
    for suffix, (folder, distribution, release, inside) in folders.items():
        files = record_folder(venv, Path(folder), deadline, jobs)
        written.append(out / f"airflow-{series(version) + suffix}.json")
        written[-1].write_text(json.dumps({"airflow": version, "date": DATE, "files": files,
                                           "source": {"distribution": distribution, "version": release,
                                                      "folder": inside}}, indent=1, sort_keys=True) + "\n")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="a virtualenv with apache-airflow installed")
    parser.add_argument("--deadline", type=float, default=DEADLINE,
                        help=f"seconds one DAG's test may take (default {DEADLINE})")
    parser.add_argument("--jobs", type=int, default=1, help="Airflow processes side by side per folder (default 1)")
    args = parser.parse_args()
    for path in record(args.venv.resolve(), deadline=args.deadline, jobs=args.jobs):
        print(path)


if __name__ == "__main__":
    main()
