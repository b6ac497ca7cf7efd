"""Bringing the database up to date with parsed DAG files (versions, active DAGs, import errors)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from ledger.dag import DAG
from ledger.dagbag import DagBag
from ledger.store import dags as dag_store
from ledger.versions import version_of


def register_dag(session: Session, dag: DAG, *, now: datetime, actor: str) -> str:
    version_hash, text = version_of(dag)
    dag_store.register(session, dag_id=dag.dag_id, fileloc=dag.fileloc or "?", version_hash=version_hash,
                       structure=text, schedule=dag.schedule.summary(), timezone=dag.timezone, now=now,
                       actor=actor)
    return version_hash


def sync_bag(session: Session, bag: DagBag, *, now: datetime, actor: str) -> None:
    """Register every DAG of the bag, record its import errors, retire DAGs that are gone."""
    for dag in bag.dags.values():
        register_dag(session, dag, now=now, actor=actor)
    for fileloc, error in bag.errors.items():
        dag_store.set_import_error(session, fileloc, error, now)
    dag_store.clear_import_errors(
        session, [e.fileloc for e in dag_store.import_errors(session) if e.fileloc not in bag.errors])
    failed = set(bag.errors)
    # a DAG whose file failed to import keeps its last good version and stays active
    present = set(bag.dags) | {d.dag_id for d in dag_store.listing(session) if d.fileloc in failed}
    dag_store.deactivate_missing(session, present=present)
