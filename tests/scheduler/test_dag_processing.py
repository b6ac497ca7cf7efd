"""DAG file processing with real processor processes, and syncing its results to a real SQLite database."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from ledger.infra.clock import FixedClock
from ledger.models import Dag, DagFile, DagVersion, Event, ImportError_
from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager, ParseResult
from ledger.scheduler.parsing.dag_sync import known_hashes, known_owners, sync_results

ACTOR = "test:dag-processing"


class FakeTime:
    """The manager's injectable clock: seconds that only move when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def dag_source(dag_id: str, *, commands: tuple[str, ...] = ("echo a", "echo b"), prelude: str = "",
               comment: str = "") -> str:
    tasks = "\n".join(f"    t{i} = BashTask('t{i}', {cmd!r})" for i, cmd in enumerate(commands))
    chain = " >> ".join(f"t{i}" for i in range(len(commands)))
    return textwrap.dedent(f"""\
        # {comment}
        import pendulum
        from ledger import DAG, BashTask
        {prelude}
        with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2024, 3, 1, tz="UTC")) as dag:
        """) + tasks + "\n" + (f"    {chain}\n" if len(commands) > 1 else "")


def counting(counter: Path) -> str:
    """A prelude that appends one line to `counter` each time the file is imported."""
    return f"open({str(counter)!r}, 'a').write('import\\n')"


