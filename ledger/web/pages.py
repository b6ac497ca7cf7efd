"""The HTML pages, rendered on the server from the same documents as the API.

A request with the header `X-Ledger-Live: 1` (sent by static/live.js every 2 s on the timeline and
backfill pages) gets only the part of the page that changes."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Annotated, Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.datastructures import URL

from ledger.core.dates import MAX_YEAR, MIN_YEAR
from ledger.core.errors import ConfigError, InvalidInput, LedgerError, NotFound
from ledger.core.mapping import split_label
from ledger.core.states import RunState, RunType
from ledger.services import dataset_docs, documents
from ledger.store import backfills as backfill_store
from ledger.store import dags as dag_store
from ledger.store import dataset_graph as graph_store
from ledger.store import events as event_store
from ledger.store import runs as run_store
from ledger.store import signals as signal_store
from ledger.store import web as web_store
from ledger.web import dataset_graph, forms, logview, views
from ledger.web.reading import MAX_ID, IdInUrl, id_in_url, now, session_of
from ledger.web.render import render, shown_zone

router = APIRouter(include_in_schema=False)
PAGE = 100
GRID_RUNS = 25  # runs on the grid's first screen
DURATION_RUNS = 50  # runs on the task duration chart's first screen
BACKFILL_RUNS = 200  # runs per page of a backfill
LINEAGE_PARTITIONS = 50  # partitions whose writes a dataset's page shows (the newest written)
FAILING = ("failed", "up_for_retry")  # the task instances whose failure reason the run page shows
SIGNALS_SCANNED = 20_000  # signal ids a signals page looks through for the ones it shows (task state ones hidden)


def _live(request: Request) -> bool:
    """A request of static/live.js for the part of the page that changes."""
    return request.headers.get("x-ledger-live") == "1"


def _relative(url: URL) -> str:
    """A link to `url` on this server as its path and query only: the browser keeps the scheme and host it used,
    which behind a proxy that ends TLS are not the ones the server sees."""
    return url.path + (f"?{url.query}" if url.query else "")


def _page(request: Request, name: str, **context: Any) -> HTMLResponse:
    fragment = context.pop("fragment", None)
    if _live(request) and fragment:
        return HTMLResponse(render(fragment, **context))
    said = forms.said_text(request.cookies.get(forms.SAID_COOKIE))  # what the action that led here did
    response = HTMLResponse(render(name, fragment=fragment, said=said, **context))
    if said is not None:
        response.delete_cookie(forms.SAID_COOKIE, path="/")
    return response


@router.get("/", response_class=HTMLResponse)
def dags(request: Request, q: str = "") -> HTMLResponse:
    """The DAGs, with their runs' counts by state and their last run; `q` keeps the DAGs whose id contains it or
    that have it as a tag."""
    rows = []
    wanted = q.strip().lower()
    with session_of(request) as session:
        counts = web_store.run_state_counts(session)
        for d in dag_store.listing(session):
            tags = json.loads(dag_store.version(session, d.dag_id, d.current_version).structure).get("tags", []) \
                if d.current_version else []
            if wanted and wanted not in d.dag_id.lower() and wanted not in (t.lower() for t in tags):
                continue
            row = documents.dag_json(d)
            row["tags"] = tags
            row["counts"] = counts.get(d.dag_id, {})
            last = web_store.last_run(session, d.dag_id)
            row["last"] = documents.run_json(last) if last is not None else None
            row["latest"] = web_store.latest_states(session, d.dag_id)
            try:
                following = documents.next_runs_document(session, d.dag_id, now=now(), n=1)
            except LedgerError:
                following = []
            row["next_run"] = following[0]["logical_date"] if following else None
            rows.append(row)
        errors = len(dag_store.import_errors(session))
    totals: dict[str, int] = {}
    for by_state in counts.values():
        for state, n in by_state.items():
            totals[state] = totals.get(state, 0) + n
    return _page(request, "dags.html", fragment="dags_live.html", dags=rows, errors=errors, q=q, totals=totals)


@router.get("/import-errors", response_class=HTMLResponse)
def import_errors(request: Request) -> HTMLResponse:
    with session_of(request) as session:
        rows = [documents.import_error_json(e) for e in dag_store.import_errors(session)]
    return _page(request, "import_errors.html", errors=rows)


@router.get("/dags/{dag_id}/grid", response_class=HTMLResponse)
def grid(request: Request, dag_id: str, before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
         limit: Annotated[int, Query(ge=1, le=200)] = GRID_RUNS, failed: bool = False,
         date: str | None = None, run: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
         task: str | None = None, fold: Annotated[list[str] | None, Query()] = None) -> HTMLResponse:
    """Tasks x runs: the latest `limit` live runs (older than run `before`), oldest on the left; `failed`: only
    failed runs; `date`: the runs up to that date (the DAG's time zone; a bare date includes that day). A cell
    links the same page with `run` and `task`: the detail panel of that task instance (its tries, their states,
    durations, versions and logs, its failure reason, and an operator's clear and mark). `fold`: task groups
    shown as one row."""
    if (run is None) != (task is None or task == ""):
        raise InvalidInput("the detail panel needs both a run and a task")
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        until = documents.timeline_range(dag, None, date)[1] if date else None
        runs = web_store.grid_runs(session, dag_id, limit=limit, before=before,
                                   states=[RunState.FAILED.value] if failed else None, until=until)
        page = runs[:limit]
        cells = web_store.grid_cells(session, [r.id for r in page])
        replaced = web_store.replaced_among(session, page)
        structure = json.loads(dag_store.version(session, dag_id, dag.current_version or "").structure)
        detail = _grid_detail(session, dag_id, run, task) if run is not None and task else None
    tasks = structure["tasks"]
    order = [t["task_id"] for layer in views.graph_layers(tasks) for t in layer]
    folded = frozenset(fold or [])
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("run", "task", "fold")]

    def url(params: list[tuple[str, str]], anchor: str = "") -> str:
        return f"/dags/{quote(dag_id, safe='')}/grid" + (f"?{urlencode(params)}" if params else "") + anchor

    folds = [("fold", g) for g in sorted(folded)]
    picked = [("run", str(run)), ("task", task)] if run is not None and task else []
    columns, rows = views.grid(
        page, cells, replaced, order, groups={t["task_id"]: t["group"] for t in tasks if t.get("group")},
        folded=folded, picked=(run, task) if run is not None and task else None,
        detail=lambda r, t: url([*kept, *folds, ("run", str(r)), ("task", t)], "#detail"),
        toggle=lambda g: url([*kept, *[f for f in folds if f[1] != g], *([] if g in folded else [("fold", g)]),
                              *picked]))
    older = _relative(request.url.include_query_params(before=page[-1].id)) if len(runs) > limit else None
    newest = _relative(request.url.remove_query_params("before")) if before is not None else None
    closed = url([*kept, *folds]) if detail is not None else None
    return _page(request, "grid.html", fragment="grid_live.html", dag=documents.dag_json(dag), columns=columns,
                 rows=rows, older=older, newest=newest, failed=failed, date=date or "", detail=detail,
                 closed=closed, back=url([*kept, *folds, *picked]))


def _grid_detail(session: Any, dag_id: str, run_id: int, task_id: str) -> dict[str, Any]:
    """The grid's detail panel: a task instance of a run of the DAG (every instance of a mapped task)."""
    the_run = run_store.get(session, run_id)
    if the_run.dag_id != dag_id:
        raise InvalidInput(f"run {run_id} is not a run of DAG {dag_id!r}")
    rows = web_store.task_instance_tries(session, run_id, task_id)
    if not rows:
        raise InvalidInput(f"run {run_id} has no task {task_id!r}")
    failing = [ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]" for ti, _t in rows
               if ti.state in FAILING]
    reasons = documents.failure_reasons(session, run_id, failing)
    return {"run": documents.run_json(the_run), "task_id": task_id,
            "instances": views.instances(run_id, the_run.version_hash, rows, reasons)}


@router.get("/dags/{dag_id}/calendar", response_class=HTMLResponse)
def calendar(request: Request, dag_id: str, year: int | None = None) -> HTMLResponse:
    """A year of the DAG's live runs by day (in the zone the page shows: the DAG's unless the viewer chose another),
    each day in its runs' most urgent state; by default the year of its last run. A year is one a typed date may
    name (MIN_YEAR to MAX_YEAR): the year's first instant in a zone east of UTC is in the year before."""
    if year is not None and not MIN_YEAR <= year <= MAX_YEAR:
        raise InvalidInput(f"year {year} is out of range; give a year between {MIN_YEAR} and {MAX_YEAR}")
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        zone = ZoneInfo(shown_zone(dag.timezone))
        if year is None:
            last = web_store.last_run(session, dag_id)
            year = (last.logical_date if last is not None else now()).astimezone(zone).year
        rows = web_store.live_runs_between(session, dag_id, datetime(year, 1, 1, tzinfo=zone),
                                           datetime(year + 1, 1, 1, tzinfo=zone))
    days: dict[date, list[tuple[str, int]]] = {}
    for at, state, run_id in rows:
        days.setdefault(at.astimezone(zone).date(), []).append((state, run_id))
    return _page(request, "calendar.html", dag=documents.dag_json(dag), year=year, zone=zone.key,
                 months=views.calendar(year, days, dag_id), runs=len(rows), states=views.DAY_ORDER)


@router.get("/dags/{dag_id}/durations", response_class=HTMLResponse)
def task_durations(request: Request, dag_id: str, before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                   limit: Annotated[int, Query(ge=1, le=200)] = DURATION_RUNS) -> HTMLResponse:
    """How long each task took over the latest `limit` live runs (older than run `before`): a bar per run, the
    latest try of each task instance."""
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        runs = web_store.grid_runs(session, dag_id, limit=limit, before=before)
        page = runs[:limit]
        spans = web_store.latest_try_spans(session, [r.id for r in page])
        structure = json.loads(dag_store.version(session, dag_id, dag.current_version or "").structure)
    order = [t["task_id"] for layer in views.graph_layers(structure["tasks"]) for t in layer]
    series, width = views.durations(page, spans, order, now())
    older = _relative(request.url.include_query_params(before=page[-1].id)) if len(runs) > limit else None
    newest = _relative(request.url.remove_query_params("before")) if before is not None else None
    return _page(request, "durations.html", dag=documents.dag_json(dag), series=series, width=width,
                 height=views.CHART_HEIGHT, runs=len(page), older=older, newest=newest)


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
        consumer = dataset_docs.timeline_marks(session, dag_id)
        spanning = web_store.versions_of_tries(session, [row[0] for row in rows[:limit]])
    runs = dataset_docs.with_marks(documents.timeline_json(rows), consumer)
    for r in runs:
        r["try_versions"] = spanning.get(int(r["run_id"]), 1)
    page, older = views.cut_page(runs, limit)
    groups = views.group_timeline(page, older)
    marks, changes, spans = views.strip(groups)
    following = _relative(request.url.include_query_params(cursor=page[-1]["run_id"])) if older else None
    first = _relative(request.url.remove_query_params("cursor")) if cursor is not None else None
    return _page(request, "timeline.html", fragment="timeline_live.html", dag=documents.dag_json(dag),
                 groups=groups, marks=marks, changes=changes, spans=spans, versions=versions,
                 backfills=views.backfills_of(groups), start=start or "", end=end or "", following=following,
                 first=first, consumer=consumer is not None)


@router.get("/runs", response_class=HTMLResponse)
def runs(request: Request, state: Annotated[list[str] | None, Query()] = None,
         type: Annotated[list[str] | None, Query()] = None, dag: str | None = None, start: str | None = None,
         end: str | None = None, before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
         limit: Annotated[int, Query(ge=1, le=1000)] = PAGE) -> HTMLResponse:
    """The runs of every DAG, newest first, filtered by state, type, DAG and logical date (`ledger runs list`):
    what the home's state counts link to."""
    with session_of(request) as session:
        found, older = documents.runs_list_document(session, states=state or [], run_types=type or [],
                                                    dag_id=dag or None, start=start or None, end=end or None,
                                                    before=before, limit=limit)
        zones = dag_store.timezones(session, {r["dag_id"] for r in found})
    following = _relative(request.url.include_query_params(before=older)) if older is not None else None
    first = _relative(request.url.remove_query_params("before")) if before is not None else None
    return _page(request, "runs.html", fragment="runs_live.html", runs=found, zones=zones, states=set(state or []),
                 types=set(type or []), dag=dag or "", start=start or "", end=end or "", following=following,
                 first=first, all_states=[s.value for s in RunState], all_types=[t.value for t in RunType])


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: str) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        replaced = [documents.run_json(r) for r in web_store.replaced_by_run(session, int(doc["run_id"]))]
        why = documents.failure_reasons(session, int(doc["run_id"]), [ti["label"] for ti in doc["task_instances"]
                                                                      if ti["state"] in FAILING])
        tz = dag_store.get(session, doc["dag_id"], active_only=False).timezone
    drawing = views.graph_drawing(doc["graph"]["tasks"], views.states_by_task(doc["task_instances"]))
    return _page(request, "run.html", fragment="run_live.html", run=doc, replaced=replaced, drawing=drawing, tz=tz,
                 why=why)


