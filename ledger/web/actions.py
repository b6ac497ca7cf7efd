"""Acting on the ledger from a browser (forms) and over the write API (POST under /api/v1), both through the
operations the CLI runs (ledger/services/operations.py), in one short write transaction each, with the user as the
actor of the events. A refusal changes nothing and answers 4xx with the CLI's one-line reason: 400 bad input,
403 not allowed (role, CSRF), 404 no such thing, 409 the timeline's state forbids it.

Roles: an operator triggers, clears, marks, cancels, pauses and backfills; a viewer only reads (403 here)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, cast
from urllib.parse import parse_qsl

import pendulum
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session, sessionmaker

from ledger.core.backfill_plan import PlanItem
from ledger.core.backfill_state import CANCELLABLE, resumable
from ledger.core.errors import InvalidInput, LedgerError, TimelineConflict
from ledger.core.mapping import label
from ledger.core.states import RunState, TaskState
from ledger.infra.settings import value as setting
from ledger.services import documents, operations
from ledger.services import users as user_rules
from ledger.services.backfill_create import plan_json
from ledger.services.users import Role
from ledger.store import backfills as backfill_store
from ledger.store import dags as dag_store
from ledger.store import runs as run_store
from ledger.store import users as user_store
from ledger.store.db import make_engine, make_sessions
from ledger.web import auth, forms
from ledger.web.guard import guard_of, identity_of
from ledger.web.reading import MAX_ID, IdInUrl, now, session_of
from ledger.web.render import render

api = APIRouter(prefix="/api/v1", tags=["actions"])
pages = APIRouter(include_in_schema=False)


def stale_after() -> float:
    """How long a silent job keeps its runs, as the scheduler's LEDGER_LOCK_TIMEOUT says (a backfill plan adopts the
    runs of a backfill whose job has been silent longer); read once, when the application is made."""
    return float(setting("LEDGER_LOCK_TIMEOUT") or 30.0)


@contextmanager
def writing(request: Request) -> Iterator[Session]:
    """One write transaction: committed at the end, rolled back (nothing changed) on any error."""
    state = request.app.state
    if getattr(state, "writer", None) is None:
        state.writer = make_sessions(make_engine(state.settings.database_url))
    sessions: sessionmaker[Session] = state.writer
    with sessions.begin() as session:
        yield session


def acting(request: Request, what: str) -> str:
    """The actor of an operator's action: the user, who must be at least an operator."""
    identity = identity_of(request)
    auth.need(identity, Role.OPERATOR, what)
    if identity.by_cookie and request.url.path.startswith("/api/") and not auth.csrf_matches(
            request.cookies.get(auth.CSRF_COOKIE), request.headers.get(auth.CSRF_HEADER)):
        raise auth.Forbidden("a write with a browser's cookie needs the ledger_csrf cookie's value in the "
                             "X-Ledger-CSRF header; scripts send `Authorization: Bearer TOKEN` instead")
    return identity.name


# --- the operations, shared by the API and the pages ---------------------------------------------------------

def _trigger(request: Request, dag_id: str, logical_date: str | None, conf: dict[str, Any] | None,
             replace: bool, seen: int | None = None) -> dict[str, Any]:
    """Trigger a run; `seen`: the DAG's newest run when the form was shown. A form sent again (a double click, a
    refresh of the answer) finds the run its user made since then, triggers nothing and says which (`again`): a
    second run, or one that overrides the first, would stay in the timeline for good."""
    actor = acting(request, "triggering a run")
    with writing(request) as session:
        if seen is not None:
            run_store.lock_timeline(session, dag_id)  # (two sends at once: the second waits, then finds the first)
            again = run_store.created_by_since(session, dag_id, actor, seen)
            if again is not None:
                return {"run_id": str(again), "dag_id": dag_id, "again": True}
        run, existing = operations.trigger_dag(session, dag_id, logical_date, conf, replace=replace, now=now(),
                                               actor=actor)
        return {"run_id": str(run.id), "dag_id": dag_id, "logical_date": run.logical_date.isoformat(),
                "state": run.state, "overridden_run_id": str(existing.id) if existing is not None else None}


def _outcome(run_id: int, done: operations.Outcome) -> dict[str, Any]:
    return {"run_id": str(run_id), "from": done.run_state_before, "state": done.run_state,
            "tasks_set": sorted(done.changed), "stopping": sorted(done.stopping)}


def _cancel_run(request: Request, run_id: int, reason: str | None) -> dict[str, Any]:
    actor = acting(request, "cancelling a run")
    with writing(request) as session:
        return _outcome(run_id, operations.cancel_run(session, run_store.get(session, run_id), now=now(),
                                                      actor=actor, reason=reason))


