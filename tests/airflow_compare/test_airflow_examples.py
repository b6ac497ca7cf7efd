"""Apache Airflow's own example DAG folders (2.10 and 3.x), loaded and run in ledger and compared with what
Airflow itself does with them: each file Airflow loads (with only the providers its own install brings) loads in
ledger, unless ledger refuses it by design in one line naming the alternative (BY_DESIGN); and each DAG whose
`airflow dags test DAG DATE` succeeds succeeds in ledger's test loop (scheduler/runtime/local_testing.py, what
`ledger dags test` runs) on the same date, with no conf, variables or connections.

Airflow's side is the fixture tests/airflow_compare/airflow-<series>.json, written by `python -m
tests.airflow_compare.record VENV`; the example files are those of the release it names, fetched once from PyPI
(its wheel, `pip download --no-deps`) into ~/.cache/ledger-tests: Airflow's files are not copied into this
repository. With LEDGER_TEST_AIRFLOW_2_10 / LEDGER_TEST_AIRFLOW_3 naming a virtualenv where apache-airflow is
installed, Airflow runs live instead (record.py, in that venv's own processes) on that venv's example folder.
A DAG whose test a fixture says is "not recorded" (a recorder stopped before its test) is not compared; the 3.3.2
fixtures have every test recorded.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pendulum
import pytest

from ledger.core.states import RunState
from ledger.scheduler.runtime import local_testing
from ledger.scheduler.runtime.dagbag import FileResult, load_file
from ledger.sdk.dag import DAG
from tests.airflow_compare import record

HERE = Path(__file__).resolve().parent
SERIES = ("2.10", "3", "3-standard")  # 3-standard: Airflow 3's standard provider's own example folder
VENV_VARIABLES = {"2.10": "LEDGER_TEST_AIRFLOW_2_10", "3": "LEDGER_TEST_AIRFLOW_3",
                  "3-standard": "LEDGER_TEST_AIRFLOW_3"}
PLUGINS = "ledger loads no Airflow plugins"
LISTENERS = "use on_*_callback or a notifier"
TRIGGERS = "ledger has no triggerer: a deferrable sensor waits in reschedule mode"
STATE_STORE = "task and asset state stores (task_state_store, asset_state_store, NEVER_EXPIRE) are refused by design"
PARTITIONS = "ledger's datasets take time partitions"

# Files Airflow loads that ledger refuses by design, with the words their one line must hold (the alternative).
BY_DESIGN: dict[str, dict[str, str]] = {
    "2.10": {
        "example_subdag_operator.py": "SubDAGs are gone from Airflow 3 and ledger; use a TaskGroup",
        "example_local_kubernetes_executor.py": "ledger has no Kubernetes executor; run the container from a "
                                                "@task.bash",
        "example_workday_timetable.py": PLUGINS,
        "plugins/workday.py": PLUGINS,
        "plugins/decreasing_priority_weight_strategy.py": PLUGINS,
        "plugins/event_listener.py": LISTENERS,
        "plugins/listener_plugin.py": LISTENERS,
    },
    "3": {
        "example_local_kubernetes_executor.py": "ledger has no Kubernetes executor; run the container from a "
                                                "@task.bash",
        "example_asset_with_watchers.py": TRIGGERS,
        "example_custom_weight.py": PLUGINS,
        "example_workday_timetable.py": PLUGINS,
        "plugins/workday.py": PLUGINS,
        "plugins/decreasing_priority_weight_strategy.py": PLUGINS,
        "plugins/custom_partition_timetable.py": PLUGINS,
        "plugins/event_listener.py": LISTENERS,
        "plugins/listener_plugin.py": LISTENERS,
        "example_task_state_store.py": STATE_STORE,
        "example_task_state_store_async.py": STATE_STORE,
        "example_task_state_store_mapped.py": STATE_STORE,
        "example_asset_state_store.py": STATE_STORE,
        "example_asset_partition.py": PARTITIONS,
        "plugins/business_day_window.py": PARTITIONS,
        "plugins/custom_partition_mapper.py": PARTITIONS,
    },
    "3-standard": {
        "example_hitl_operator.py": "wait for a person's answer with a signal-driven task",
    },
}
# What Airflow does and ledger does not do yet: file (a load) or DAG id (a run) -> why. The test fails when one of
# these starts to work, so that the entry (and the counts in docs/from-airflow.md) go with it.
KNOWN_LOAD_GAPS: dict[str, dict[str, str]] = {
    "2.10": {},
    "3": {},
    "3-standard": {},
}
KNOWN_RUN_GAPS: dict[str, dict[str, str]] = {
    "2.10": {},
    "3": {},
    "3-standard": {},
}
pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning"),
              pytest.mark.timeout(1200)]  # every example DAG of a release run in turn: minutes on a busy host


@dataclass
class Examples:
    """One series' example folder (copied to a DAGs folder of the test's own) and Airflow's results on it."""

    series: str
    folder: Path
    airflow: dict[str, Any]
    loaded: dict[str, FileResult]

    def load(self, rel: str) -> FileResult:
        if rel not in self.loaded:
            self.loaded[rel] = load_file(str(self.folder / rel), str(self.folder))
        return self.loaded[rel]


