"""`ledger dags list|show|versions|diff|errors|next-runs|pause|unpause`."""

from __future__ import annotations

import difflib
import json
import os
import sys
from typing import Annotated, Any

import pendulum
import typer
from rich.console import Console
from rich.table import Table

from cli.env import open_env, print_json
from cli.options import DagId, DagsFolder, Json
from ledger.dates import iso, local_text
from ledger.errors import InvalidInput
from ledger.schedule import next_scheduled
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import events
from ledger.store import runs as run_store
from ledger.versions import schedule_from_description

app = typer.Typer(help="Inspect the DAGs of the DAGs folder and their versions.", no_args_is_help=True)
out = Console()


@app.command("list")
def list_(dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """The DAGs of the DAGs folder with schedule, current version and paused state."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        rows = [{"dag_id": d.dag_id, "fileloc": d.fileloc, "schedule": d.schedule, "timezone": d.timezone,
                 "version": d.current_version, "is_paused": d.is_paused}
                for d in dag_store.listing(session)]
        errors = len(dag_store.import_errors(session))
    if as_json:
        print_json(rows)
        return
    table = Table("dag_id", "schedule", "timezone", "version", "paused", "file")
    for r in rows:
        table.add_row(r["dag_id"], r["schedule"], r["timezone"], (r["version"] or "")[:12],
                      "yes" if r["is_paused"] else "no", r["fileloc"])
    out.print(table)
    if errors:
        out.print(f"[yellow]{errors} file(s) failed to import; see `ledger dags errors`[/yellow]")


@app.command()
def show(dag_id: DagId, version: Annotated[str | None, typer.Option(help="A version hash or prefix "
         "(default: the current version).")] = None,
         source: Annotated[bool, typer.Option("--source", help="Print the DAG file's code as of that version.")]
         = False,
         file: Annotated[str | None, typer.Option("--file", help="With --source: print this file of the version's "
                         "code instead (a path relative to the DAGs folder, e.g. common/util.py).")] = None,
         dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """Tasks and edges of a DAG as of a version, or with --source the code it ran with then."""
    if file is not None and not source:
        raise InvalidInput("--file goes with --source")
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        dag = dag_store.get(session, dag_id, active_only=version is None)
        row = dag_store.version(session, dag_id, version or dag.current_version or "")
        structure: dict[str, Any] = json.loads(row.structure)
        created = row.created_at
        code = code_store.describe(row)
        texts = code_store.version_texts(session, row, _legacy_name(dag.fileloc)) if source or as_json else {}
        files = sorted(texts) if texts else sorted(code_store.manifest_of(session, row)) if row.code_snapshot \
            else [_legacy_name(dag.fileloc)] if row.source_code is not None else []
    entry = row.code_entry or _legacy_name(dag.fileloc)
    code["files"] = files
    if source and not texts:
        raise InvalidInput(f"version {row.version_hash[:12]} of {dag_id} has no stored code "
                           "(it was registered before ledger kept it)")
    if file is not None and file not in texts:
        raise InvalidInput(f"version {row.version_hash[:12]} of {dag_id} has no file {file!r}; it has: "
                           + ", ".join(sorted(texts)))
    source_code = texts.get(file or entry) if source else None
    if as_json:
        print_json({"dag_id": dag_id, "version": row.version_hash, "created_at": iso(created),
                    "structure": structure, "code": code,
                    **({"source_code": source_code, "file": file or entry} if source else {})})
        return
    if source:
        assert source_code is not None
        sys.stdout.write(source_code if source_code.endswith("\n") else source_code + "\n")
        return
    out.print(f"[bold]{dag_id}[/bold]  version {row.version_hash[:12]}  registered {iso(created)}")
    out.print(f"schedule {_schedule_text(structure)}  timezone {structure['timezone']}  "
              f"start {structure['start_date']}  end {structure['end_date']}  catchup {structure['catchup']}")
    out.print(f"code {_code_text(code)}", highlight=False)
    if structure.get("ignored_args"):
        out.print(f"ignored default_args (accepted for Airflow compatibility, no effect in ledger): "
                  f"{', '.join(structure['ignored_args'])}", highlight=False)
    with_signals = any(t.get("signals") for t in structure["tasks"])
    table = Table("task", "kind", "upstream", "retries", "depends_on_past", "trigger_rule", "pool",
                  *(["signals"] if with_signals else []))
    for t in structure["tasks"]:
        table.add_row(t["task_id"], t["kind"], ", ".join(t["upstream"]) or "-", str(t["retries"]),
                      str(t["depends_on_past"]), t["trigger_rule"], t["pool"],
                      *([_signal_rules(t.get("signals") or {})] if with_signals else []))
    out.print(table)


def _signal_rules(rules: dict[str, Any]) -> str:
    """`key: START`, `key: stop→STOP, *→START`, `key: fn()` per line."""
    def one(rule: dict[str, Any]) -> str:
        if "action" in rule:
            return str(rule["action"])
        if "values" in rule:
            return ", ".join(f"{v}→{a}" for v, a in rule["values"].items())
        return f"{str(rule.get('function', '?')).rsplit('.', 1)[-1]}()"
    return "\n".join(f"{key}: {one(rule)}" for key, rule in rules.items()) or "-"


def _legacy_name(fileloc: str | None) -> str:
    """The name a version from before code was captured gives its DAG file (its file's base name)."""
    return os.path.basename(fileloc) if fileloc and fileloc != "?" else "dag.py"


def _schedule_text(structure: dict[str, Any]) -> str:
    """The schedule of a version's structure as people write it: '@daily', '0 6 * * *', 'every 1:00:00'."""
    start = pendulum.parse(structure["start_date"])
    assert isinstance(start, pendulum.DateTime)
    try:
        return schedule_from_description(structure["schedule"], timezone=structure["timezone"],
                                         start_date=start).summary()
    except Exception:
        return json.dumps(structure["schedule"])


def _code_text(code: dict[str, Any]) -> str:
    if not code["captured"]:
        return "DAG file only (registered before helper modules were captured)"
    helpers = [f for f in code.get("files", []) if f != code["entry"]]
    return str(code["entry"]) + (f" + {len(helpers)} helpers" if helpers else "")


@app.command()
def versions(dag_id: DagId, dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """Every version of a DAG, oldest first, with how many runs were created on it and how many tries ran its
    code."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        used = dag_store.usage(session, dag_id)
        rows = []
        for v in dag_store.versions(session, dag_id):
            structure = json.loads(v.structure)
            runs, tries = used.get(v.version_hash, (0, 0))
            code = code_store.describe(v)
            code["files"] = sorted(code_store.manifest_of(session, v)) if v.code_snapshot else \
                [_legacy_name(dag.fileloc)] if v.source_code is not None else []
            rows.append({"version": v.version_hash, "created_at": iso(v.created_at),
                         "current": v.version_hash == dag.current_version,
                         "tasks": [t["task_id"] for t in structure["tasks"]],
                         "schedule": structure["schedule"], "schedule_text": _schedule_text(structure),
                         "runs": runs, "tries": tries, "code": code})
    if as_json:
        print_json(rows)
        return
    table = Table("version", "registered", "current", "schedule", "runs", "tries", "code", "tasks")
    for r in rows:
        table.add_row(r["version"][:12], r["created_at"], "*" if r["current"] else "", r["schedule_text"],
                      str(r["runs"]), str(r["tries"]), _code_text(r["code"]), ", ".join(r["tasks"]))
    out.print(table)


@app.command()
def diff(dag_id: DagId,
         old: Annotated[str, typer.Argument(help="The older version (hash or prefix).")],
         new: Annotated[str | None, typer.Argument(help="The newer version (default: the current one).")] = None,
         dags_folder: DagsFolder = None) -> None:
    """What changed between two versions of a DAG: a unified diff of their code (the DAG file and its helper
    files) and of the structure."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        rows = [dag_store.version(session, dag_id, ref) for ref in (old, new or dag.current_version or "")]
        texts = [(r.version_hash[:12], code_store.version_texts(session, r, _legacy_name(dag.fileloc)),
                  json.dumps(json.loads(r.structure), indent=2, sort_keys=True)) for r in rows]
    (a, a_code, a_struct), (b, b_code, b_struct) = texts
    parts = []
    if a_code and b_code:
        for path in sorted(set(a_code) | set(b_code)):
            parts.append(difflib.unified_diff(
                a_code.get(path, "").splitlines(keepends=True), b_code.get(path, "").splitlines(keepends=True),
                f"{dag_id}@{a}/{path}" if path in a_code else "/dev/null",
                f"{dag_id}@{b}/{path}" if path in b_code else "/dev/null"))
    parts.append(difflib.unified_diff((a_struct + "\n").splitlines(keepends=True),
                                      (b_struct + "\n").splitlines(keepends=True),
                                      f"{dag_id}@{a} (structure)", f"{dag_id}@{b} (structure)"))
    text = "".join(line for part in parts for line in part)
    sys.stdout.write(text or f"versions {a} and {b} are the same\n")


@app.command()
def errors(dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """DAG files that failed to import, with their error."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        rows = [{"file": e.fileloc, "error": e.error, "at": iso(e.at)} for e in dag_store.import_errors(session)]
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print("no import errors")
    for r in rows:
        out.print(f"[red]{r['file']}[/red]\n  {r['error']}", highlight=False)


@app.command("next-runs")
def next_runs(dag_id: DagId, n: Annotated[int, typer.Option("-n", "--num", min=1, max=10000,
              help="How many intervals.")] = 5, dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """The next N runs the scheduler will create, in order: those due now (all since the latest scheduled
    run with catchup, else only the latest), then the following ones as they fall due; dates held by a
    live manual run are skipped, as the scheduler skips them."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        spec = dag_store.current_spec(session, dag_id)
        latest = run_store.latest_scheduling_run(session, dag_id)
        after = latest.data_interval_end if latest else None
        held = run_store.live_dates_from(session, dag_id, after)
    intervals = next_scheduled(spec.schedule, start_date=spec.start_date, end_date=spec.end_date, after=after,
                               now=env.clock.now(), catchup=spec.catchup, held=held, n=n)  # type: ignore[arg-type]
    rows = [{"logical_date": iso(i.logical_date), "data_interval_start": iso(i.start),
             "data_interval_end": iso(i.end)} for i in intervals]
    if as_json:
        print_json(rows)
        return
    if not rows:
        out.print(f"{dag_id} has no further scheduled intervals (schedule {spec.schedule.summary()})")
        return
    # in the DAG's time zone with the offset; the interval starts at its logical date, so two columns fit
    # 80 columns (--json has all three, in UTC)
    table = Table(f"logical date ({spec.timezone})", "interval ends", title=f"next runs of {dag_id}",
                  title_justify="left")
    for i in intervals:
        start = "" if i.start == i.logical_date else f" (from {local_text(i.start, spec.timezone)})"
        table.add_row(local_text(i.logical_date, spec.timezone) + start, local_text(i.end, spec.timezone))
    out.print(table)


def _set_paused(dag_id: str, paused: bool, dags_folder: Any) -> None:
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        dag = dag_store.get(session, dag_id)
        if dag.is_paused != paused:
            dag.is_paused = paused
            events.record(session, "dag_paused" if paused else "dag_unpaused", at=env.clock.now(),
                          actor=env.actor, dag_id=dag_id)
    out.print(f"{dag_id} is {'paused' if paused else 'unpaused'}")


@app.command()
def pause(dag_id: DagId, dags_folder: DagsFolder = None) -> None:
    """Stop the scheduler from creating new runs of a DAG (runs already created still run)."""
    _set_paused(dag_id, True, dags_folder)


@app.command()
def unpause(dag_id: DagId, dags_folder: DagsFolder = None) -> None:
    """Let the scheduler create runs of a DAG again."""
    _set_paused(dag_id, False, dags_folder)


