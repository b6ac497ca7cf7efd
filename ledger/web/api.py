"""The JSON API under /api/v1: the same documents as `ledger ... --json` (built by ledger.services.documents).

Reads (GET; the writes are in actions.py). Errors are {"message": ...} with status 400 (bad input) or 404 (no
such thing). Every list answers at most 1000 rows unless `limit` says otherwise (up to 10,000). A timeline is
read a page at a time: the body is the page (a slice of `ledger timeline DAG --json`), the next page's
cursor is in the `X-Next-Cursor` header and a `Link: <...>; rel="next"` header."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ledger.core import strict_json
from ledger.core.errors import InvalidInput, NotFound
from ledger.infra import workers as worker_list
from ledger.services import dataset_docs, documents
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from ledger.store import events as event_store
from ledger.store import signals as signal_store
from ledger.store import web as web_store
from ledger.web import logview
from ledger.web.reading import MAX_ID, IdInUrl, id_in_url, now, session_of

router = APIRouter(prefix="/api/v1", tags=["ledger"])

MAX_PAGE = 10_000


def _json(value: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    try:
        return JSONResponse(value, headers=headers)
    except ValueError:  # a NaN or infinite number stored before conf was strict: written as its name, a string
        return JSONResponse(strict_json.finite(value), headers=headers)


@router.get("/dags", summary="`ledger dags list --json`: the active DAGs")
def dags(request: Request) -> JSONResponse:
    with session_of(request) as session:
        return _json([documents.dag_json(d) for d in dag_store.listing(session)])


@router.get("/dags/{dag_id}/timeline", summary="`ledger timeline DAG --json`, a page at a time")
def timeline(request: Request, dag_id: str,
             start: Annotated[str | None, Query(description="Earliest logical date.")] = None,
             end: Annotated[str | None, Query(description="Latest logical date.")] = None,
             cursor: Annotated[int | None, Query(ge=1, le=MAX_ID, description="X-Next-Cursor of the page before.")]
             = None,
             limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="Runs per page.")] = 1000) -> JSONResponse:
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        lo, hi = documents.timeline_range(dag, start, end)
        rows = web_store.timeline_page(session, dag_id, start=lo, end=hi, cursor=cursor, limit=limit)
    page = documents.timeline_json(rows[:limit])
    headers = {}
    if len(rows) > limit:
        following = request.url.include_query_params(cursor=page[-1]["run_id"])
        headers = {"X-Next-Cursor": page[-1]["run_id"], "Link": f'<{following}>; rel="next"'}
    return _json(page, headers)


@router.get("/dags/{dag_id}/versions", summary="`ledger dags versions DAG --json`")
def versions(request: Request, dag_id: str) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.versions_document(session, dag_store.get(session, dag_id, active_only=False)))


@router.get("/dags/{dag_id}/versions/{version}", summary="`ledger dags show DAG --version V [--source] --json`")
def version(request: Request, dag_id: str, version: str, source: bool = False,
            file: str | None = None) -> JSONResponse:
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        return _json(documents.version_document(session, dag, version, source=source or file is not None,
                                                file=file))


@router.get("/dags/{dag_id}/versions/{version}/diff",
            summary="`ledger dags diff DAG OLD VERSION` (OLD: the version before, unless given)")
def diff(request: Request, dag_id: str, version: str, old: str | None = None) -> JSONResponse:
    with session_of(request) as session:
        dag = dag_store.get(session, dag_id, active_only=False)
        new_row = dag_store.version(session, dag_id, version)
        old_row = dag_store.version(session, dag_id, old) if old else web_store.previous_version(session, new_row)
        text = documents.version_diff(session, dag, old_row, new_row) if old_row is not None else None
    return _json({"dag_id": dag_id, "old": old_row.version_hash if old_row else None,
                  "new": new_row.version_hash, "diff": text})


@router.get("/dags/{dag_id}/next-runs", summary="`ledger dags next-runs DAG -n N --json`")
def next_runs(request: Request, dag_id: str, n: Annotated[int, Query(ge=1, le=10_000)] = 5) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.next_runs_document(session, dag_id, now=now(), n=n))


@router.get("/import-errors", summary="`ledger dags errors --json`")
def import_errors(request: Request) -> JSONResponse:
    with session_of(request) as session:
        return _json([documents.import_error_json(e) for e in dag_store.import_errors(session)])


@router.get("/runs/{run_id}", summary="`ledger runs show RUN --json`: a run as it was")
def run(request: Request, run_id: str) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.run_document(session, id_in_url(run_id)))


@router.get("/runs/{run_id}/tasks/{task_id}/tries/{try_number}/log",
            summary="A try's log, a page at a time: the last MB, the MB before `before`, or what follows `offset`")
def log(request: Request, run_id: str, task_id: str, try_number: int,
        offset: Annotated[int | None, Query(ge=0, le=MAX_ID, description="Bytes after this offset (the follow: "
                                            "next_offset of the page before).")] = None,
        before: Annotated[int | None, Query(ge=0, le=MAX_ID, description="Bytes before this offset (older: "
                                            "offset of the page after).")] = None,
        limit: Annotated[int, Query(ge=1, le=logview.CHUNK, description="Bytes at most.")] = logview.CHUNK
        ) -> JSONResponse:
    """`task_id`: the task's id, or `task[i]` for mapped instance i. The page starts and ends at a line's start
    (while the try runs, a line being written is left for the next read); `ended` says whether the try has ended."""
    if offset is not None and before is not None:
        raise InvalidInput("give offset or before, not both")
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        the_try, _ = logview.locate(request.app.state.settings.logs_folder, doc, task_id, try_number)
        found = logview.try_ref(session, doc, task_id, try_number)
    ended = logview.try_ended(the_try)
    source = logview.source_of(request.app.state.settings.logs_folder, found, the_try)
    if source is None:
        raise NotFound(f"no log for try {try_number} of task {task_id!r} in run {doc['run_id']}")
    part = logview.read_page(source, before=before, after=offset, chunk=limit, whole_lines=not ended)
    return _json({"run_id": doc["run_id"], "task_id": task_id, "try_number": try_number, "state": the_try["state"],
                  "ended": ended, "offset": part.start, "next_offset": part.end, "size": part.size,
                  "text": part.text})


@router.get("/runs/{run_id}/tasks/{task_id}/tries/{try_number}",
            summary="One try: its state and times, the templated fields it rendered and its XCom values (secrets "
                    "as ***)")
def try_detail(request: Request, run_id: str, task_id: str, try_number: int) -> JSONResponse:
    with session_of(request) as session:
        doc = documents.run_document(session, id_in_url(run_id))
        the_try, _ = logview.locate(request.app.state.settings.logs_folder, doc, task_id, try_number)
        values = documents.try_values(session, int(doc["run_id"]), task_id, try_number)
    return _json({"run_id": doc["run_id"], "task_id": task_id, **the_try, **values})


@router.get("/lineage/{dataset:path}", summary="`ledger lineage DATASET [--partition P] --json`")
def lineage(request: Request, dataset: str, partition: str | None = None) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.lineage_document(session, dataset, partition))


@router.get("/datasets", summary="`ledger datasets list --json`")
def datasets(request: Request) -> JSONResponse:
    with session_of(request) as session:
        return _json(dataset_docs.datasets_document(session))


@router.get("/datasets/{dataset:path}", summary="`ledger datasets show DATASET --json`")
def dataset(request: Request, dataset: str) -> JSONResponse:
    with session_of(request) as session:
        return _json(dataset_docs.dataset_document(session, dataset))


@router.get("/stale", summary="`ledger lineage --stale --json`")
def stale(request: Request) -> JSONResponse:
    with session_of(request) as session:
        return _json(dataset_docs.stale_document(session))


@router.get("/backfills", summary="`ledger backfill list --json`")
def backfills(request: Request) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.backfills_document(session))


@router.get("/backfills/{backfill_id}", summary="`ledger backfill show ID --json`")
def backfill(request: Request, backfill_id: IdInUrl) -> JSONResponse:
    with session_of(request) as session:
        return _json(documents.backfill_document(session, backfill_id))


@router.get("/events", summary="`ledger events [--dag D] [--run R] [--task T] [--kind K]... [--limit N] [--before ID] "
            "--json`")
def events(request: Request, dag: str | None = None,
           run: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None, task: str | None = None,
           kind: Annotated[list[str] | None, Query()] = None,
           limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="The newest N (default 1000).")] = 1000,
           task_signals: bool = True,
           before: Annotated[int | None, Query(ge=1, le=MAX_ID, description=(
               "Only events with a smaller id: the next older page is `before` the oldest id of this one."))] = None,
           before_signal: Annotated[int | None, Query(ge=1, le=MAX_ID, description=(
               "Only task state signals with a smaller signal id (the oldest `signal_id` of this page)."))] = None
           ) -> JSONResponse:
    with session_of(request) as session:
        if dag is not None:
            dag_store.get(session, dag, active_only=False)
        rows = event_store.listing_json(session, dag_id=dag, run_id=run, kinds=kind, limit=limit,
                                        task_signals=task_signals, task_id=task, before=before,
                                        before_signal=before_signal)
    headers = {}
    if len(rows) == limit:  # there may be older ones: a Link to them
        older, older_signal = event_store.page_keys(rows, before=before, before_signal=before_signal)
        params = {k: v for k, v in (("before", older), ("before_signal", older_signal)) if v is not None}
        headers = {"Link": f'<{request.url.include_query_params(**params)}>; rel="next"'}
    return _json(rows, headers)


@router.get("/signals", summary="`ledger signal list [KEY] [--since N] [--limit N] --json`")
def signals(request: Request, key: str | None = None, since: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
            limit: Annotated[int, Query(ge=1, le=MAX_PAGE, description="At most N (default 1000).")] = 1000
            ) -> JSONResponse:
    with session_of(request) as session:
        found = signal_store.listing(session, key, since_version=since if key is not None else 0,
                                     since_id=since if key is None else 0, limit=limit)
    return _json([s.as_json() for s in found])


@router.get("/workers", summary="`ledger workers --json`: the live Celery workers")
def workers(request: Request) -> JSONResponse:
    url = worker_list.backend_url()
    return _json(worker_list.listing(url) if url is not None else [])


@router.get("/worker/code/{dag_id}/{version}", summary="A version's code, for a worker that runs its tries (the "
            "files base64-encoded, with their sha256)")
def worker_code(request: Request, dag_id: str, version: str) -> JSONResponse:
    import base64

    from ledger.infra.code import sha256_bytes

    with session_of(request) as session:
        found = dag_store.find_version(session, dag_id, version)
        if found is None:
            raise NotFound(f"DAG {dag_id!r} has no version {version!r}")
        snap = code_store.snapshot(session, found)
    if snap is None:
        raise InvalidInput(f"version {version[:12]} of {dag_id} has no stored code (it was not loaded from a file)")
    return _json({"key": snap.key, "entry": snap.entry, "captured": snap.captured,
                  "files": {path: base64.b64encode(data).decode() for path, data in snap.files.items()},
                  "sha256": {path: sha256_bytes(data) for path, data in snap.files.items()}})
