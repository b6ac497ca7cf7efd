"""`ledger dags list|show|versions|diff|errors|next-runs|pause|unpause`."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli import testing
from ledger.cli.env import open_env, print_json
from ledger.cli.options import DagId, DagsFolder, Json, usage_error
from ledger.core.callbacks import callback_target
from ledger.core.dates import local_text
from ledger.services import documents
from ledger.services.operations import set_paused
from ledger.store import dags as dag_store

app = typer.Typer(help="Inspect the DAGs of the DAGs folder and their versions.", no_args_is_help=True)
out = Console()


@app.command("list")
def list_(dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """The DAGs of the DAGs folder with schedule, current version and paused state."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        rows = [documents.dag_json(d, documents.about_of(session, d)) for d in dag_store.listing(session)]
        errors = len(dag_store.import_errors(session))
    if as_json:
        print_json(rows)
        return
    described = any(r.get("about") for r in rows)  # Airflow DAGs' display name, owner, tags
    table = Table("dag_id", *(["display name", "owner", "tags"] if described else []), "schedule", "timezone",
                  "version", "paused", "file")
    for r in rows:
        about = r.get("about") or {}
        table.add_row(r["dag_id"], *([about.get("display_name", ""), about.get("owner", ""),
                                      ", ".join(about.get("tags", []))] if described else []),
                      r["schedule"], r["timezone"], (r["version"] or "")[:12],
                      "yes, queued runs held" if r["stop_queued"] else "yes" if r["is_paused"] else "no", r["fileloc"])
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
        raise usage_error("--file goes with --source")
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        dag = dag_store.get(session, dag_id, active_only=version is None)
        doc = documents.version_document(session, dag, version, source=source, file=file)
    if as_json:
        print_json(doc)
        return
    if source:
        source_code = doc["source_code"]
        sys.stdout.write(source_code if source_code.endswith("\n") else source_code + "\n")
        return
    structure, code, row_hash = doc["structure"], doc["code"], doc["version"]
    out.print(f"[bold]{dag_id}[/bold]  version {row_hash[:12]}  registered {doc['created_at']}")
    out.print(f"schedule {documents.schedule_text(structure)}  timezone {structure['timezone']}  "
              f"start {structure['start_date']}  end {structure['end_date']}  catchup {structure['catchup']}")
    out.print(f"code {_code_text(code)}", highlight=False)
    for line in documents.about_lines(structure.get("about") or {}):
        out.print(line, highlight=False, markup=False)
    if structure.get("ignored_args"):
        out.print(f"ignored default_args (accepted for Airflow compatibility, no effect in ledger): "
                  f"{', '.join(structure['ignored_args'])}", highlight=False)
    with_signals = any(t.get("signals") for t in structure["tasks"])
    table = Table("task", "kind", "upstream", "retries", "depends_on_past", "trigger_rule", "pool",
                  *(["signals"] if with_signals else []))
    for t in documents.graph_tasks(structure):
        kind = f"{t['kind']}, mapped" if t.get("expand") else t["kind"]  # instances per run: `ledger runs show`
        labels = t.get("labels") or {}
        upstream = ", ".join(f"{u} ({labels[u]})" if u in labels else u for u in t["upstream"])
        table.add_row(t["task_id"], kind, upstream or "-", str(t["retries"]),
                      str(t["depends_on_past"]), t["trigger_rule"], t["pool"],
                      *([_signal_rules(t.get("signals") or {})] if with_signals else []))
    out.print(table)
    limits = [f"{name} {structure[name]:g} s" for name in ("dagrun_timeout", "deadline") if structure.get(name)]
    if limits:
        out.print("run limits: " + ", ".join(limits), highlight=False)
    calls = [("DAG", kind, fns) for kind, fns in (structure.get("callbacks") or {}).items()] + [
        (f"task {t['task_id']}", kind, fns) for t in structure["tasks"]
        for kind, fns in (t.get("callbacks") or {}).items()]
    for owner, kind, fns in calls:
        out.print(f"callback {owner} {kind}: {', '.join(callback_target(f) for f in fns)}", highlight=False)


def _signal_rules(rules: dict[str, Any]) -> str:
    """`key: START`, `key: stop→STOP, *→START`, `key: fn()` per line."""
    def one(rule: dict[str, Any]) -> str:
        if "action" in rule:
            return str(rule["action"])
        if "values" in rule:
            return ", ".join(f"{v}→{a}" for v, a in rule["values"].items())
        return f"{str(rule.get('function', '?')).rsplit('.', 1)[-1]}()"
    return "\n".join(f"{key}: {one(rule)}" for key, rule in rules.items()) or "-"


def _code_text(code: dict[str, Any]) -> str:
    if code.get("dropped"):
        return f"unknown (dropped by a forced database downgrade, {code['dropped']['at']})"
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
        rows = documents.versions_document(session, dag)
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
        a_row, b_row = (dag_store.version(session, dag_id, ref) for ref in (old, new or dag.current_version or ""))
        text = documents.version_diff(session, dag, a_row, b_row)
    a, b = a_row.version_hash[:12], b_row.version_hash[:12]
    sys.stdout.write(text or f"versions {a} and {b} are the same\n")


@app.command()
def errors(dags_folder: DagsFolder = None, as_json: Json = False) -> None:
    """DAG files that failed to import, with their error."""
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        rows = [documents.import_error_json(e) for e in dag_store.import_errors(session)]
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
        rows = documents.next_runs_document(session, dag_id, now=env.clock.now(), n=n)
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
    for i in rows:
        start = "" if i["data_interval_start"] == i["logical_date"] else \
            f" (from {local_text(i['data_interval_start'], spec.timezone)})"
        table.add_row(local_text(i["logical_date"], spec.timezone) + start, local_text(i["data_interval_end"],
                                                                                        spec.timezone))
    out.print(table)


def _set_paused(dag_id: str, paused: bool, dags_folder: Any, stop_queued: bool = False) -> None:
    env = open_env(dags_folder)
    env.refresh_dags()
    with env.transaction() as session:
        set_paused(session, dag_id, paused, now=env.clock.now(), actor=env.actor, stop_queued=stop_queued)
    out.print(f"{dag_id} is {'paused' if paused else 'unpaused'}"
              + (": no new runs, and its queued runs do not start" if stop_queued else ""))


@app.command()
def pause(dag_id: DagId, stop_queued: Annotated[bool, typer.Option(
              "--stop-queued", help="Also keep its queued runs (scheduled, manual, backfill) from starting; runs "
              "already running carry on.")] = False,
          dags_folder: DagsFolder = None) -> None:
    """Stop the scheduler from creating new runs of a DAG (runs already created still run, unless
    --stop-queued)."""
    _set_paused(dag_id, True, dags_folder, stop_queued)


@app.command()
def unpause(dag_id: DagId, dags_folder: DagsFolder = None) -> None:
    """Let the scheduler create runs of a DAG again."""
    _set_paused(dag_id, False, dags_folder)


app.command("test")(testing.dag_test)
