"""Each run's prior successful run, for Airflow's `prev_*_success` template names (ledger/sdk/templates.py).

The prior successful run of a run is the DAG's run with the latest logical date before the run's own whose state
is `success` now: an overridden run never counts (its state is `overridden`: the run that replaced it is the
date's truth, and counts by its own state), and a run of any type counts (scheduled, backfill, manual), as
Airflow's `get_previous_dagrun(state=SUCCESS)` takes any run before the logical date (decision 176).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, aliased

from ledger.core.states import RunState
from ledger.models import DagRun
from ledger.store.hot import Hot

PriorSuccess = tuple[str, str, str | None, str | None]  # its data interval's start and end, its start and end (ISO)

_RUN, _PRIOR, _FOUND = aliased(DagRun), aliased(DagRun), aliased(DagRun)
_NEWEST_PRIOR = (select(_PRIOR.id)
                 .where(_PRIOR.dag_id == _RUN.dag_id, _PRIOR.logical_date < _RUN.logical_date,
                        _PRIOR.state == RunState.SUCCESS.value)
                 .order_by(_PRIOR.logical_date.desc()).limit(1).correlate(_RUN).scalar_subquery())
_PRIOR_SUCCESSES = (select(_RUN.id, _FOUND.data_interval_start, _FOUND.data_interval_end, _FOUND.started_at,
                              _FOUND.ended_at)
                       .join(_FOUND, _FOUND.id == _NEWEST_PRIOR)
                       .where(_RUN.id.in_(bindparam("ids", expanding=True))))
_PRIOR_SUCCESSES_HOT = Hot(_PRIOR_SUCCESSES)  # once per loop that queues tries: on SQLite, on the DB-API cursor


def prior_successes(session: Session, run_ids: Collection[int]) -> dict[int, PriorSuccess]:
    """Run id -> its prior successful run's interval and times, for the runs that have one (one statement)."""
    if not run_ids:
        return {}
    return {i: (_iso(start), _iso(end), _iso(began) if began else None, _iso(ended) if ended else None)
            for i, start, end, began, ended in _PRIOR_SUCCESSES_HOT.rows(session, {"ids": list(run_ids)})}


def _iso(value: datetime | str) -> str:
    """A timestamp as an aware UTC ISO string: from SQLite's stored text (Hot's rows, unprocessed; stored as UTC),
    or from the aware datetime SQLAlchemy gives elsewhere."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC).isoformat()
    return value.astimezone(UTC).isoformat()
