"""Bringing the database up to date with parsed DAG files (versions, active DAGs, import errors)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from ledger.sdk.dag import DAG
from ledger.sdk.describe import version_of
from ledger.store import dags as dag_store


def register_dag(session: Session, dag: DAG, *, now: datetime, actor: str) -> str:
    version_hash, text = version_of(dag)
    dag_store.register(session, dag_id=dag.dag_id, fileloc=dag.fileloc or "?", version_hash=version_hash,
                       structure=text, schedule=dag.schedule.summary(), timezone=dag.timezone, now=now,
                       actor=actor, source_code=dag.source_code)
    return version_hash