def _mark_run(request: Request, run_id: int, state: str, reason: str | None,
              shown: str | None = None) -> dict[str, Any]:
    """Mark a run; `shown`: the state the page showed it in. A run that has moved since (it succeeded while the
    operator read the page) is not marked: the mark was decided on what the page showed."""
    actor = acting(request, "marking a run")
    with writing(request) as session:
        run = run_store.get(session, run_id)
        if shown and run.state != shown:
            raise TimelineConflict(f"run {run_id} is {run.state} now, not {shown} as the page showed it; nothing "
                                   "was marked: look at the run again")
        return _outcome(run_id, operations.mark_run(session, run, RunState(state), now=now(), actor=actor,
                                                    reason=reason))


@dataclass(frozen=True)
class TaskMark:
    """A mark of task instances as asked for: `tasks` are task ids or `task[i]` labels."""

    tasks: list[str]
    state: str
    downstream: bool = False
    upstream: bool = False


def _mark_rows(session: Session, run_id: int, mark: TaskMark) -> list[dict[str, str]]:
    """The task instances the mark would set, each with its state now and after (operations.mark_plan: refused as
    the mark itself would be)."""
    run = run_store.get(session, run_id)
    spec = dag_store.spec(session, run.dag_id, run.version_hash)
    _tis, targets = operations.mark_plan(session, run, spec, mark.tasks, TaskState(mark.state),
                                         downstream=mark.downstream, upstream=mark.upstream)
    return sorted(({"task": label(ti.task_id, ti.map_index), "from": ti.state or "none", "to": mark.state}
                   for ti in targets), key=lambda r: r["task"])


def _mark_tasks(request: Request, run_id: int, mark: TaskMark, reason: str | None,
                digest: str | None = None) -> dict[str, Any]:
    """Mark task instances; `digest`: the fingerprint of the rows the user confirmed (the confirm page), when
    they changed since, nothing is marked and the new rows come back (`marked` false) to confirm again."""
    actor = acting(request, "marking tasks")
    with writing(request) as session:
        if digest is not None:
            rows = _mark_rows(session, run_id, mark)
            if forms.plan_digest(rows) != digest:
                return {"run_id": str(run_id), "marked": False, "would_set": rows}
        run = run_store.get(session, run_id)
        spec = dag_store.spec(session, run.dag_id, run.version_hash)
        done = operations.mark_tasks(session, run, spec, mark.tasks, TaskState(mark.state),
                                     downstream=mark.downstream, upstream=mark.upstream, now=now(), actor=actor,
                                     reason=reason)
        return {**_outcome(run_id, done), "marked": True}


def _clear_rows(session: Session, run: Any, tasks: list[str] | None, downstream: bool,
                on_latest_version: bool) -> tuple[list[dict[str, str]], str]:
    """The task instances a clear would give fresh tries (task, state now, what it becomes), and the version
    their tries would run."""
    plan = operations.clear_plan(session, run, tasks, downstream=downstream, on_latest_version=on_latest_version)
    rows = [{"task": label(ti.task_id, ti.map_index), "from": ti.state, "to": TaskState.SCHEDULED.value}
            for ti in plan.would_clear(run_store.task_instances(session, run.id))]
    return rows, plan.latest.version_hash


def _clear(request: Request, run_id: int, tasks: list[str] | None, downstream: bool,
           on_latest_version: bool, digest: str | None = None) -> dict[str, Any]:
    """Clear task instances; `digest`: the fingerprint of the rows the user confirmed (the preview page): when they
    changed since, nothing is cleared and the new rows come back (`cleared` None) to confirm again."""
    actor = acting(request, "clearing tasks")
    with writing(request) as session:
        run = run_store.get(session, run_id)
        if digest is not None:
            rows, version = _clear_rows(session, run, tasks, downstream, on_latest_version)
            if _clear_digest(rows, version) != digest:
                return {"run_id": str(run_id), "cleared": None, "would_clear": rows, "version": version}
        done = operations.clear_tasks(session, run, tasks or None, downstream=downstream,
                                      on_latest_version=on_latest_version, now=now(), actor=actor)
        moved = None if done.moved is None else {"from": done.moved[0], "to": done.moved[1],
                                                 "added": done.moved[2], "removed": done.moved[3]}
        return {"run_id": str(run_id), "cleared": sorted(done.cleared), "state": run.state, "moved": moved,
                "version": done.version, "run_version": run.version_hash}


def _clear_digest(rows: list[dict[str, str]], version: str) -> str:
    """What a clear's confirmation covers: the task instances it re-runs and the version their tries run."""
    return forms.plan_digest({"rows": rows, "version": version})


