"""Describing a DAG as its version: the canonical JSON structure of a DAG object (tasks, their kinds and
arguments, edges, schedule, settings, the digest of its code) and its sha256, the version hash. Reading a
stored structure back, and the rules on secrets inside it, are ledger/core/versions.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ledger.core.secret_names import sensitive
from ledger.core.versions import (
    FORMAT,
    DagSpec,
    Path,
    _json_or_repr,
    _redact,
    canonical_json,
    hash_structure,
    secret_digest,
    spec_from_json,
)
from ledger.infra.code import python_digest
from ledger.sdk.dag import describe_callbacks
from ledger.sdk.timetables import from_description

if TYPE_CHECKING:
    from ledger.sdk.dag import DAG, Task


def code_digest(source_code: str) -> str:
    """sha256 of a Python file's syntax tree (see ledger.infra.code.python_digest)."""
    return python_digest(source_code)


def structure_of(dag: DAG) -> dict[str, Any]:
    """Everything that defines the DAG: tasks with kind and arguments, edges, schedule and settings, and
    (for a DAG loaded from a file) the digest of its code: the file's syntax tree and, when it imports
    helper modules of the DAGs folder, theirs (ledger/infra/code.py), so that changing a helper makes a new
    version of every DAG that imports it."""
    if dag.code is not None:
        code = dag.code.version_digest()
    elif dag.source_code is not None:
        code = {"code_sha256": code_digest(dag.source_code)}
    else:
        code = {}
    return {
        **code,
        "format": FORMAT,
        "dag_id": dag.dag_id,
        "schedule": dag.schedule.describe(),
        "timezone": dag.timezone,
        "start_date": dag.start_date.isoformat(),
        "end_date": dag.end_date.isoformat() if dag.end_date else None,
        "catchup": dag.catchup,
        "max_active_runs": dag.max_active_runs,
        "max_active_tasks": dag.max_active_tasks,
        # only when given, so that other DAGs keep their version hashes
        **({"ignored_args": dag.ignored_args} if getattr(dag, "ignored_args", None) else {}),
        **({"dagrun_timeout": dag.dagrun_timeout.total_seconds()} if dag.dagrun_timeout is not None else {}),
        **({"deadline": dag.deadline.total_seconds()} if dag.deadline is not None else {}),
        **({"callbacks": describe_callbacks(dag.callbacks)} if dag.callbacks else {}),
        **({"params": {name: p.describe() for name, p in sorted(dag.params.items())}} if dag.params else {}),
        **({"tags": list(dag.tags)} if getattr(dag, "tags", None) else {}),
        **({"edge_labels": [[up, down, text] for (up, down), text in sorted(dag.edge_labels.items())]}
           if dag.edge_labels else {}),
        **({"about": about} if (about := dag.about()) else {}),
        **({"tags": list(dag.tags)} if getattr(dag, "tags", None) else {}),
        **({"datasets": {"condition": dag.datasets.to_json(), "on_upstream_rewrite": dag.on_upstream_rewrite}}
           if dag.datasets is not None else {}),
        "tasks": [_without_secrets(dag.dag_id, t, {"task_id": t.task_id, "kind": t.kind,
                                                   "upstream": sorted(t.upstream_ids), **t.settings(),
                                                   "definition": t.definition()})
                  for t in (dag.tasks[tid] for tid in sorted(dag.tasks))],
    }




def _without_secrets(dag_id: str, task: Task, described: dict[str, Any]) -> dict[str, Any]:
    """A task's description with its secret-looking arguments as digests: in its definition (read from the task's
    own values, before a value that is not JSON is recorded as its repr) and in the literal lists it is expanded
    over. A task without any is described exactly as before, so that its DAG keeps its version hash."""
    def digest(path: Path, value: Any) -> str:
        return secret_digest(dag_id, task.task_id, path, value)

    definition = described["definition"]
    for name, shown in list(definition.items()):
        redacted, changed = _redact(getattr(task, name, shown), ("definition", name), digest)
        if changed:
            definition[name] = _json_or_repr(redacted)
    for entry, (arg, src) in zip(described.get("expand", ()), getattr(task, "expand_args", ()), strict=False):
        if not isinstance(src, (list, tuple)):
            continue  # another task's value: known only when it has run, never recorded
        if sensitive(arg):
            entry[1]["values"] = [digest(("expand", arg, i), v) for i, v in enumerate(src)]
        else:
            redacted, changed = _redact(src, ("expand", arg), digest)
            if changed:
                entry[1]["values"] = _json_or_repr(redacted)
    return described


def version_of(dag: DAG) -> tuple[str, str]:
    """(version hash, canonical JSON text) of a DAG."""
    text = canonical_json(structure_of(dag))
    return hash_structure(text), text


def read_spec(version_hash: str, text: str) -> DagSpec:
    """A stored structure read back as the spec the scheduler decides from, custom timetables included."""
    return spec_from_json(version_hash, text, timetables=from_description)
