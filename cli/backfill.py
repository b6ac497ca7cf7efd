"""`ledger backfill DAG --start A --end B`, `ledger backfill list`, `ledger backfill cancel ID`."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup

from ledger.cli.env import actor_name, open_env, parse_conf, print_json
from ledger.cli.options import BackfillId, DagId, DagsFolder, Json, Parallelism, checked_date, usage_error, within_range
from ledger.core.dates import iso, parse_user_date
from ledger.core.errors import InvalidInput
from ledger.core.states import ACTIVE_TASK_STATES, RunState
from ledger.services.documents import backfill_document, backfills_document
from ledger.store import backfills as backfill_store
from ledger.store import dags as dag_store
from ledger.store.backfills import Progress, progress_of


class _DefaultToCreate(TyperGroup):
    """`ledger backfill DAG ...` is short for `ledger backfill create DAG ...`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_DefaultToCreate, no_args_is_help=True,
                  help="Rewrite a DAG's history: `ledger backfill DAG --start A --end B` (short for "
                       "`ledger backfill create ...`), `ledger backfill list`, `ledger backfill cancel ID`.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

ACTION_STYLE = {"new": "green", "override": "yellow", "skip": "dim"}


@app.command()
def create(
    dag_id: DagId,
    start: Annotated[str, typer.Option(help="First logical date (ISO; a bare date is read in the DAG's timezone).",
                                       show_default=False, callback=checked_date)],
    end: Annotated[str, typer.Option(help="Last logical date, inclusive.", show_default=False, callback=checked_date)],
    reprocess: Annotated[str, typer.Option(help="Dates that already have a live run: none (skip them), failed "
                                           "(re-run failed ones) or completed (re-run every finished one).")] = "none",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan and change nothing.")] = False,
    as_json: Json = False,
    max_active_runs: Annotated[int | None, typer.Option(min=1, callback=within_range,
                                                        help="Runs executed at once by this backfill.")] = None,
    backwards: Annotated[bool, typer.Option("--backwards", help="Run the newest dates first.")] = False,
    conf: Annotated[str | None, typer.Option(help="A JSON object given to every run.")] = None,
    submit: Annotated[bool, typer.Option("--submit", help="Create the runs and leave them to the scheduler.")]
    = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    downstream: Annotated[bool, typer.Option("--downstream", help="Also re-run the consumer runs (DAGs scheduled "
                                             "on partitioned datasets) that read the partitions it rewrites, "
                                             "in dependency order, as the rewrites are written.")] = False,
    parallelism: Parallelism = None,
    dags_folder: DagsFolder = None,
) -> None:
    """Plan the dates of a range (new / override / skip), then create and execute the runs."""
    from ledger.backfill.downstream import plan_downstream
    from ledger.core.backfill_plan import Action, Reprocess
    from ledger.infra.scheduler_settings import SchedulerSettings
    from ledger.services.backfill_create import plan_json
    from ledger.services.operations import backfill_request, plan_backfill

    if reprocess not in {r.value for r in Reprocess}:
        raise typer.BadParameter(f"--reprocess must be none, failed or completed, not {reprocess!r}",
                                 param_hint="'--reprocess'")
    conf_value = parse_conf(conf)
    settings = SchedulerSettings.from_env(parallelism=parallelism,
                                          max_held_runs=max_active_runs)
    env = open_env(dags_folder)
    env.actor = actor_name("backfill")
    env.refresh_dags()
    with env.transaction() as session:
        spec = dag_store.current_spec(session, dag_id)
        first = parse_user_date(start, timezone=spec.timezone, what="--start")
        if parse_user_date(end, timezone=spec.timezone, what="--end", end_of_day=True) < first:
            # wrong whatever the ledger holds: a usage error, as a bad date is
            raise usage_error(f"the range is backwards: --end {end} is before --start {start}")
        request = backfill_request(spec, start, end, reprocess=reprocess, backwards=backwards, conf=conf_value,
                                   max_active_runs=max_active_runs, submit=submit, requested_by=env.actor,
                                   downstream=downstream)
        spec, plan = plan_backfill(session, request, now=env.clock.now(), stale_after=settings.lock_timeout)
        below = plan_downstream(session, spec, plan) if downstream else None
    if dry_run:
        if as_json:
            print_json(plan_json(plan) if below is None else {"plan": plan_json(plan), "downstream": below})
        else:
            _show_plan(dag_id, plan_json(plan), below)
        return
    if not as_json:
        _show_plan(dag_id, plan_json(plan), below)
    todo = [i for i in plan if i.action != Action.SKIP or i.adopts_backfill is not None]
    if not todo:
        (print_json({"backfill_id": None, "plan": plan_json(plan), "state": "nothing to do"}) if as_json
         else out.print("nothing to do: every date is skipped"))
        return
    if not yes and sys.stdin.isatty() and not typer.confirm(f"Create {len(todo)} run(s)?", default=False):
        raise typer.Exit(1)
    _run(env, settings, spec, request, plan, as_json)


