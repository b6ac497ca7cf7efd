"""What task code on a Celery worker, which holds no database credentials, asks ledger's webserver for (the HTTP
client is ledger/infra/worker_client.py): send a signal, trigger a run, read a run's state or the states of a DAG's
run at a date (ExternalTaskSensor), read a variable or a connection (decrypted here with the webserver's Fernet key;
the try masks what it read in its log, as any try does). With the workers' own credential (LEDGER_WORKER_TOKEN) and
no other; a write acts only as a try (`task:DAG.TASK@run N try M`), never as a user.

Each request is one call of the database's client of task code (ledger/services/task_calls.py): one transaction,
the rules, validation and events of the CLI's `ledger signal send` and `ledger trigger`. A refusal answers as every
API refusal does: 400 bad input, 404 no such thing, 409 the timeline forbids it, with the one-line reason."""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ledger.core.errors import InvalidInput, NotFound
from ledger.services.task_calls import DatabaseClient
from ledger.web.auth import Forbidden
from ledger.web.reading import IdInUrl

router = APIRouter(prefix="/api/v1/worker", tags=["workers"])


def _worker_only(request: Request) -> DatabaseClient:
    """Only a request that carries LEDGER_WORKER_TOKEN (not the shared read token, LEDGER_WEB_TOKEN, which opens
    the worker's code paths too: a reader of the web view must not read secrets nor act), and only from a server
    that has one. The client on the server's database, opened on first need."""
    expected = request.app.state.guard.worker_token
    header = request.headers.get("authorization", "")
    given = header[7:].strip() if header.lower().startswith("bearer ") else ""
    if expected is None:
        raise Forbidden("this server has no LEDGER_WORKER_TOKEN: it serves the worker API to no one")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Forbidden("the worker API is served with LEDGER_WORKER_TOKEN only")
    state = request.app.state
    if getattr(state, "task_calls", None) is None:
        state.task_calls = DatabaseClient(state.settings.database_url, state.settings.home)
    found: DatabaseClient = state.task_calls
    return found


def _date(text: str, what: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{what} {text!r} is not an ISO date and time") from None
    if at.tzinfo is None:
        raise InvalidInput(f"{what} {text!r} has no timezone")
    return at


class SignalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    value: str
    meta: dict[str, Any] | None = None
    sender: str = Field(description="The try sending it: task:DAG.TASK@run N try M.")


class TriggerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    logical_date: str = Field(description="ISO datetime with its timezone.")
    conf: dict[str, Any] = Field(default_factory=dict)
    replace: bool = False
    actor: str = Field(description="The try triggering it: task:DAG.TASK@run N try M.")


@router.post("/signals", status_code=201, summary="A try sends a signal (`ledger signal send`)")
def send_signal(request: Request, body: SignalBody) -> JSONResponse:
    sent = _worker_only(request).send_signal(body.key, body.value, sender=body.sender, meta=body.meta)
    return JSONResponse(sent.as_json(), status_code=201)


@router.post("/dags/{dag_id}/runs", status_code=201, summary="A try triggers a run (TriggerDagRunOperator)")
def trigger_run(request: Request, dag_id: str, body: TriggerBody) -> JSONResponse:
    done = _worker_only(request).trigger_run(dag_id, _date(body.logical_date, "logical_date"), body.conf,
                                             replace=body.replace, actor=body.actor)
    return JSONResponse({"run_id": str(done.run_id), "logical_date": done.logical_date.isoformat(),
                         "replaced_run_id": str(done.replaced_run_id) if done.replaced_run_id is not None else None},
                        status_code=201)


@router.get("/runs/{run_id}", summary="A run's state, for a try waiting for it")
def run_state(request: Request, run_id: IdInUrl) -> JSONResponse:
    return JSONResponse({"run_id": str(run_id), "state": _worker_only(request).run_state(run_id)})


@router.get("/dags/{dag_id}/states", summary="The states of a DAG's live run at a date (ExternalTaskSensor)")
def states_at(request: Request, dag_id: str, at: Annotated[str, Query(max_length=64)]) -> JSONResponse:
    found = _worker_only(request).states_at(dag_id, _date(at, "at"))
    run_state, tasks = found if found is not None else (None, {})
    return JSONResponse({"dag_id": dag_id, "at": at, "run_state": run_state, "tasks": tasks})


@router.get("/variables/{key}", summary="A variable's value, for a try on a worker")
def variable(request: Request, key: str) -> JSONResponse:
    value = _worker_only(request).variable(key)
    if value is None:
        raise NotFound(f"variable {key!r} is not set (ledger variables set)")
    return JSONResponse({"key": key, "value": value})


@router.get("/connections/{conn_id}", summary="A connection, for a try on a worker")
def connection(request: Request, conn_id: str) -> JSONResponse:
    found = _worker_only(request).connection(conn_id)
    if found is None:
        raise NotFound(f"connection {conn_id!r} is not defined (ledger connections add)")
    return JSONResponse(found)

