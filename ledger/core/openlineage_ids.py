"""The OpenLineage runIds of ledger's runs and tries: the same identity gives the same UUID, in the scheduler that
sends the events (ledger/services/openlineage.py) and in a try that hands its own to a Spark application
(ledger/sdk/openlineage.py)."""

from __future__ import annotations

import uuid

_UUIDS = uuid.UUID("5f0c2a7e-3b51-4d4c-9a55-6c6564676572")  # the uuid5 namespace of ledger's run ids


def run_uuid(namespace: str, dag_id: str, run_id: int | str, task_id: str | None = None, map_index: int = -1,
             try_number: int = 0) -> str:
    """The runId of a DAG run (no task) or of a try in an OpenLineage `namespace`."""
    name = f"{namespace}/{dag_id}/{run_id}" + ("" if task_id is None else f"/{task_id}/{map_index}/{try_number}")
    return str(uuid.uuid5(_UUIDS, name))