def _run(env: Any, settings: Any, spec: Any, request: Any, shown: Any, as_json: bool) -> None:
    from ledger.backfill.job import BackfillJob
    from ledger.scheduler.executors import executor_for
    from ledger.services.backfill_create import create_confirmed, plan_json

    job = BackfillJob(sessions=env.sessions, engine=env.engine, settings=settings,
                      executor=executor_for(settings, batch=True), clock=env.clock,
                      actor=env.actor, logs_folder=env.settings.logs_folder, say=lambda _line: None,
                      newest_first=request.backwards)
    executing = not request.submit
    if executing:
        _start(job)
    try:
        with env.transaction() as session:
            created = create_confirmed(session, spec, request, shown, now=env.clock.now(),
                                       actor=job.actor if executing else env.actor,
                                       job_id=job.job_id if executing else None, stale_after=settings.lock_timeout)
    except BaseException:
        if executing:
            job.shutdown()
        raise
    backfill_id, plan = created.backfill_id, created.plan
    job.adopted, job.adopted_runs = created.adopted, created.adopted_runs
    if not as_json:
        shown_action = {i.logical_date: i.action for i in shown}
        for item in plan:
            if shown_action.get(item.logical_date) not in (None, item.action):
                out.print(f"{iso(item.logical_date)}: planned {shown_action[item.logical_date].value}, "
                          f"now {item.action.value}: {item.reason}")
        out.print(f"backfill {backfill_id} created: {_counts(plan_json(plan))}")
    if not executing:
        if job.job_id:
            job.shutdown()
        (print_json({"backfill_id": str(backfill_id), "plan": plan_json(plan), "state": "submitted"}) if as_json
         else out.print(f"backfill {backfill_id} submitted: the scheduler will run its runs"))
        return
    _execute(env, job, backfill_id, plan_json(plan), as_json)


def _start(job: Any) -> None:
    """Start the backfill's job and wait for its executor: a worker that cannot start says so before the backfill's
    runs are created or taken over (decision 0361)."""
    job.start()
    try:
        job.executor.ready()
    except BaseException:
        job.shutdown()
        raise


def _execute(env: Any, job: Any, backfill_id: int, plan_rows: list[dict[str, Any]] | None, as_json: bool) -> None:
    """Run the backfill's runs in this process until each has finished; report, and exit 0 (all succeeded),
    1 (a task failed) or 128 + signal (interrupted, with how to resume)."""
    job.backfill_id = backfill_id
    job.install_signal_handlers()
    started = time.monotonic()
    live = Live(console=out, refresh_per_second=4, transient=False) if not as_json and out.is_terminal else None
    last: list[Progress] = []

    def show(p: Progress) -> None:
        last[:] = [p]
        if live is not None:
            live.update(_progress_line(backfill_id, p, time.monotonic() - started, job.waiting))
        elif job.waiting and not as_json and job.waiting[0][1] != said[0]:  # not a terminal: say it once
            said[0] = job.waiting[0][1]
            out.print(f"backfill {backfill_id}: run {job.waiting[0][0]} waiting: {said[0]}")

    said = [""]

    job.on_progress = show
    if live is not None:
        live.start()
    try:
        job.run_started(exit_when_idle=True)
    finally:
        with env.reading() as session:
            final = progress_of(session, backfill_id, job.adopted_runs)
            state = backfill_store.get(session, backfill_id).state
            results = {iso(r.logical_date): {"run_id": str(r.id), "state": r.state}
                       for r in backfill_store.finishing_runs(session, backfill_id, job.adopted_runs)}
            left = backfill_store.unfinished_among(session, job.adopted_runs)
        if live is not None:
            live.update(_progress_line(backfill_id, final, time.monotonic() - started))
            live.stop()
    failed = final.tasks.get("failed", 0) + final.tasks.get("upstream_failed", 0)
    resume = f"backfill {backfill_id} interrupted with {final.runs_total - final.runs_done} run(s) unfinished: "
    own_left = final.runs_total - final.runs_done - len(left)
    if not left:
        resume += (f"`ledger backfill resume {backfill_id}` finishes them (a running scheduler will too); "
                   f"`ledger backfill cancel {backfill_id}` stops them")
    else:  # an adopted run is still its own backfill's: resuming that one finishes it
        whose = ([(backfill_id, own_left)] if own_left else []) + sorted(Counter(left.values()).items())
        resume += "; ".join(f"{n} of backfill {b}: `ledger backfill resume {b}` finishes them, `ledger backfill "
                            f"cancel {b}` stops them" for b, n in whose) + " (a running scheduler finishes them too)"
    if as_json:
        if plan_rows is not None:  # the plan carried out, with the result of each date
            plan_rows = [{**row, "result": results.get(iso(parse_iso(row["logical_date"])))} for row in plan_rows]
        print_json({"backfill_id": str(backfill_id), "state": state, "plan": plan_rows,
                    "runs": {"total": final.runs_total, "done": final.runs_done, "failed": final.runs_failed,
                             "adopted": len(job.adopted_runs)},
                    "tasks": final.tasks})
    else:
        if live is None:  # not a terminal: no live display, one final line
            out.print(_progress_line(backfill_id, final, time.monotonic() - started))
        if state != "interrupted":
            out.print(f"backfill {backfill_id} {state}")
    if state == "interrupted" and job.blocked:
        first = job.waiting[0]
        err.print(f"backfill {backfill_id} stopped: run {first[0]} cannot start, {first[1]}; re-run that date "
                  f"(--reprocess failed), then `ledger backfill resume {backfill_id}` (a running scheduler "
                  f"will also finish it)")
        raise typer.Exit(1)
    if state == "interrupted":
        err.print(resume)
        raise typer.Exit(128 + (job.stop_signal or 2))  # 130 after Ctrl-C, 143 after SIGTERM
    if failed or final.runs_failed or state not in ("success",):
        raise typer.Exit(1)


