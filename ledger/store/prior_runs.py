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
                              _FOUND.ended_at, _FOUND.logical_date)
                       .join(_FOUND, _FOUND.id == _NEWEST_PRIOR)
                       .where(_RUN.id.in_(bindparam("ids", expanding=True))))
_PRIOR_SUCCESSES_HOT = Hot(_PRIOR_SUCCESSES)  # once per loop that queues tries: on SQLite, on the DB-API cursor


def prior_successes(session: Session, run_ids: Collection[int]) -> dict[int, PriorSuccess]:
    """Run id -> its prior successful run's interval and times, for the runs that have one (one statement)."""
    return {i: found for i, (_date, found) in dated_prior_successes(session, run_ids).items()}


def dated_prior_successes(session: Session, run_ids: Collection[int]) -> dict[int, tuple[float, PriorSuccess]]:
    """The same, each with the prior successful run's logical date (a timestamp), for a job that keeps them
    (scheduler/loop/run_facts.py): a run that succeeds later is the prior success of the runs after it only if it
    is newer than the one each has."""
    if not run_ids:
        return {}
    return {i: (_utc(date).timestamp(), as_prior_success(start, end, began, ended))
            for i, start, end, began, ended, date in _PRIOR_SUCCESSES_HOT.rows(session, {"ids": list(run_ids)})}


def as_prior_success(start: datetime | str, end: datetime | str, began: datetime | str | None,
                     ended: datetime | str | None) -> PriorSuccess:
    """A run's interval and times as a later run's prior success carries them (aware UTC ISO strings)."""
    return (_iso(start), _iso(end), _iso(began) if began else None, _iso(ended) if ended else None)


def _utc(value: datetime | str) -> datetime:
    """A timestamp as an aware UTC datetime: from SQLite's stored text (Hot's rows, unprocessed; stored as UTC), or
    from the aware datetime SQLAlchemy gives elsewhere."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _iso(value: datetime | str) -> str:
    return _utc(value).isoformat()