_LIVE: dict[str, dict[str, Any]] = {}  # venv -> series -> Airflow's results, recorded once per session


def airflow_side(series: str, out: Path) -> tuple[Path, dict[str, Any]]:
    """The example folder and Airflow's results: live from the venv the variable names, else the fixture."""
    venv = os.environ.get(VENV_VARIABLES[series])
    if not venv:
        fixture = HERE / f"airflow-{series}.json"
        if not fixture.exists():
            pytest.skip(f"Airflow {series}'s results are not recorded: give {VENV_VARIABLES[series]} (a venv with "
                        "apache-airflow) or run python -m tests.airflow_compare.record VENV")
        recorded = json.loads(fixture.read_text())
        return released_folder(**recorded["source"]), recorded
    if venv not in _LIVE:
        _LIVE[venv] = {path.stem.removeprefix("airflow-"): json.loads(path.read_text())
                       for path in record.record(Path(venv), out=out)}
    version, folders = record.example_folders(Path(venv))
    return folders[series.removeprefix(record.series(version))], _LIVE[venv][series]


def released_folder(distribution: str, version: str, folder: str) -> Path:
    """`folder` of the wheel of `distribution`==`version` as PyPI serves it, fetched once into this user's cache (a
    folder that exists there is complete: it is renamed into place when whole)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ledger-tests"
    target = cache / f"{distribution}-{version}" / folder
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        fetched = subprocess.run([sys.executable, "-m", "pip", "download", f"{distribution}=={version}", "--no-deps",
                                  "--only-binary=:all:", "--quiet", "--dest", scratch],
                                 capture_output=True, text=True, check=False)
        wheels = list(Path(scratch).glob("*.whl"))
        if fetched.returncode != 0 or not wheels:
            raise RuntimeError(f"pip download {distribution}=={version} failed: {fetched.stderr.strip()[-500:]}")
        unpacked = Path(scratch) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [m for m in wheel.namelist() if m.startswith(folder + "/")]
            if not members:
                raise RuntimeError(f"{wheels[0].name} has no {folder}/")
            wheel.extractall(unpacked, members)
        whole = cache / f"{distribution}-{version}"
        with contextlib.suppress(OSError):  # (another test process may have put it there first)
            (unpacked).rename(whole)
    return target


@pytest.fixture(scope="module", params=SERIES)
def examples(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Examples]:
    series = request.param
    source, airflow = airflow_side(series, tmp_path_factory.mktemp("airflow-results"))
    folder = tmp_path_factory.mktemp(f"examples-{series}") / "dags"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    yield Examples(series, folder, airflow, {})
    for name in [n for n in sys.modules if n == "airflow" or n.startswith("airflow.")]:
        del sys.modules[name]


def airflow_loaded(examples: Examples) -> list[str]:
    return sorted(rel for rel, found in examples.airflow["files"].items() if found["error"] is None)


def test_each_example_file_airflow_loads_loads_in_ledger(examples: Examples) -> None:
    refused, gaps = BY_DESIGN[examples.series], KNOWN_LOAD_GAPS[examples.series]
    wrong, failing = {}, set()
    for rel in airflow_loaded(examples):
        error = examples.load(rel).error
        last = error.strip().splitlines()[-1] if error else None
        if last is not None:
            failing.add(rel)
        if rel in refused and (last is None or refused[rel] not in last):
            wrong[rel] = f"refused by design, but its line does not say {refused[rel]!r}: {last}"
        elif last is not None and rel not in refused and rel not in gaps:
            wrong[rel] = last
    assert wrong == {}
    assert sorted(set(gaps) - failing) == []  # a known gap that loads now: remove it from KNOWN_LOAD_GAPS
    assert len(airflow_loaded(examples)) > 15  # the fixture is a real folder's


def airflow_succeeded(examples: Examples) -> list[tuple[str, str]]:
    skip = {**BY_DESIGN[examples.series], **KNOWN_LOAD_GAPS[examples.series]}
    return sorted((rel, dag_id) for rel, found in examples.airflow["files"].items()
                  for dag_id, state in found["dags"].items() if state == "success" and rel not in skip)


# The DAGs' test loops run side by side in forked processes: Airflow's examples spend most of their time asleep
# (time.sleep in their callables, sensors' pokes, a virtualenv being made), a few percent of it on the CPU. Each DAG's
# tries still run one at a time in its own loop, exactly as `ledger dags test` runs them.
JOBS = 4
# the DAGs whose test loops sleep longest (s, load 5: example_sla_dag 50, example_python_operator and _decorator 11,
# child_dag 6, example_branch_operator 5.5), handed to the pool first so that it does not end on one of them while
# the other processes idle (decision 0333): 2.10's comparison took 71 s with example_sla_dag 44th of 54
LONGEST_DAGS = ("example_sla_dag", "example_python_operator", "example_python_decorator", "child_dag",
                "example_branch_operator")
_TESTED: list[tuple[DAG, datetime, Path]] = []  # what the forked processes test, by index (set before they fork)


def _longest_first(dag_id: str) -> int:
    return LONGEST_DAGS.index(dag_id) if dag_id in LONGEST_DAGS else len(LONGEST_DAGS)


def _test_dag(index: int) -> tuple[RunState, list[str]]:
    """One DAG's test loop, in a process of the pool: its run's state and its `--- ` lines (the tries' states)."""
    dag, at, folder = _TESTED[index]
    lines: list[str] = []
    state = local_testing.test_dag(local_testing.TestRun.of(dag, at, None, folder), lines.append)
    return state, [line for line in lines if line.startswith("--- ")]


@pytest.mark.slow
def test_each_example_dag_airflow_runs_succeeds_in_ledgers_dags_test(examples: Examples) -> None:
    at = pendulum.parse(examples.airflow["date"])
    gaps = KNOWN_RUN_GAPS[examples.series]
    wrong, failing = {}, set()
    tested: list[str] = []
    _TESTED.clear()
    for rel, dag_id in sorted(airflow_succeeded(examples), key=lambda found: _longest_first(found[1])):
        dag = next((d for d in examples.load(rel).dags if d.dag_id == dag_id), None)
        if dag is None:
            wrong[dag_id] = f"not defined by {rel} in ledger"
            continue
        tested.append(dag_id)
        _TESTED.append((dag, at, examples.folder))  # type: ignore[arg-type]
    with concurrent.futures.ProcessPoolExecutor(JOBS, mp_context=multiprocessing.get_context("fork")) as pool:
        outcomes = list(pool.map(_test_dag, range(len(_TESTED))))
    _TESTED.clear()
    for dag_id, (state, lines) in zip(tested, outcomes, strict=True):
        if state is not RunState.SUCCESS:
            failing.add(dag_id)
            if dag_id not in gaps:
                wrong[dag_id] = f"{state.value}: " + " | ".join(lines)
    assert wrong == {}
    assert sorted(set(gaps) - failing) == []  # a known gap that succeeds now: remove it from KNOWN_RUN_GAPS
    assert airflow_succeeded(examples)  # (a fixture may leave a DAG's test "not recorded": it is not compared)