def _pause(request: Request, dag_id: str, paused: bool, stop_queued: bool) -> dict[str, Any]:
    actor = acting(request, "pausing a DAG" if paused else "unpausing a DAG")
    with writing(request) as session:
        changed = operations.set_paused(session, dag_id, paused, now=now(), actor=actor, stop_queued=stop_queued)
    return {"dag_id": dag_id, "is_paused": paused, "stop_queued": stop_queued, "changed": changed}


Reprocessing = Literal["none", "failed", "completed"]


class BackfillBody(BaseModel):
    """What `ledger backfill DAG --start A --end B [...] --submit` takes."""

    model_config = ConfigDict(extra="forbid")
    dag_id: str
    start: str = Field(description="First logical date (a bare date is read in the DAG's timezone).")
    end: str = Field(description="Last logical date, inclusive.")
    reprocess: Reprocessing = "none"
    backwards: bool = False
    conf: dict[str, Any] | None = None
    max_active_runs: Annotated[int | None, Field(ge=1, le=MAX_ID)] = None
    dry_run: bool = Field(default=False, description="Answer the plan only (`--dry-run`); change nothing.")


def _plan(request: Request, body: BackfillBody) -> tuple[list[PlanItem], Any]:
    identity = identity_of(request)
    with session_of(request) as session:
        spec = dag_store.current_spec(session, body.dag_id)
        req = operations.backfill_request(spec, body.start, body.end, reprocess=body.reprocess,
                                          backwards=body.backwards, conf=body.conf,
                                          max_active_runs=body.max_active_runs, submit=True,
                                          requested_by=identity.name)
        _spec, plan = operations.plan_backfill(session, req, now=now(), stale_after=request.app.state.stale_after)
    return plan, req


def _submit(request: Request, body: BackfillBody, digest: str | None) -> tuple[int | None, list[PlanItem]]:
    """Create the backfill (its runs left to the scheduler). `digest`: the fingerprint of the plan the user saw;
    when the plan changed since, nothing is created and the new plan is returned (id None) to confirm again."""
    actor = acting(request, "creating a backfill")
    plan, req = _plan(request, body)
    if digest is not None and forms.plan_digest(plan_json(plan)) != digest:
        return None, plan
    with writing(request) as session:
        created = operations.submit_backfill(session, req, plan, now=now(), actor=actor,
                                             stale_after=request.app.state.stale_after)
    return created.backfill_id, created.plan


def _cancel_backfill(request: Request, backfill_id: int) -> dict[str, Any]:
    actor = acting(request, "cancelling a backfill")
    with writing(request) as session:
        ended, in_flight = operations.stop_backfill(session, backfill_id, now=now(), actor=actor,
                                                    stale_after=request.app.state.stale_after)
    return {"backfill_id": str(backfill_id), "state": "cancelled", "runs_ended": [str(r) for r in ended],
            "runs_being_stopped": in_flight}


def _resume_backfill(request: Request, backfill_id: int) -> dict[str, Any]:
    actor = acting(request, "resuming a backfill")
    with writing(request) as session:
        operations.resume_backfill(session, backfill_id, now=now(), actor=actor, job_id=None)
    return {"backfill_id": str(backfill_id), "state": "running"}


# --- the write API ------------------------------------------------------------------------------------------

class TriggerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    logical_date: str | None = Field(default=None, description="ISO date or datetime (DAG's timezone when naive); "
                                                        "default now.")
    conf: dict[str, Any] | None = Field(default=None, description="Checked against the DAG's params, as `--conf` is.")
    replace: bool = Field(default=False, description="Override the live run at that date.")


class ReasonBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str | None, Field(min_length=1, max_length=2000)] = None


class MarkBody(ReasonBody):
    state: Literal["success", "failed"]


class MarkTasksBody(ReasonBody):
    tasks: Annotated[list[str], Field(min_length=1, description="Task ids, or `task[i]` for one mapped instance.")]
    state: Literal["success", "failed", "skipped"]
    downstream: bool = Field(default=False, description="Also the tasks downstream of them.")
    upstream: bool = Field(default=False, description="Also the tasks upstream of them.")
    dry_run: bool = Field(default=False, description="Answer what would be set (`would_set`); change nothing.")


class ClearBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tasks: list[str] | None = Field(default=None, description="Task ids; every task when omitted.")
    downstream: bool = False
    on_latest_version: bool = Field(default=False, description="Move the run to the DAG's current version first.")


class PauseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stop_queued: bool = Field(default=False, description="Also keep its queued runs from starting.")


@api.post("/dags/{dag_id}/runs", status_code=201, summary="`ledger trigger DAG`: a manual run")
def trigger_api(request: Request, dag_id: str, body: TriggerBody) -> JSONResponse:
    return JSONResponse(_trigger(request, dag_id, body.logical_date, body.conf, body.replace), status_code=201)