@router.get("/runs/{run_id}/gantt", response_class=HTMLResponse)
def gantt(request: Request, run_id: str) -> HTMLResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        tz = dag_store.get(session, doc["dag_id"], active_only=False).timezone
    bars, ticks, height = views.gantt(doc, now())
    return _page(request, "gantt.html", fragment="gantt_live.html", run=doc, bars=bars, ticks=ticks, height=height,
                 tz=tz, left=views.GANTT_LEFT, width=views.GANTT_LEFT + views.GANTT_WIDTH + 50)


@router.get("/runs/{run_id}/tasks/{task_id}/tries/{try_number}/log", response_class=HTMLResponse)
def log(request: Request, run_id: str, task_id: str, try_number: int,
        before: Annotated[int | None, Query(ge=0, le=MAX_ID)] = None,
        after: Annotated[int | None, Query(ge=0, le=MAX_ID)] = None) -> HTMLResponse:
    """A try's log: the last 1 MB (or the MB before offset `before`); with `after` and X-Ledger-Live (the follow
    of static/live.js), only what was appended after that offset."""
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        tz = dag_store.get(session, doc["dag_id"], active_only=False).timezone
        the_try, path = logview.locate(request.app.state.settings.logs_folder, doc, task_id, try_number)
        found = logview.try_ref(session, doc, task_id, try_number)
        extras = None if _live(request) else _try_extras(session, doc, task_id, try_number)
    ended = logview.try_ended(the_try)
    # its file here; else the log kept in the database or the remote log store (a try that ran on another host and
    # has ended), or in the result backend (one running there); a try not started yet has none: followed from its
    # first byte
    source = logview.source_of(request.app.state.settings.logs_folder, found, the_try)
    if _live(request) and after is not None:
        more = logview.read_page(source, after=after, whole_lines=not ended) if source is not None else None
        return HTMLResponse(render("log_more.html", part=more, after=after, ended=ended))
    empty = None if ended else logview.LogPage("", 0, 0, 0)
    part = logview.read_page(source, before=before) if source is not None else empty
    name, _ = split_label(task_id)
    others = [(ti["label"], t["try_number"], t["state"]) for ti in doc["task_instances"]
              if split_label(ti["label"])[0] == name for t in ti["tries"]]
    base = f"/runs/{doc['run_id']}/tasks/{task_id}/tries/{try_number}/log"
    return _page(request, "log.html", run=doc, task_id=task_id, the_try=the_try, part=part,
                 path=str(path), kept_in=None if source is None or source.where == str(path) else source.where, tz=tz,
                 ended=ended, others=others, base=base, follow=not ended and (before is None or not part
                                                                             or part.end == part.size),
                 extras=extras)