def imports(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def poll_until(manager: DagFileProcessorManager, done: Callable[[list[ParseResult]], bool], *,
               timeout: float = 60, tick: Callable[[], None] | None = None) -> list[ParseResult]:
    """Poll like the scheduler loop does (waiting on the processors' connections) until `done(results)`."""
    got: list[ParseResult] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got += manager.poll()
        if done(got):
            return got
        if tick is not None:
            tick()
        handles = manager.wait_handles()
        if handles:
            wait(handles, timeout=0.05)
        else:
            time.sleep(0.02)
    raise AssertionError(f"gave up after {timeout} s; results so far: {got}")


def by_file(results: list[ParseResult]) -> dict[str, ParseResult]:
    return {Path(r.fileloc).name: r for r in results}


def has(name: str, *, ok: bool | None = None) -> Callable[[list[ParseResult]], bool]:
    def check(results: list[ParseResult]) -> bool:
        return any(Path(r.fileloc).name == name and (ok is None or (r.error is None) == ok) for r in results)
    return check


def count(session: Any, model: Any, *where: Any) -> int:
    return int(session.scalar(select(func.count()).select_from(model).where(*where)))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead too
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


# -- errors -------------------------------------------------------------------------------------------

def test_broken_files_are_recorded_as_errors_with_readable_messages_while_good_files_are_parsed(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    (dags / "good.py").write_text(dag_source("good"))
    (dags / "syntax.py").write_text("import pendulum\ndef broken(:\n")
    (dags / "hangs.py").write_text("import time; time.sleep(600)\n")
    (dags / "raises.py").write_text("x = 1\nraise RuntimeError('the warehouse is closed')\n")
    manager = managers(dags, file_timeout=60)
    # the hang is cut short only once the other three are in, so that their imports never race the timeout
    got = poll_until(manager, lambda rs: all(has(name)(rs) for name in ("good.py", "syntax.py", "raises.py")))
    manager.file_timeout = 2
    results = by_file(got + poll_until(manager, has("hangs.py")))

    assert [d.dag_id for d in results["good.py"].dags] == ["good"] and results["good.py"].error is None
    assert results["syntax.py"].error == f"{dags / 'syntax.py'}:2: SyntaxError: invalid syntax"
    assert results["raises.py"].error == f"{dags / 'raises.py'}:2: RuntimeError: the warehouse is closed"
    assert results["hangs.py"].error == f"{dags / 'hangs.py'}: timed out after 2 s while importing"
    for name in ("syntax.py", "raises.py", "hangs.py"):
        assert results[name].dags == [] and "Traceback" not in (results[name].error or "")

    with sessions.begin() as session:
        report = sync_results(session, results.values(), now=clock.now(), actor=ACTOR)
        assert report.new_versions == ["good"]
        stored = {Path(e.fileloc).name: e.error for e in session.scalars(select(ImportError_))}
        assert stored == {name: results[name].error for name in ("syntax.py", "raises.py", "hangs.py")}
        assert [d.dag_id for d in session.scalars(select(Dag).where(Dag.is_active.is_(True)))] == ["good"]


def test_a_file_that_hangs_is_killed_its_processor_replaced_and_its_error_cleared_once_fixed(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    hangs = dags / "hangs.py"
    hangs.write_text("import time; time.sleep(600)\n")
    manager = managers(dags, parsing_processes=1, file_timeout=1, dag_dir_list_interval=0)

    manager.poll()
    pid = manager.processing[str(hangs)]
    results = poll_until(manager, has("hangs.py"))
    assert results[-1].error == f"{hangs}: timed out after 1 s while importing"
    with sessions.begin() as session:
        sync_results(session, results, now=clock.now(), actor=ACTOR)
    assert not alive(pid)
    assert len(manager.processor_pids) == 1 and manager.processor_pids != [pid]

    manager.file_timeout = 60  # the fixed file's import, in a processor just forked, must not race a 1 s timeout
    hangs.write_text(dag_source("fixed"))
    results = poll_until(manager, has("hangs.py", ok=True))
    clock.advance(minutes=1)
    with sessions.begin() as session:
        report = sync_results(session, results, now=clock.now(), actor=ACTOR)
        assert report.cleared == [str(hangs)] and report.new_versions == ["fixed"]
        assert count(session, ImportError_) == 0


def test_a_syntax_error_is_stored_and_cleared_once_the_file_is_fixed(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    path = dags / "pipeline.py"
    path.write_text(dag_source("pipeline"))
    manager = managers(dags, dag_dir_list_interval=0, time=FakeTime())
    with sessions.begin() as session:
        sync_results(session, manager.parse_all(timeout=20), now=clock.now(), actor=ACTOR)

    path.write_text(dag_source("pipeline", commands=("echo a", "echo b")).replace("with DAG", "with DAG(("))
    results = poll_until(manager, has("pipeline.py", ok=False))
    with sessions.begin() as session:
        sync_results(session, results, now=clock.now(), actor=ACTOR)
        assert "SyntaxError" in session.scalars(select(ImportError_.error)).one()
        dag = session.get(Dag, "pipeline")
        assert dag is not None and dag.is_active, "a broken file's DAGs stay active with their last good version"

    path.write_text(dag_source("pipeline", commands=("echo a", "echo c")))
    results = poll_until(manager, has("pipeline.py", ok=True))
    with sessions.begin() as session:
        report = sync_results(session, results, now=clock.now(), actor=ACTOR)
        assert report.cleared == [str(path)] and report.new_versions == ["pipeline"]
        assert count(session, ImportError_) == 0


def test_a_processor_that_dies_while_importing_is_replaced_and_the_file_gets_an_error(
        dags: Path, managers: Any) -> None:
    (dags / "exits.py").write_text("import os\nos._exit(3)\n")
    (dags / "good.py").write_text(dag_source("good"))
    manager = managers(dags, parsing_processes=1)
    results = by_file(manager.parse_all(timeout=20))
    assert results["exits.py"].error == f"{dags / 'exits.py'}: the processor died while importing (exit code 3)"
    assert results["good.py"].error is None
    assert len(manager.processor_pids) == 1


def test_processors_die_with_the_process_that_started_them(dags: Path) -> None:
    code = textwrap.dedent(f"""\
        import sys, time
        from pathlib import Path
        from ledger.scheduler.parsing.dag_processing import DagFileProcessorManager
        manager = DagFileProcessorManager(Path({str(dags)!r}))
        manager.start()
        print(*manager.processor_pids, flush=True)
        time.sleep(60)
        """)
    repo = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(repo)})
    try:
        assert parent.stdout is not None
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
    finally:
        parent.kill()  # SIGKILL: no chance to stop its processors itself
        parent.wait()
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in pids)


# -- when files are parsed --------------------------------------------------------------------------

def test_a_changed_file_is_reparsed_and_an_unchanged_one_is_not_reimported_within_the_interval(
        dags: Path, tmp_path: Path, managers: Any) -> None:
    clock = FakeTime()
    changes, stays = tmp_path / "changes.count", tmp_path / "stays.count"
    (dags / "changes.py").write_text(dag_source("changes", prelude=counting(changes)))
    (dags / "stays.py").write_text(dag_source("stays", prelude=counting(stays)))
    manager = managers(dags, min_file_process_interval=30, dag_dir_list_interval=5, time=clock)
    assert len(manager.parse_all(timeout=20)) == 2
    assert (imports(changes), imports(stays)) == (1, 1)

    # nothing is due within the interval, however often the scheduler polls
    for _ in range(10):
        assert manager.poll() == []
        clock.advance(1)
    assert manager.due_count == 0 and manager.processing == {}

    (dags / "changes.py").write_text(dag_source("changes", prelude=counting(changes), commands=("echo new",)))
    results = poll_until(manager, has("changes.py"), tick=lambda: clock.advance(1))
    assert [Path(r.fileloc).name for r in results] == ["changes.py"]
    assert (imports(changes), imports(stays)) == (2, 1)

    clock.advance(30)  # the interval has passed: unchanged files are parsed again
    results = poll_until(manager, lambda got: len(got) == 2)
    assert sorted(Path(r.fileloc).name for r in results) == ["changes.py", "stays.py"]
    assert (imports(changes), imports(stays)) == (3, 2)


def test_a_new_file_is_picked_up_at_the_next_listing(dags: Path, managers: Any) -> None:
    clock = FakeTime()
    (dags / "first.py").write_text(dag_source("first"))
    manager = managers(dags, dag_dir_list_interval=10, time=clock)
    manager.parse_all(timeout=20)
    (dags / "second.py").write_text(dag_source("second"))
    assert manager.poll() == [] and manager.files == [str(dags / "first.py")]
    assert not manager.busy(), "nothing to do until the next listing: --exit-when-idle may end"
    clock.advance(10)
    assert manager.poll() == [] and manager.busy() and list(manager.processing) == [str(dags / "second.py")]
    results = poll_until(manager, has("second.py"))
    assert [d.dag_id for r in results for d in r.dags] == ["second"]
    assert not manager.busy() and manager.due_count == 0


def test_one_processor_works_on_a_file_at_a_time(dags: Path, tmp_path: Path, managers: Any) -> None:
    log = tmp_path / "slow.log"
    (dags / "slow.py").write_text(dag_source("slow", prelude=(
        f"import os, time; open({str(log)!r}, 'a').write(f'start {{os.getpid()}}\\n'); time.sleep(0.4); "
        f"open({str(log)!r}, 'a').write(f'end {{os.getpid()}}\\n')")))
    # due again at once, two idle processors, re-listed at every poll: only the one-per-file rule holds it back
    manager = managers(dags, parsing_processes=2, min_file_process_interval=0, dag_dir_list_interval=0)
    seen: list[dict[str, int]] = []
    results = poll_until(manager, lambda got: len(got) >= 3, tick=lambda: seen.append(manager.processing))
    assert all(r.error is None for r in results)
    lines = [line.split()[0] for line in log.read_text().splitlines()]
    assert lines[:6] == ["start", "end"] * 3, lines
    assert all(len(processing) <= 1 for processing in seen)


# -- deleted files and duplicates -------------------------------------------------------------------

def test_a_deleted_file_yields_a_result_and_sync_deactivates_its_dags_and_clears_its_error(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    (dags / "pipeline.py").write_text(dag_source("pipeline"))
    (dags / "broken.py").write_text("raise ValueError('no')\n")
    (dags / "other.py").write_text(dag_source("other"))
    manager = managers(dags, dag_dir_list_interval=0, time=FakeTime())
    with sessions.begin() as session:
        sync_results(session, manager.parse_all(timeout=20), now=clock.now(), actor=ACTOR)

    (dags / "pipeline.py").unlink()
    (dags / "broken.py").unlink()
    results = manager.poll()
    assert sorted((Path(r.fileloc).name, r.deleted) for r in results) == [("broken.py", True), ("pipeline.py", True)]
    with sessions.begin() as session:
        report = sync_results(session, results, now=clock.now(), actor=ACTOR)
        assert report.deactivated == ["pipeline"] and report.cleared == [str(dags / "broken.py")]
        assert [d.dag_id for d in session.scalars(select(Dag).where(Dag.is_active.is_(True)))] == ["other"]
        assert count(session, ImportError_) == 0
        assert list(session.scalars(select(DagFile.fileloc))) == [str(dags / "other.py")]
        assert count(session, DagVersion, DagVersion.dag_id == "pipeline") == 1, "history stays"


def test_a_dag_id_defined_in_two_files_is_an_import_error_for_the_later_file(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    (dags / "a.py").write_text(dag_source("shared"))
    (dags / "b.py").write_text(dag_source("shared", commands=("echo other",)))
    manager = managers(dags, dag_dir_list_interval=0, time=FakeTime())
    results = by_file(manager.parse_all(timeout=20))
    assert results["a.py"].error is None
    assert results["b.py"].error == f"{dags / 'b.py'}: DAG 'shared' is already defined in {dags / 'a.py'}"
    with sessions.begin() as session:
        sync_results(session, results.values(), now=clock.now(), actor=ACTOR)
        dag = session.get(Dag, "shared")
        assert dag is not None and dag.fileloc == str(dags / "a.py")

    # once a.py no longer defines it, b.py is parsed again at once and takes it over
    (dags / "a.py").write_text(dag_source("renamed"))
    results = by_file(poll_until(manager, lambda got: has("a.py")(got) and has("b.py", ok=True)(got)))
    with sessions.begin() as session:
        sync_results(session, results.values(), now=clock.now(), actor=ACTOR)
        dag = session.get(Dag, "shared")
        assert dag is not None and dag.fileloc == str(dags / "b.py") and dag.is_active
        assert count(session, ImportError_) == 0


# -- sync -------------------------------------------------------------------------------------------

def test_sync_writes_a_version_only_when_the_hash_changes(
        dags: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    path = dags / "pipeline.py"
    path.write_text(dag_source("pipeline"))
    manager = managers(dags)

    def sync() -> Any:
        clock.advance(minutes=1)
        with sessions.begin() as session:
            return sync_results(session, manager.parse_all(timeout=20), now=clock.now(), actor=ACTOR)

    def counts() -> tuple[int, int]:
        with sessions.begin() as session:
            return count(session, DagVersion), count(session, Event)

    assert sync().new_versions == ["pipeline"]
    assert counts() == (1, 1)

    report = sync()  # same content: not re-serialised, only last_parsed_at moves
    assert report.unchanged == [str(path)] and report.registered == []
    assert counts() == (1, 1)
    with sessions.begin() as session:
        assert session.scalars(select(DagFile.last_parsed_at)).one() == clock.now()

    path.write_text(dag_source("pipeline", comment="a comment changes the file, not the DAG"))
    report = sync()
    assert report.unchanged == [] and report.new_versions == []
    assert counts() == (1, 1)

    path.write_text(dag_source("pipeline", commands=("echo a", "echo changed")))
    assert sync().new_versions == ["pipeline"]
    assert counts() == (2, 2)
    with sessions.begin() as session:
        stored = session.scalars(select(DagFile.content_hash)).one()
        assert stored == manager.parse_all(timeout=20)[0].content_hash


def test_a_restarted_manager_seeded_from_the_database_parses_only_what_changed(
        dags: Path, tmp_path: Path, managers: Any, sessions: Any, clock: FixedClock) -> None:
    counters = {name: tmp_path / f"{name}.count" for name in ("same", "changed", "gone")}
    for name, counter in counters.items():
        (dags / f"{name}.py").write_text(dag_source(name, prelude=counting(counter)))
    first = managers(dags)
    with sessions.begin() as session:
        sync_results(session, first.parse_all(timeout=20), now=clock.now(), actor=ACTOR)
    first.stop()

    # while the scheduler is down: one file changes, one is deleted, one appears
    (dags / "changed.py").write_text(dag_source("changed", prelude=counting(counters["changed"]),
                                                commands=("echo v2",)))
    (dags / "gone.py").unlink()
    (dags / "new.py").write_text(dag_source("same", commands=("echo duplicate",)))

    clock_ = FakeTime()
    second = managers(dags, time=clock_)
    with sessions.begin() as session:
        second.seed(known_hashes(session), known_owners(session))
    results = by_file(poll_until(second, lambda got: len(got) == 3, tick=lambda: clock_.advance(1)))
    assert sorted(results) == ["changed.py", "gone.py", "new.py"]
    assert results["gone.py"].deleted
    assert results["new.py"].error == f"{dags / 'new.py'}: DAG 'same' is already defined in {dags / 'same.py'}"
    assert [imports(c) for c in counters.values()] == [1, 2, 1]
    with sessions.begin() as session:
        report = sync_results(session, results.values(), now=clock.now(), actor=ACTOR)
        assert report.new_versions == ["changed"] and report.deactivated == ["gone"]
        assert sorted(d.dag_id for d in session.scalars(select(Dag).where(Dag.is_active.is_(True)))) == [
            "changed", "same"]