@api.post("/dags/{dag_id}/pause", summary="`ledger dags pause DAG [--stop-queued]`")
def pause_api(request: Request, dag_id: str, body: PauseBody | None = None) -> JSONResponse:
    return JSONResponse(_pause(request, dag_id, True, body.stop_queued if body else False))


@api.post("/dags/{dag_id}/unpause", summary="`ledger dags unpause DAG`")
def unpause_api(request: Request, dag_id: str) -> JSONResponse:
    return JSONResponse(_pause(request, dag_id, False, False))


@api.post("/runs/{run_id}/cancel", summary="`ledger runs cancel RUN`")
def cancel_api(request: Request, run_id: IdInUrl, body: ReasonBody | None = None) -> JSONResponse:
    return JSONResponse(_cancel_run(request, run_id, body.reason if body else None))


@api.post("/runs/{run_id}/mark", summary="`ledger runs mark-success|mark-failed RUN`")
def mark_api(request: Request, run_id: IdInUrl, body: MarkBody) -> JSONResponse:
    return JSONResponse(_mark_run(request, run_id, body.state, body.reason))


@api.post("/runs/{run_id}/tasks/mark", summary="`ledger tasks mark DAG RUN TASK --state S [--downstream] "
          "[--upstream]`")
def mark_tasks_api(request: Request, run_id: IdInUrl, body: MarkTasksBody) -> JSONResponse:
    mark = TaskMark(body.tasks, body.state, body.downstream, body.upstream)
    if body.dry_run:
        acting(request, "marking tasks")
        with session_of(request) as session:
            return JSONResponse({"run_id": str(run_id), "marked": False, "would_set": _mark_rows(session, run_id,
                                                                                                  mark)})
    return JSONResponse(_mark_tasks(request, run_id, mark, body.reason))


@api.post("/runs/{run_id}/clear", summary="`ledger tasks clear RUN [TASK...] [--downstream] "
                                          "[--on-latest-version]`")
def clear_api(request: Request, run_id: IdInUrl, body: ClearBody | None = None) -> JSONResponse:
    body = body or ClearBody()
    done = _clear(request, run_id, body.tasks, body.downstream, body.on_latest_version)
    return JSONResponse({k: done[k] for k in ("run_id", "cleared", "state", "moved")})


@api.post("/backfills", status_code=201, summary="`ledger backfill DAG --start A --end B --submit --yes` "
          "(or its `--dry-run` plan): the runs are left to the scheduler")
def backfill_api(request: Request, body: BackfillBody) -> JSONResponse:
    if body.dry_run:
        plan, _req = _plan(request, body)
        return JSONResponse({"backfill_id": None, "plan": plan_json(plan), "state": "planned"})
    backfill_id, plan = _submit(request, body, None)
    return JSONResponse({"backfill_id": str(backfill_id), "plan": plan_json(plan), "state": "submitted"},
                        status_code=201)


@api.post("/backfills/{backfill_id}/cancel", summary="`ledger backfill cancel ID`")
def cancel_backfill_api(request: Request, backfill_id: IdInUrl) -> JSONResponse:
    return JSONResponse(_cancel_backfill(request, backfill_id))


@api.post("/backfills/{backfill_id}/resume", summary="Hand an interrupted backfill back to the scheduler")
def resume_backfill_api(request: Request, backfill_id: IdInUrl) -> JSONResponse:
    return JSONResponse(_resume_backfill(request, backfill_id))


class PoolBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slots: Annotated[int, Field(ge=0, le=MAX_ID)]
    description: str = ""


@api.post("/pools/{name}", summary="`ledger pools set NAME SLOTS` (admins)")
def set_pool_api(request: Request, name: str, body: PoolBody) -> JSONResponse:
    identity = identity_of(request)
    auth.need(identity, Role.ADMIN, "setting a pool")
    acting(request, "setting a pool")  # (the CSRF check of a browser's cookie)
    if not name.strip():
        raise InvalidInput("a pool needs a name")
    with writing(request) as session:
        operations.set_pool(session, name, body.slots, body.description, now=now(), actor=identity.name)
    return JSONResponse({"name": name, "slots": body.slots})


@api.post("/pools/{name}/delete", summary="`ledger pools delete NAME` (admins)")
def delete_pool_api(request: Request, name: str) -> JSONResponse:
    identity = identity_of(request)
    auth.need(identity, Role.ADMIN, "deleting a pool")
    acting(request, "deleting a pool")
    with writing(request) as session:
        operations.delete_pool(session, name, now=now(), actor=identity.name)
    return JSONResponse({"name": name, "deleted": True})


# --- the pages: sign-in, and the forms of each action ---------------------------------------------------------