def _try_extras(session: Any, doc: dict[str, Any], task_id: str, try_number: int) -> dict[str, Any]:
    """documents.try_values, or a note saying why they are not shown (a stored secret that cannot be decrypted:
    what is shown could not be checked)."""
    try:
        return {**documents.try_values(session, int(doc["run_id"]), task_id, try_number), "note": None}
    except ConfigError as exc:
        return {"rendered": {}, "xcom": [], "note": f"not shown: {exc}"}


@router.get("/runs/{run_id}/tasks/{task_id}/tries/{try_number}/log/download")
def log_download(request: Request, run_id: str, task_id: str, try_number: int) -> Response:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        the_try, path = logview.locate(request.app.state.settings.logs_folder, doc, task_id, try_number)
        found = logview.try_ref(session, doc, task_id, try_number)
    name, index = split_label(task_id)
    filename = f"{doc['dag_id']}_run{doc['run_id']}_{name}{f'_{index}' if index >= 0 else ''}_try{try_number}.log"
    if found[0].own_file(request.app.state.settings.logs_folder) is not None:
        return FileResponse(path, media_type="text/plain; charset=utf-8", filename=filename)
    source = logview.source_of(request.app.state.settings.logs_folder, found, the_try)
    if source is None:
        raise InvalidInput(f"no log for try {try_number} of task {task_id!r} in run {doc['run_id']}")
    return Response(source.read(0, source.size()), media_type="text/plain; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


@router.get("/dags/{dag_id}/versions/{version}", response_class=HTMLResponse)
def version(request: Request, dag_id: str, version: str, file: str | None = None,
            against: str | None = None) -> HTMLResponse:
    """A version named by its number and date (v3 · 2024-03-01), its graph and code, and the diff against the
    version before it or against any other (`against`: a hash, a prefix of one, or `vN`)."""
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        row = dag_store.version(session, dag_id, version)
        try:
            doc = documents.version_document(session, dag, row.version_hash, source=True, file=file)
        except InvalidInput:
            if file:
                raise
            doc = documents.version_document(session, dag, row.version_hash)  # no stored code: its structure
        every = dag_store.versions(session, dag_id)
        named = views.version_names(every)
        if against:
            other = views.version_by_name(every, against) or dag_store.version(session, dag_id, against)
        else:
            other = web_store.previous_version(session, row)
        diff = documents.version_diff(session, dag, other, row) if other is not None else None
    return _page(request, "version.html", dag_id=dag_id, doc=doc, before=other.version_hash if other else None,
                 diff=views.diff_lines(diff), drawing=views.graph_drawing(documents.graph_tasks(doc["structure"])),
                 version_name=named[row.version_hash], names=named, against=against or "",
                 other_name=named[other.version_hash] if other is not None else None)


@router.get("/lineage")
def lineage_list(request: Request) -> RedirectResponse:
    """The Lineage page of earlier ledgers: now the dataset graph."""
    return RedirectResponse("/datasets", 301)


@router.get("/lineage/{dataset:path}")
def lineage(request: Request, dataset: str, partition: str | None = None) -> RedirectResponse:
    """A dataset's Lineage page of earlier ledgers: now its part of the dataset's page (a partition's every write)."""
    query = f"?{urlencode({'partition': partition})}" if partition else ""
    return RedirectResponse(f"{dataset_graph.dataset_href(dataset)}{query}#writes", 301)


@router.get("/datasets", response_class=HTMLResponse)
def dataset_list(request: Request) -> HTMLResponse:
    """The dataset graph: every dataset with its producers, consumers and the partitions written."""
    with session_of(request) as session:
        found = dataset_graph.datasets(session)
    return _page(request, "dataset_graph.html", datasets=found, drawing=dataset_graph.drawing(found))


@router.get("/datasets/{dataset:path}", response_class=HTMLResponse)
def dataset(request: Request, dataset: str, partition: str | None = None) -> HTMLResponse:
    """A dataset: its graph (producers, consumers), the partitions written (the newest LINEAGE_PARTITIONS with
    their writes, or every write of `partition`), the partition matrix of its consumers (its LINEAGE_PARTITIONS
    newest partitions), their stale runs and its latest events."""
    with session_of(request) as session:
        found = dataset_graph.datasets(session, only=dataset)
        if not found:
            known = ", ".join(d.key for d in dataset_graph.datasets(session)) or "none yet"
            raise NotFound(f"no dataset {dataset!r}; known datasets: {known}")
        (d,) = found
        matrix = dataset_graph.partition_matrix(session, d, limit=LINEAGE_PARTITIONS) if d.partitions else []
        events = dataset_graph.latest_events(session, dataset, limit=LINEAGE_PARTITIONS)
        stale = [s for dag_id in d.scheduled for s in dataset_docs.stale_document(session, dag_id)
                 if s["dataset"] == dataset]
        shown = [partition] if partition else graph_store.newest_partitions(session, dataset, limit=LINEAGE_PARTITIONS)
        parts = dataset_graph.partitions_written(graph_store.writes_of(session, dataset, shown), shown)
    return _page(request, "dataset.html", d=d, matrix=matrix, events=events, stale=stale, parts=parts,
                 partition=partition or "",
                 drawing=dataset_graph.drawing(found), limit=LINEAGE_PARTITIONS)


@router.get("/backfills", response_class=HTMLResponse)
def backfills(request: Request) -> HTMLResponse:
    """Every backfill, newest first, each one's dates in its DAG's time zone (as the viewer chose)."""
    with session_of(request) as session:
        rows = documents.backfills_document(session)
        zones = dag_store.timezones(session, {b["dag_id"] for b in rows})
    return _page(request, "backfills.html", fragment="backfills_live.html", backfills=rows, zones=zones)


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request) -> HTMLResponse:
    from ledger.infra import workers as worker_list

    url = worker_list.backend_url()
    rows = worker_list.listing(url) if url is not None else []
    return _page(request, "workers.html", fragment="workers_live.html", workers=rows, configured=url is not None)


