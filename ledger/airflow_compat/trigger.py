"""Airflow's TriggerDagRunOperator: a manual run of another DAG, created through ledger's own trigger
(ledger/services/operations.py: the run is spliced into that DAG's timeline, its params checked against the conf) with
the triggering try as the event's actor, so that the record says which try caused the run.

The try reaches the ledger through the client of task code (ledger/sdk/ledger_client.py), as a task sending a
signal does: the database where the try has it, ledger's webserver on a Celery worker; one transaction either way.
`ledger dags test` records nothing: there the operator says what it would trigger and succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar

import pendulum

from ledger.airflow_compat.graph import AirflowException, DagRunAlreadyExists
from ledger.airflow_compat.operators import BaseOperator
from ledger.core.errors import LedgerError, SkipTask, TimelineConflict
from ledger.infra.worker_client import try_actor
from ledger.sdk.ledger_client import LedgerClient, client

TEST_RUN_TYPE = "test"


class TriggerDagRunOperator(BaseOperator):
    """Triggers a run of `trigger_dag_id` (see the module docstring). `logical_date` (Airflow 2's
    `execution_date`) defaults to now; `reset_dag_run=True` overrides a live run at that date, else an existing
    one fails the try (or skips it with `skip_when_already_exists`). `wait_for_completion` polls the run every
    `poke_interval` seconds until it ends: success when its state is in `allowed_states`, failure when in
    `failed_states`. The new run's id is passed on as `trigger_run_id`."""

    template_fields: ClassVar[tuple[str, ...]] = ("trigger_dag_id", "trigger_run_id", "logical_date", "conf")

    def __init__(self, *, trigger_dag_id: str, trigger_run_id: str | None = None,
                 conf: Mapping[str, Any] | None = None, logical_date: str | datetime | None = None,
                 execution_date: str | datetime | None = None, reset_dag_run: bool = False,
                 wait_for_completion: bool = False, poke_interval: float = 60,
                 allowed_states: Sequence[str] | None = None, failed_states: Sequence[str] | None = None,
                 skip_when_already_exists: bool = False, deferrable: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trigger_dag_id = trigger_dag_id
        self.trigger_run_id = trigger_run_id
        self.conf = dict(conf or {})
        given = logical_date if logical_date is not None else execution_date
        self.logical_date = given.isoformat() if isinstance(given, datetime) else given
        self.reset_dag_run = reset_dag_run
        self.wait_for_completion = wait_for_completion
        self.poke_interval = poke_interval
        self.allowed_states = [str(s) for s in (allowed_states or ["success"])]
        self.failed_states = [str(s) for s in (failed_states or ["failed"])]
        self.skip_when_already_exists = skip_when_already_exists

    def execute(self, context: Mapping[str, Any]) -> Any:
        ti = context["ti"]
        parsed = pendulum.parse(self.logical_date) if self.logical_date else pendulum.now("UTC")
        if not isinstance(parsed, pendulum.DateTime):
            raise AirflowException(f"logical_date {self.logical_date!r} is not a date and time")
        at = parsed
        if context.get("run_type") == TEST_RUN_TYPE:
            self.log.info("a test run records nothing: it would trigger %s at %s with conf %s", self.trigger_dag_id,
                          at.isoformat(), self.conf)
            return None
        try:
            ledger = client()
            done = ledger.trigger_run(self.trigger_dag_id, at, self.conf, replace=self.reset_dag_run,
                                      actor=try_actor(ti.dag_id, ti.task_id, ti.run_id, ti.try_number))
        except TimelineConflict as exc:
            if self.skip_when_already_exists:
                raise SkipTask(f"a run of {self.trigger_dag_id} exists at {at.isoformat()}: {exc}") from None
            raise DagRunAlreadyExists(str(exc)) from None
        except LedgerError as exc:
            raise AirflowException(f"cannot trigger {self.trigger_dag_id}: {exc}") from None
        run_id, logical = done.run_id, done.logical_date
        self.log.info("triggered run %s of %s at %s%s", run_id, self.trigger_dag_id, logical.isoformat(),
                      f" (run {done.replaced_run_id} overridden)" if done.replaced_run_id is not None else "")
        ti.xcom_push("trigger_run_id", str(run_id))
        ti.xcom_push("trigger_logical_date_iso", logical.isoformat())
        if self.wait_for_completion:
            self._wait(ledger, run_id)
        return None

    def _wait(self, ledger: LedgerClient, run_id: int) -> None:
        while True:
            try:
                state = ledger.run_state(run_id)
            except LedgerError as exc:
                raise AirflowException(f"cannot read run {run_id} of {self.trigger_dag_id}: {exc}") from None
            if state in self.failed_states:
                raise AirflowException(f"run {run_id} of {self.trigger_dag_id} ended {state}")
            if state in self.allowed_states:
                self.log.info("run %s of %s ended %s", run_id, self.trigger_dag_id, state)
                return
            self.log.info("waiting for run %s of %s (%s)", run_id, self.trigger_dag_id, state)
            time.sleep(self.poke_interval)