async def form_of(request: Request) -> dict[str, str]:
    """A posted form (urlencoded) whose `csrf` field matches the request's CSRF cookie; else 403."""
    fields = dict(parse_qsl((await request.body()).decode(errors="replace"), keep_blank_values=True))
    if not auth.csrf_matches(request.cookies.get(auth.CSRF_COOKIE), fields.get(auth.CSRF_FIELD)):
        raise auth.Forbidden("the form came without its CSRF token (or an old one): reload the page and send it "
                             "again")
    return fields


Form = Annotated[dict[str, str], Depends(form_of)]


def show(name: str, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(name, **context))


def back_to(url: str, said: str | None = None) -> RedirectResponse:
    """Post/redirect/get; `said`: what the action did, which the page it ends on says (a cookie read once)."""
    response = RedirectResponse(url, status_code=303)
    if said:
        response.set_cookie(forms.SAID_COOKIE, forms.said_cookie(said), max_age=120, path="/", httponly=True,
                            samesite="strict")
    return response


def _tasks_said(tasks: list[str]) -> str:
    shown = ", ".join(tasks[:10]) + (f" and {len(tasks) - 10} more" if len(tasks) > 10 else "")
    return f"{len(tasks)} task instance(s){' (' + shown + ')' if tasks else ''}"


@pages.get("/login", response_class=HTMLResponse)
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return show("login.html", next=forms.local_target(next), problem=None)


@pages.post("/login")
def login(request: Request, form: Form) -> Response:
    target = forms.local_target(form.get("next"))
    g = guard_of(request)
    token = form.get("token", "").strip()
    if token:
        with session_of(request) as session:
            known = auth.identify(session, g.signer, bearer=token, cookie=None, token_cookie=None,
                                  shared_token=g.token)
        if known is None:
            return HTMLResponse(render("login.html", next=target, problem="that token is not known"), 401)
        response = back_to(target)
        g.set_cookie(response, auth.TOKEN_COOKIE, token, max_age=auth.SESSION_SECONDS)
        return response
    with session_of(request) as session:
        user = user_rules.sign_in(session, form.get("username", ""), form.get("password", ""))
        cookie = None if user is None else g.signer.cookie(user.id, user.password_hash)
    if cookie is None:
        return HTMLResponse(render("login.html", next=target, problem="wrong user name or password"), 401)
    response = back_to(target)
    g.set_cookie(response, auth.SESSION_COOKIE, cookie, max_age=auth.SESSION_SECONDS)
    g.set_cookie(response, auth.CSRF_COOKIE, auth.new_csrf())  # a fresh CSRF value for the signed-in session
    return response


@pages.post("/logout")
def logout(request: Request, form: Form) -> Response:
    """Signing out ends the session on the server too (decision 0352): a copy of its cookie signs nobody in."""
    cookie = request.cookies.get(auth.SESSION_COOKIE)
    if cookie is not None:
        with writing(request) as session:
            if guard_of(request).signer.user_of(session, cookie) is not None:
                user_store.end_session(session, auth.cookie_digest(cookie),
                                       expires_at=pendulum.from_timestamp(auth.expires_at(cookie)), now=now())
    response = back_to("/login")
    for name in (auth.SESSION_COOKIE, auth.TOKEN_COOKIE):
        response.delete_cookie(name, path="/")
    return response


def _operator_page(request: Request, what: str) -> None:
    auth.need(identity_of(request), Role.OPERATOR, what)


def _dag_actions_page(request: Request, dag_id: str, *, kept: dict[str, str] | None = None,
                      problem: str | None = None, problem_in: str | None = None) -> HTMLResponse:
    """The DAG's actions; a refused trigger or backfill plan says why above its form, the values kept."""
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id)
        spec = dag_store.current_spec(session, dag_id)
        seen = run_store.newest_run_id(session, dag_id)
    return HTMLResponse(render("dag_actions.html", dag=documents.dag_json(dag), fields=forms.param_fields(spec.params),
                               timezone=spec.timezone, kept=kept, problem=problem, problem_in=problem_in, seen=seen),
                        400 if problem else 200)


@pages.get("/dags/{dag_id}/actions", response_class=HTMLResponse)
def dag_actions(request: Request, dag_id: str) -> HTMLResponse:
    _operator_page(request, "acting on a DAG")
    return _dag_actions_page(request, dag_id)


@pages.post("/dags/{dag_id}/trigger")
def trigger_form(request: Request, dag_id: str, form: Form) -> Response:
    _operator_page(request, "triggering a run")
    with session_of(request) as session:
        params = dag_store.current_spec(session, dag_id).params
    try:
        done = _trigger(request, dag_id, form.get("logical_date", "").strip() or None,
                        forms.conf_from_form(params, form), form.get("replace") == "on", _seen(form))
    except (InvalidInput, TimelineConflict) as e:  # said above the form, what was typed kept
        return _dag_actions_page(request, dag_id, kept=form, problem=str(e), problem_in="trigger")
    if done.get("again"):
        return back_to(f"/runs/{done['run_id']}", f"run {done['run_id']} of {dag_id} was triggered from this form "
                                                  "already: nothing more was triggered")
    replaced = f", replacing run {done['overridden_run_id']}" if done["overridden_run_id"] else ""
    return back_to(f"/runs/{done['run_id']}", f"triggered run {done['run_id']} of {dag_id} at "
                                              f"{done['logical_date']}{replaced}; it is {done['state']}")


