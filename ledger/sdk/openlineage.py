"""A try's OpenLineage identity, for the Spark applications it starts: the OpenLineage Spark listener's parent and
root properties that join the application's lineage to the try's run and the DAG run (docs/spark.md, OpenLineage).

    spark-submit $(python -m ledger.sdk.openlineage) job.py      # in a BashTask: --conf K=V for each property

Read from the try's environment (LEDGER_DAG_ID, LEDGER_RUN_ID, LEDGER_TASK_ID, LEDGER_TRY_NUMBER, LEDGER_MAP_INDEX)
and OPENLINEAGE_NAMESPACE (default `default`), as the scheduler's relay names the same try.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping

from ledger.core.openlineage_ids import run_uuid


def spark_properties(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `spark.openlineage.*` parent and root properties of the try whose environment `env` is (default: this
    process's); KeyError naming the variable outside a try."""
    env = os.environ if env is None else env
    namespace = env.get("OPENLINEAGE_NAMESPACE") or "default"
    dag_id, run_id, task_id = env["LEDGER_DAG_ID"], env["LEDGER_RUN_ID"], env["LEDGER_TASK_ID"]
    try_id = run_uuid(namespace, dag_id, run_id, task_id, int(env.get("LEDGER_MAP_INDEX", "-1")),
                      int(env["LEDGER_TRY_NUMBER"]))
    return {"spark.openlineage.parentJobNamespace": namespace, "spark.openlineage.parentJobName": f"{dag_id}.{task_id}",
            "spark.openlineage.parentRunId": try_id,
            "spark.openlineage.rootParentJobNamespace": namespace, "spark.openlineage.rootParentJobName": dag_id,
            "spark.openlineage.rootParentRunId": run_uuid(namespace, dag_id, run_id)}


def main() -> int:
    try:
        props = spark_properties()
    except KeyError as exc:
        print(f"{exc.args[0]} is not set: run this inside a ledger try", file=sys.stderr)
        return 1
    print(" ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in props.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