def parse_iso(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def _progress_line(backfill_id: int, p: Progress, elapsed: float,
                   waiting: list[tuple[int, str, bool]] | None = None) -> Text:
    t = p.tasks
    remaining = (elapsed / p.runs_done * (p.runs_total - p.runs_done)) if p.runs_done else None
    text = Text(f"backfill {backfill_id}: runs {p.runs_done}/{p.runs_total} done · tasks ")
    text.append(f"{t.get('success', 0)} succeeded", style="green")
    text.append(" / ")
    text.append(f"{t.get('failed', 0) + t.get('upstream_failed', 0)} failed", style="red")
    text.append(f" / {t.get('skipped', 0)} skipped / {sum(t.get(s, 0) for s in ACTIVE_TASK_STATES)} running")
    text.append(f" · elapsed {_clock(elapsed)} · remaining {_clock(remaining) if remaining is not None else '?'}")
    if waiting:
        run_id, why, _blocked = waiting[0]
        more = f" (+{len(waiting) - 1} more)" if len(waiting) > 1 else ""
        text.append(f" · run {run_id} waiting: {why}{more}", style="yellow")
    return text


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _show_plan(dag_id: str, rows: list[dict[str, Any]], below: list[dict[str, Any]] | None = None) -> None:
    table = Table("logical date", "action", "reason", "replaces", title=f"backfill plan for {dag_id}",
                  title_justify="left")
    for r in rows:
        table.add_row(r["logical_date"], Text(r["action"], style=ACTION_STYLE[r["action"]]), r["reason"],
                      r["replaces_run_id"] or "")
    out.print(table)
    out.print(_counts(rows))
    if below is None:
        return
    down = Table("order", "DAG", "logical date", "action", "because", "replaces",
                 title="downstream re-runs (made by the scheduler as the rewrites are written)", title_justify="left")
    for r in below:
        down.add_row(str(r["depth"]), r["dag_id"], r["logical_date"],
                     Text(r["action"] + (" once unpaused" if r["paused"] else ""), style=ACTION_STYLE[r["action"]]),
                     f"{r['because']['dataset']} {r['because']['partition']} rewritten", r["replaces_run_id"] or "")
    out.print(down)
    waiting = sum(1 for r in below if r["paused"])
    out.print(f"{len(below)} downstream run(s) in {len({r['dag_id'] for r in below})} DAG(s)"
              + (f", {waiting} of them in paused DAGs: made once the DAG is unpaused" if waiting else ""))


def _counts(rows: list[dict[str, Any]]) -> str:
    """What a plan does, by action: a date whose run an earlier, dead backfill left unfinished is adopted
    (this backfill finishes that run), counted apart from the dates it leaves alone."""
    adopted = sum(1 for r in rows if r.get("adopts_backfill") is not None)
    n = {a: sum(1 for r in rows if r["action"] == a and r.get("adopts_backfill") is None)
         for a in ("new", "override", "skip")}
    return f"{n['new']} new, {n['override']} override, " + (f"{adopted} adopted, " if adopted else "") + \
        f"{n['skip']} skip"


@app.command()
def resume(backfill_id: BackfillId,
           parallelism: Parallelism = None,
           as_json: Json = False) -> None:
    """Finish an interrupted backfill (or one whose process died): take over its unfinished runs (at once
    when their job's process is gone on this host, after the lock timeout otherwise) and run them here."""
    from ledger.backfill.job import BackfillJob
    from ledger.core.backfill_state import resumable
    from ledger.infra.scheduler_settings import SchedulerSettings
    from ledger.scheduler.executors import executor_for
    from ledger.services.operations import resume_backfill

    env = open_env()
    env.actor = actor_name("backfill")
    with env.transaction() as session:
        row = backfill_store.get(session, backfill_id)
        if not resumable(row.state, by_job=True):
            raise InvalidInput(f"backfill {backfill_id} is {row.state}: there is nothing to resume")
        settings = SchedulerSettings.from_env(parallelism=parallelism, max_held_runs=row.max_active_runs)
        newest_first = row.backwards
    job = BackfillJob(sessions=env.sessions, engine=env.engine, settings=settings,
                      executor=executor_for(settings, batch=True), clock=env.clock,
                      actor=env.actor, logs_folder=env.settings.logs_folder, say=lambda _line: None,
                      newest_first=newest_first)
    _start(job)
    try:
        with env.transaction() as session:
            resume_backfill(session, backfill_id, now=env.clock.now(), actor=job.actor, job_id=job.job_id)
    except BaseException:
        job.shutdown()
        raise
    if not as_json:
        out.print(f"resuming backfill {backfill_id}")
    _execute(env, job, backfill_id, None, as_json)


@app.command("list")
def list_(as_json: Json = False) -> None:
    """Backfills, newest first: range, policy, state, and what became of their runs (planned, created,
    later overridden by another run, succeeded, failed), who asked and when."""
    env = open_env()
    with env.reading() as session:
        rows = backfills_document(session)
    if as_json:
        print_json(rows)
        return
    table = Table("id", "dag", "start", "end", "reprocess", "state", "planned", "created", "overridden later",
                  "succeeded", "failed", "requested by", "created at")
    for r in rows:
        table.add_row(r["backfill_id"], r["dag_id"], r["start"], r["end"], r["reprocess"], r["state"],
                      str(r["planned"]), str(r["created"]), str(r["overridden_later"]), str(r["succeeded"]),
                      str(r["failed"]), r["requested_by"], r["created_at"])
    out.print(table)


@app.command()
def show(backfill_id: BackfillId,
         as_json: Json = False) -> None:
    """One backfill and its dates: each run it created, its state, and what replaced it."""
    env = open_env()
    with env.reading() as session:
        doc = backfill_document(session, backfill_id)
    if as_json:
        print_json(doc)
        return
    out.print(f"backfill {doc['backfill_id']} of {doc['dag_id']}: {doc['start']} to {doc['end']}, "
              f"reprocess {doc['reprocess']}, {doc['state']}; requested by {doc['requested_by']} at "
              f"{doc['created_at']}; planned {doc['planned']}, created {doc['created']}, overridden later "
              f"{doc['overridden_later']}, succeeded {doc['succeeded']}, failed {doc['failed']}")
    table = Table("run", "logical date", "state", "overridden by")
    for r in doc["runs"]:
        table.add_row(r["run_id"], r["logical_date"], r["state"], r["overridden_by"] or "")
    out.print(table)


@app.command()
def cancel(backfill_id: BackfillId, dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print what the cancel would do to each date, and do nothing.")] = False) -> None:
    """Stop a backfill: its remaining runs are not run; finished runs stay. A date whose run it stops gets back the
    run the backfill had replaced there, when that run had finished (decision 0210). It prints what becomes of
    each date, as read in the transaction that cancels (--dry-run: only that)."""
    from ledger.infra.scheduler_settings import SchedulerSettings
    from ledger.services.operations import stop_backfill

    env = open_env()
    if dry_run:
        with env.reading() as session:
            backfill_store.get(session, backfill_id)
            fates = backfill_store.cancel_preview(session, backfill_id)
        for f in fates:
            out.print(f"{iso(f.logical_date)}: {f.says}")
        return
    with env.transaction() as session:  # what becomes of each date is read in the transaction that cancels
        fates = backfill_store.cancel_preview(session, backfill_id)
        failed, _unfinished = stop_backfill(session, backfill_id, now=env.clock.now(), actor=env.actor,
                                            stale_after=SchedulerSettings.from_env().lock_timeout)
        left = backfill_store.unfinished_by_state(session, backfill_id)  # (held by live jobs, which end them)
    for f in fates:
        out.print(f"{iso(f.logical_date)}: {f.says}")
    running, queued = left.get(RunState.RUNNING.value, 0), left.get(RunState.QUEUED.value, 0)
    out.print(f"backfill {backfill_id} cancelled: {len(failed) + queued} run(s) will not run"
              + (f"; {running} running run(s) are being stopped by their job" if running else ""))