def _seen(form: dict[str, str]) -> int | None:
    """The newest run the form was shown against (None: a form without it, as an older page sends)."""
    seen = form.get("seen", "")
    return int(seen) if seen.isdigit() else None


@pages.post("/dags/{dag_id}/pause")
def pause_form(request: Request, dag_id: str, form: Form) -> Response:
    done = _pause(request, dag_id, True, form.get("stop_queued") == "on")
    return back_to(_paused_back(dag_id, form), f"paused {dag_id}" if done["changed"] else f"{dag_id} was paused")


@pages.post("/dags/{dag_id}/unpause")
def unpause_form(request: Request, dag_id: str, form: Form) -> Response:
    done = _pause(request, dag_id, False, False)
    return back_to(_paused_back(dag_id, form),
                   f"unpaused {dag_id}" if done["changed"] else f"{dag_id} was not paused")


def _paused_back(dag_id: str, form: dict[str, str]) -> str:
    """Where a pause or unpause ends: the DAG list its toggle was clicked on (`back` = /), else the DAG's page."""
    return "/" if form.get("back") == "/" else f"/dags/{dag_id}"


def _backfill_body(dag_id: str, form: dict[str, str]) -> BackfillBody:
    conf = forms.conf_from_form({}, form)
    raw_max = form.get("max_active_runs", "").strip()
    if raw_max and not (raw_max.isdigit() and 1 <= int(raw_max) <= MAX_ID):
        raise InvalidInput(f"--max-active-runs must be a whole number from 1, not {raw_max!r}")
    reprocess = form.get("reprocess", "none")
    if reprocess not in ("none", "failed", "completed"):
        raise InvalidInput(f"--reprocess must be none, failed or completed, not {reprocess!r}")
    return BackfillBody(dag_id=dag_id, start=form.get("start", "").strip(), end=form.get("end", "").strip(),
                        reprocess=cast(Reprocessing, reprocess),  # checked above
                        backwards=form.get("backwards") == "on", conf=conf,
                        max_active_runs=int(raw_max) if raw_max else None)


def _plan_page(request: Request, dag_id: str, form: dict[str, str], plan: list[PlanItem],
               changed: bool) -> HTMLResponse:
    """The plan to confirm, its dates in the DAG's time zone (as the viewer chose), as the dates were typed."""
    with session_of(request) as session:
        tz = dag_store.get(session, dag_id, active_only=False).timezone
    rows = plan_json(plan)
    kept = {k: v for k, v in form.items() if k in ("start", "end", "reprocess", "backwards", "conf",
                                                  "max_active_runs")}
    counts = {a: sum(1 for r in rows if r["action"] == a) for a in ("new", "override", "skip")}
    todo = any(r["action"] != "skip" or r["adopts_backfill"] is not None for r in rows)
    return show("backfill_plan.html", dag_id=dag_id, rows=rows, kept=kept, digest=forms.plan_digest(rows),
                 counts=counts, todo=todo, changed=changed, tz=tz)


@pages.post("/dags/{dag_id}/backfill/plan", response_class=HTMLResponse)
def backfill_plan_form(request: Request, dag_id: str, form: Form) -> HTMLResponse:
    _operator_page(request, "creating a backfill")
    try:
        plan, _req = _plan(request, _backfill_body(dag_id, form))
    except InvalidInput as e:  # said above the form, what was typed kept
        return _dag_actions_page(request, dag_id, kept=form, problem=str(e), problem_in="backfill")
    return _plan_page(request, dag_id, form, plan, changed=False)


@pages.post("/dags/{dag_id}/backfill")
def backfill_form(request: Request, dag_id: str, form: Form) -> Response:
    backfill_id, plan = _submit(request, _backfill_body(dag_id, form), form.get("digest", ""))
    if backfill_id is None:  # the ledger changed since the plan was shown: show the new one
        return _plan_page(request, dag_id, form, plan, changed=True)
    return back_to(f"/backfills/{backfill_id}", f"created backfill {backfill_id} of {dag_id}: "
                                                f"{sum(1 for p in plan if p.action.value != 'skip')} run(s) to run")