@router.get("/backfills/{backfill_id}", response_class=HTMLResponse)
def backfill(request: Request, backfill_id: IdInUrl,
             offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0) -> HTMLResponse:
    """A backfill's summary and its runs, BACKFILL_RUNS at a time from `offset` (by logical date)."""
    with session_of(request) as session:
        doc = documents.backfill_json(session, backfill_store.get(session, backfill_id))
        total, rows = web_store.backfill_runs_page(session, backfill_id, offset=offset, limit=BACKFILL_RUNS)
        tz = dag_store.get(session, doc["dag_id"], active_only=False).timezone
    runs = [documents.run_json(r) for r in rows]
    older = f"?offset={max(offset - BACKFILL_RUNS, 0)}" if offset > 0 else None
    newer = f"?offset={offset + BACKFILL_RUNS}" if offset + BACKFILL_RUNS < total else None
    return _page(request, "backfill.html", fragment="backfill_live.html", b=doc, runs=runs, total=total,
                 offset=offset, previous=older, following=newer, tz=tz)


@router.get("/events", response_class=HTMLResponse)
def events(request: Request, dag: str | None = None, run: str | None = None, kind: str | None = None,
           limit: Annotated[int, Query(ge=1, le=10_000)] = 200, task_signals: bool = False,
           before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
           before_signal: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None) -> HTMLResponse:
    """The newest `limit` events, newest first (those before the keys `before`, `before_signal`: the next older
    page); the task state signals the scheduler sends as tries change state only with `task_signals`."""
    run_id = id_in_url(run.strip()) if run and run.strip() else None  # `abc` is refused (400), as in the API
    with session_of(request) as session:
        if dag:
            dag_store.get(session, dag, active_only=False)
        rows = event_store.listing_json(session, dag_id=dag or None, run_id=run_id,
                                        kinds=[kind] if kind else None, limit=limit, task_signals=task_signals,
                                        before=before, before_signal=before_signal)
    older = None
    if len(rows) == limit:
        keys = event_store.page_keys(rows, before=before, before_signal=before_signal)
        older = _relative(request.url.include_query_params(
            **{k: v for k, v in zip(("before", "before_signal"), keys, strict=True) if v is not None}))
    return _page(request, "events.html", events=list(reversed(rows)), dag=dag or "", run=run or "",
                 kind=kind or "", limit=limit, task_signals=task_signals, older=older,
                 paged=before is not None or before_signal is not None)


@router.get("/signals", response_class=HTMLResponse)
def signals(request: Request, key: str | None = None, before: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
            limit: Annotated[int, Query(ge=1, le=10_000)] = 200, task_signals: bool = False) -> HTMLResponse:
    """The newest `limit` signals (of `key`), newest first, those before the signal id `before` (the next older
    page); without a key, the task state signals (ledger.task.*) only with `task_signals`."""
    key = key or None
    with session_of(request) as session:
        signals, older_key = signal_store.newest_first(
            session, key, before=before, limit=limit,
            hide_prefix=None if task_signals else event_store.TASK_STATE_PREFIX, scan=SIGNALS_SCANNED)
    found = [s.as_json() for s in signals]
    older = _relative(request.url.include_query_params(before=older_key)) if older_key is not None else None
    return _page(request, "signals.html", signals=found, key=key or "", older=older, task_signals=task_signals,
                 paged=before is not None)
