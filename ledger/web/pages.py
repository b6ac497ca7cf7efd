"""The HTML pages, rendered on the server from the same documents as the API.

A request with the header `X-Ledger-Live: 1` (sent by static/live.js every 2 s on the timeline and
backfill pages) gets only the part of the page that changes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from ledger import documents
from ledger.errors import InvalidInput, LedgerError, NotFound
from ledger.logs import log_path
from ledger.mapping import split_label
from ledger.store import dags as dag_store
from ledger.store import events as event_store
from ledger.store import lineage as lineage_store
from ledger.store import signals as signal_store
from ledger.store import web as web_store
from ledger.web import views
from ledger.web.reading import MAX_ID, IdInUrl, id_in_url, now, session_of
from ledger.web.render import render

router = APIRouter(include_in_schema=False)
PAGE = 100


def _live(request: Request) -> bool:
    """A request of static/live.js for the part of the page that changes."""
    return request.headers.get("x-ledger-live") == "1"


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    fragment = context.pop("fragment", None)
    if _live(request) and fragment:
        return HTMLResponse(render(fragment, **context))
    return HTMLResponse(render(name, fragment=fragment, **context))


@router.get("/", response_class=HTMLResponse)
def dags(request: Request) -> HTMLResponse:
    rows = []
    with session_of(request) as session:
        for d in dag_store.listing(session):
            row = documents.dag_json(d)
            row["latest"] = web_store.latest_states(session, d.dag_id)
            try:
                following = documents.next_runs_document(session, d.dag_id, now=now(), n=1)
            except LedgerError:
                following = []
            row["next_run"] = following[0]["logical_date"] if following else None
            rows.append(row)
        errors = len(dag_store.import_errors(session))
    return _page(request, "dags.html", dags=rows, errors=errors)


@router.get("/dags/{dag_id}", response_class=HTMLResponse)
def timeline(request: Request, dag_id: str, start: str | None = None, end: str | None = None,
             cursor: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
             limit: Annotated[int, Query(ge=1, le=1000)] = PAGE) -> HTMLResponse:
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        lo, hi = documents.timeline_range(dag, start, end)
        rows = web_store.timeline_page(session, dag_id, start=lo, end=hi, cursor=cursor, limit=limit,
                                       newest_first=True)
        # the versions with their run and try counts (a GROUP BY over the DAG's runs): not for the live part
        versions = [] if _live(request) else documents.versions_document(session, dag)
    runs = documents.timeline_json(rows)
    page, older = views.cut_page(runs, limit)
    groups = views.group_timeline(page, older)
    marks, changes, spans = views.strip(groups)
    following = str(request.url.include_query_params(cursor=page[-1]["run_id"])) if older else None
    first = str(request.url.remove_query_params("cursor")) if cursor is not None else None
    return _page(request, "timeline.html", fragment="timeline_live.html", dag=documents.dag_json(dag),
                 groups=groups, marks=marks, changes=changes, spans=spans, versions=versions,
                 backfills=views.backfills_of(groups), start=start or "", end=end or "", following=following,
                 first=first)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: str) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        replaced = [documents.run_json(r) for r in web_store.replaced_by_run(session, int(doc["run_id"]))]
    return _page(request, "run.html", run=doc, replaced=replaced, layers=views.graph_layers(doc["graph"]["tasks"]))


@router.get("/runs/{run_id}/tasks/{task_id}/tries/{try_number}/log", response_class=HTMLResponse)
def log(request: Request, run_id: str, task_id: str, try_number: int) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
    # task_id: the task's id, or `task[i]` for instance i of a mapped task (its label)
    tries = {t["try_number"]: t for ti in doc["task_instances"] if ti["label"] == task_id for t in ti["tries"]}
    if try_number not in tries:
        raise NotFound(f"run {doc['run_id']} has no try {try_number} of task {task_id!r}")
    name, index = split_label(task_id)
    path = log_path(request.app.state.settings.logs_folder, doc["dag_id"], int(doc["run_id"]), name, try_number, index)
    text = path.read_text(errors="replace") if path.is_file() else None
    return _page(request, "log.html", run=doc, task_id=task_id, the_try=tries[try_number], text=text, path=str(path))


@router.get("/dags/{dag_id}/versions/{version}", response_class=HTMLResponse)
def version(request: Request, dag_id: str, version: str, file: str | None = None) -> HTMLResponse:
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        row = dag_store.version(session, dag_id, version)
        try:
            doc = documents.version_document(session, dag, row.version_hash, source=True, file=file)
        except InvalidInput:
            if file:
                raise
            doc = documents.version_document(session, dag, row.version_hash)  # no stored code: its structure
        before = web_store.previous_version(session, row)
        diff = documents.version_diff(session, dag, before, row) if before is not None else None
    return _page(request, "version.html", dag_id=dag_id, doc=doc, before=before.version_hash if before else None,
                 diff=views.diff_lines(diff), layers=views.graph_layers(documents.graph_tasks(doc["structure"])))


@router.get("/lineage", response_class=HTMLResponse)
def datasets(request: Request) -> HTMLResponse:
    with session_of(request) as session:
        names = lineage_store.datasets(session)
    return _page(request, "datasets.html", datasets=names)


@router.get("/lineage/{dataset:path}", response_class=HTMLResponse)
def lineage(request: Request, dataset: str, partition: str | None = None) -> HTMLResponse:
    with session_of(request) as session:
        parts = documents.lineage_document(session, dataset, partition or None)
    return _page(request, "lineage.html", dataset=dataset, partition=partition or "", parts=parts)


@router.get("/backfills", response_class=HTMLResponse)
def backfills(request: Request) -> HTMLResponse:
    with session_of(request) as session:
        rows = documents.backfills_document(session)
    return _page(request, "backfills.html", fragment="backfills_live.html", backfills=rows)


@router.get("/backfills/{backfill_id}", response_class=HTMLResponse)
def backfill(request: Request, backfill_id: IdInUrl) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.backfill_document(session, backfill_id)
    return _page(request, "backfill.html", fragment="backfill_live.html", b=doc)


@router.get("/events", response_class=HTMLResponse)
def events(request: Request, dag: str | None = None, run: str | None = None, kind: str | None = None,
           limit: Annotated[int, Query(ge=1, le=10_000)] = 200) -> HTMLResponse:
    run_id = id_in_url(run.strip()) if run and run.strip().isdigit() else None
    with session_of(request) as session:
        if dag:
            dag_store.get(session, dag, active_only=False)
        rows = event_store.listing_json(session, dag_id=dag or None, run_id=run_id,
                                        kinds=[kind] if kind else None, limit=limit)
    return _page(request, "events.html", events=list(reversed(rows)), dag=dag or "", run=run or "",
                 kind=kind or "", limit=limit)


@router.get("/signals", response_class=HTMLResponse)
def signals(request: Request, key: str | None = None, since: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
            limit: Annotated[int, Query(ge=1, le=10_000)] = 200) -> HTMLResponse:
    key = key or None
    with session_of(request) as session:
        found = [s.as_json() for s in signal_store.listing(
            session, key, since_version=since if key is not None else 0, since_id=since if key is None else 0,
            limit=limit)]
    following = None
    if len(found) == limit:
        last = found[-1]["version"] if key is not None else found[-1]["id"]
        following = str(request.url.include_query_params(since=last))
    return _page(request, "signals.html", signals=found, key=key or "", following=following)