@pages.get("/runs/{run_id}/actions", response_class=HTMLResponse)
def run_actions(request: Request, run_id: IdInUrl) -> HTMLResponse:
    _operator_page(request, "acting on a run")
    with session_of(request) as session:
        doc = documents.run_document(session, run_id)
    return show("run_actions.html", run=doc, tasks=[t["task_id"] for t in doc["graph"]["tasks"]],
                failed={ti["task_id"] for ti in doc["task_instances"] if ti["state"] in FAILED_STATES})


def _reason(form: dict[str, str]) -> str | None:
    return " ".join(form.get("reason", "").split()) or None


@pages.post("/runs/{run_id}/cancel")
def cancel_form(request: Request, run_id: IdInUrl, form: Form) -> Response:
    done = _cancel_run(request, run_id, _reason(form))
    return back_to(f"/runs/{run_id}", f"cancelled run {run_id}: stopping {_tasks_said(done['stopping'])}, "
                                      f"skipped {_tasks_said(done['tasks_set'])}; it is {done['state']}")


@pages.post("/runs/{run_id}/mark")
def mark_form(request: Request, run_id: IdInUrl, form: Form) -> Response:
    state = form.get("state", "")
    if state not in ("success", "failed"):
        raise InvalidInput(f"a run can be marked success or failed, not {state!r}")
    done = _mark_run(request, run_id, state, _reason(form), form.get("from") or None)
    return back_to(f"/runs/{run_id}", f"marked run {run_id} {state} ({_tasks_said(done['tasks_set'])} set "
                                      f"{state}); it is {done['state']}")


FAILED_STATES = (TaskState.FAILED.value, TaskState.UPSTREAM_FAILED.value)


def _clear_page(request: Request, run_id: int, tasks: list[str], downstream: bool, on_latest_version: bool, *,
                rows: list[dict[str, str]] | None = None, version: str | None = None, changed: bool = False,
                problem: str | None = None, back: str | None = None) -> HTMLResponse:
    """The clear's choice (tasks, downstream, version) and the task instances it would re-run, to confirm (with the
    version their tries would run); a problem with the choice is said on the page, the choice kept."""
    with session_of(request) as session:
        doc = documents.run_document(session, run_id)
        if tasks and rows is None and problem is None:
            try:
                rows, version = _clear_rows(session, run_store.get(session, run_id), tasks, downstream,
                                            on_latest_version)
            except LedgerError as e:
                problem = str(e)
    status = 400 if problem and not changed else 200
    return HTMLResponse(render("clear_tasks.html", run=doc, all_tasks=[t["task_id"] for t in doc["graph"]["tasks"]],
                               chosen=set(tasks), downstream=downstream, on_latest_version=on_latest_version,
                               rows=rows, version=version, changed=changed, problem=problem,
                               digest=_clear_digest(rows, version or "") if rows is not None else None, back=back),
                        status)


@pages.get("/runs/{run_id}/clear", response_class=HTMLResponse)
def clear_task_page(request: Request, run_id: IdInUrl, task: Annotated[list[str] | None, Query()] = None,
                    downstream: bool = False, on_latest_version: bool = False, back: str | None = None) -> HTMLResponse:
    """Airflow's "Clear" with its preview: the tasks ticked (by default the run's failed and upstream_failed
    ones), then the task instances the clear would give fresh tries, to confirm; `back`: the grid page it came
    from, where the confirmed clear ends."""
    _operator_page(request, "clearing task instances")
    if not task:
        with session_of(request) as session:
            task = sorted({ti.task_id for ti in run_store.task_instances(session, run_id)
                           if ti.state in FAILED_STATES})
    return _clear_page(request, run_id, task, downstream, on_latest_version, back=grid_back(back))


def grid_back(raw: str | None) -> str | None:
    """The grid page an action was started from (its detail panel), where the action ends: a grid path of this
    server only, else None (the action ends on its run's page)."""
    if not raw:
        return None
    target = forms.local_target(raw)
    return target if target.startswith("/dags/") and target.split("?")[0].endswith("/grid") else None


@pages.post("/runs/{run_id}/clear")
def clear_form(request: Request, run_id: IdInUrl, form: Form) -> Response:
    _operator_page(request, "clearing task instances")
    tasks = [k[len("task."):] for k, v in form.items() if k.startswith("task.") and v == "on"]
    downstream, latest = form.get("downstream") == "on", form.get("on_latest_version") == "on"
    back = grid_back(form.get("back"))
    if not tasks:
        return _clear_page(request, run_id, [], downstream, latest, problem="tick the tasks to clear", back=back)
    try:
        done = _clear(request, run_id, tasks, downstream, latest, form.get("digest", ""))
    except (InvalidInput, TimelineConflict) as e:  # said on the page, the choice kept
        return _clear_page(request, run_id, tasks, downstream, latest, problem=str(e), back=back)
    if done["cleared"] is None:  # the run changed since the list was shown: show the new one
        return _clear_page(request, run_id, tasks, downstream, latest, rows=done["would_clear"],
                           version=done["version"], changed=True, back=back)
    stays = "" if done["version"] == done["run_version"] else \
        f" on version {done['version'][:12]} (the run stays on {done['run_version'][:12]})"
    moved = f"; the run moved to version {done['moved']['to'][:12]}" if done["moved"] else ""
    return back_to(back or f"/runs/{run_id}", f"cleared {_tasks_said(done['cleared'])} of run {run_id}{stays}{moved}; "
                                      f"it is {done['state']}")


