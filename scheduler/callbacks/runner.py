"""The process that makes one callback call: `python -m ledger.scheduler.callbacks.runner` with the request as JSON on
stdin. It imports the DAG file from the code of the version the call was recorded with (never from the live
DAGs folder), finds the callable (a task's or the DAG's, by kind and position), and calls it with the
context. Exit status 0: ok; 1: the callable (or loading it) failed, the reason on the last line.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any

from ledger.sdk import secrets

FAILED_PREFIX = "[ledger] callback failed: "


def find_callable(request: dict[str, Any]) -> Any:
    from ledger.scheduler.runtime.dagbag import load_file

    loaded = load_file(request["fileloc"], request.get("code_root"))
    where = f"the code of version {request['dag_version'][:12]}"
    if loaded.error:
        raise RuntimeError(f"cannot load {where}: {loaded.error.strip().splitlines()[-1]}")
    dag = next((d for d in loaded.dags if d.dag_id == request["dag_id"]), None)
    if dag is None:
        raise RuntimeError(f"DAG {request['dag_id']} is not defined by {where}")
    owner: Any = dag
    if request.get("task_id"):
        owner = dag.tasks.get(request["task_id"])
        if owner is None:
            raise RuntimeError(f"task {request['task_id']} is not in {where}")
    found = owner.callbacks.get(request["kind"], [])
    if request["position"] >= len(found):
        raise RuntimeError(f"{where} has no {request['kind']} callback #{request['position'] + 1}")
    if loaded.root and loaded.root not in sys.path:
        sys.path.insert(0, loaded.root)  # helpers the callable imports when called resolve as at import time
    return found[request["position"]]


def main() -> int:
    request = json.loads(sys.stdin.read())
    secrets.seen_settings()
    print(f"[ledger] {request['kind']} callback #{request['position'] + 1} ({request['target']}) of "
          f"dag={request['dag_id']} run={request['run_id']}"
          + (f" task={request['task_id']} try={request['try_number']}" if request.get("task_id") else "")
          + f", version {request['dag_version'][:12]}", flush=True)
    try:
        fn = find_callable(request)
        fn(request["context"])
    except BaseException as exc:
        traceback.print_exc()
        text = f"{type(exc).__name__}: {secrets.mask(str(exc))}".strip().splitlines()
        print(FAILED_PREFIX + (text[0] if text else type(exc).__name__)[:500], flush=True)
        _mask_log(request.get("log_path"))
        return 1
    print("[ledger] callback ok", flush=True)
    _mask_log(request.get("log_path"))
    return 0


def _mask_log(path: str | None) -> None:
    """Secrets the call read (Variable.get, get_connection) become *** in its log, as in a try's."""
    if path is None or not secrets.secrets_seen():
        return
    sys.stdout.flush()
    secrets.mask_file(path)


if __name__ == "__main__":
    sys.exit(main())
