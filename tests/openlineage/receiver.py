"""A local OpenLineage backend for the tests: a real HTTP server on loopback that keeps the events POSTed to it, and
the checks each received event must pass.

No package registry ships the OpenLineage spec's JSON schema (OpenLineage.json): the openlineage-python wheel has
the typed model generated from it, its sdist and openlineage-integration-common only some integrations' facet
schemas, and npm no OpenLineage package. So an event is checked against the client's typed model: it is rebuilt
from the JSON received through the model's classes (their validators check the event time, the URIs and the
types) and must serialise back to exactly what was received; the `ledger` facet is checked against its own JSON
schema (ledger/services/openlineage_facet.schema.json) with jsonschema.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema

from ledger.services.openlineage import FACET_NAME, FACET_SCHEMA_FILE


class Receiver:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.changed = threading.Condition()
        self.status = 200  # what it answers

    def add(self, path: str, body: dict[str, Any]) -> None:
        with self.changed:
            self.paths.append(path)
            self.events.append(body)
            self.changed.notify_all()


@contextmanager
def receiving() -> Iterator[tuple[str, Receiver]]:
    """(the URL to give OPENLINEAGE_URL, what it received)."""
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status = got.status  # (read before the event is seen: a test that changes it then changes the next)
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.add(self.path, json.loads(body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


FACET_SCHEMA = json.loads(FACET_SCHEMA_FILE.read_text())


def check_event(event: dict[str, Any]) -> None:
    """The event is one the client's typed model makes, and its `ledger` facet is what its schema says."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import job_type_job, nominal_time_run, parent_run, tags_run
    from openlineage.client.serde import Serde

    jsonschema.validate(event["run"]["facets"][FACET_NAME], FACET_SCHEMA,
                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    uuid.UUID(event["run"]["runId"])
    facets = event["run"]["facets"]
    p, n, tags = facets["parent"], facets["nominalTime"], facets.get("tags")  # tags: the client's own
    jt = event["job"]["facets"]["jobType"]
    rebuilt = RunEvent(
        eventType=RunState(event["eventType"]), eventTime=event["eventTime"], producer=event["producer"],
        run=Run(runId=event["run"]["runId"], facets={
            "parent": parent_run.ParentRunFacet(
                run=parent_run.Run(runId=p["run"]["runId"]), job=parent_run.Job(**p["job"]),
                root=parent_run.Root(run=parent_run.RootRun(runId=p["root"]["run"]["runId"]),
                                     job=parent_run.RootJob(**p["root"]["job"])), producer=p["_producer"]),
            "nominalTime": nominal_time_run.NominalTimeRunFacet(
                nominalStartTime=n["nominalStartTime"], nominalEndTime=n.get("nominalEndTime"),
                producer=n["_producer"]),
            **({} if tags is None else {"tags": tags_run.TagsRunFacet(
                tags=[tags_run.TagsRunFacetFields(**t) for t in tags["tags"]], producer=tags["_producer"])})}),
        job=Job(namespace=event["job"]["namespace"], name=event["job"]["name"], facets={
            "jobType": job_type_job.JobTypeJobFacet(processingType=jt["processingType"], integration=jt["integration"],
                                                    jobType=jt.get("jobType"), producer=jt["_producer"])}),
        inputs=[InputDataset(namespace=d["namespace"], name=d["name"]) for d in event["inputs"]],
        outputs=[OutputDataset(namespace=d["namespace"], name=d["name"]) for d in event["outputs"]])
    again = Serde.to_dict(rebuilt)
    received = json.loads(json.dumps(event))
    received["run"]["facets"].pop(FACET_NAME)
    assert again == received, (again, received)