def _mark_asked(task: str, state: str | None, downstream: bool, upstream: bool) -> TaskMark | None:
    if state in (None, ""):
        return None
    if state not in ("success", "failed"):
        raise InvalidInput(f"a task instance is marked success or failed here, not {state!r}")
    return TaskMark([task], state, downstream, upstream)


def _mark_page(request: Request, run_id: int, task: str, mark: TaskMark | None, *,
               rows: list[dict[str, str]] | None = None, changed: bool = False,
               back: str | None = None) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, run_id)
        if mark is not None and rows is None:
            rows = _mark_rows(session, run_id, mark)
    return show("mark_task.html", run=doc, task=task, mark=mark, rows=rows,
                 digest=forms.plan_digest(rows) if rows is not None else None, changed=changed, back=back)


@pages.get("/runs/{run_id}/tasks/{task}/mark", response_class=HTMLResponse)
def mark_task_page(request: Request, run_id: IdInUrl, task: str, state: str | None = None,
                   downstream: bool = False, upstream: bool = False, back: str | None = None) -> HTMLResponse:
    """Airflow's "Mark success / failed" of a task instance: the choice (state, downstream, upstream), then the
    task instances it would set, to confirm; `back`: the grid page it came from, where the confirmed mark ends."""
    _operator_page(request, "marking a task instance")
    return _mark_page(request, run_id, task, _mark_asked(task, state, downstream, upstream), back=grid_back(back))


@pages.post("/runs/{run_id}/tasks/{task}/mark")
def mark_task_form(request: Request, run_id: IdInUrl, task: str, form: Form) -> Response:
    mark = _mark_asked(task, form.get("state", ""), form.get("downstream") == "on", form.get("upstream") == "on")
    if mark is None:
        raise InvalidInput("choose the state to mark: success or failed")
    done = _mark_tasks(request, run_id, mark, _reason(form), form.get("digest", ""))
    back = grid_back(form.get("back"))
    if not done["marked"]:  # the run changed since the list was shown: show the new one
        return _mark_page(request, run_id, task, mark, rows=done["would_set"], changed=True, back=back)
    return back_to(back or f"/runs/{run_id}", f"marked {_tasks_said(done['tasks_set'])} of run {run_id} {mark.state}; "
                                      f"the run is {done['state']}")


@pages.get("/backfills/{backfill_id}/actions", response_class=HTMLResponse)
def backfill_actions(request: Request, backfill_id: IdInUrl) -> HTMLResponse:
    """Cancel (with what it does to each date) and resume, each offered only where the service would do it
    (ledger.core.backfill_state: CANCELLABLE, resumable by the scheduler)."""
    _operator_page(request, "acting on a backfill")
    with session_of(request) as session:
        row = backfill_store.get(session, backfill_id)
        b = {"backfill_id": str(row.id), "dag_id": row.dag_id, "state": row.state,
             "cancellable": row.state in CANCELLABLE, "resumable": resumable(row.state, by_job=False)}
        fates = [{"logical_date": f.logical_date, "run_id": str(f.run_id), "says": f.says,
                  "restores": None if f.restores is None else str(f.restores)}
                 for f in backfill_store.cancel_preview(session, backfill_id)]
        tz = dag_store.get(session, row.dag_id, active_only=False).timezone
    return show("backfill_actions.html", b=b, fates=fates, tz=tz)


@pages.post("/backfills/{backfill_id}/cancel")
def cancel_backfill_form(request: Request, backfill_id: IdInUrl, form: Form) -> Response:
    done = _cancel_backfill(request, backfill_id)
    return back_to(f"/backfills/{backfill_id}", f"cancelled backfill {backfill_id}: {len(done['runs_ended'])} "
                                                f"run(s) ended, {done['runs_being_stopped']} being stopped")


@pages.post("/backfills/{backfill_id}/resume")
def resume_backfill_form(request: Request, backfill_id: IdInUrl, form: Form) -> Response:
    _resume_backfill(request, backfill_id)
    return back_to(f"/backfills/{backfill_id}", f"resumed backfill {backfill_id}: a scheduler runs its runs")
