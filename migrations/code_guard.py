"""What a downgrade would lose of the code DAG versions ran, and the guard the lossy migrations share.

Below 0006 the captured code of each version (its DAG file and helper modules) and the record of which
version each try ran are dropped; below 0003 the DAG file text of versions from before code was captured.
Afterwards nothing could say what code those versions' tries ran. `ledger db downgrade` refuses such a
downgrade unless given --force (cli/db.py checks before any migration runs, so a refusal changes nothing);
the migrations check again (a plain `alembic downgrade`), and when forced they record one `code_dropped`
event per DAG naming the versions whose code went, so that `ledger runs show` can say the code is unknown
rather than guess.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

CAPTURED = "0006"  # its downgrade drops the captured code and task_try.dag_version
LEGACY_SOURCE = "0003"  # its downgrade drops dag_version.source_code
FORCE = "ledger.drop_code"  # Config.attributes keys the CLI sets
NOW = "ledger.now"
ACTOR = "ledger.actor"
EVENT = "code_dropped"


@dataclass(frozen=True, slots=True)
class CodeLoss:
    versions: dict[str, list[str]]  # dag_id -> version hashes whose code would be dropped
    tries: int  # tries whose record of the version they ran would be dropped

    @property
    def version_count(self) -> int:
        return sum(len(v) for v in self.versions.values())

    def describe(self) -> str:
        tries = f" and the record of which version {self.tries} tries ran" if self.tries else ""
        return f"the code of {self.version_count} DAG version(s){tries}"


def code_loss(conn: sa.Connection, undone: Collection[str]) -> CodeLoss | None:
    """What undoing the migrations `undone` drops of the code versions ran (None: nothing)."""
    kept: list[sa.ColumnElement[bool]] = []
    if CAPTURED in undone:
        kept.append(sa.column("code_snapshot").is_not(None))
    if LEGACY_SOURCE in undone:
        kept.append(sa.column("source_code").is_not(None))
    if not kept:
        return None
    rows: list[Any] = list(conn.execute(sa.select(sa.column("dag_id"), sa.column("version_hash"))
                                        .select_from(sa.table("dag_version")).where(sa.or_(*kept))
                                        .order_by(sa.column("dag_id"), sa.column("version_hash"))))
    tries = 0
    if CAPTURED in undone:
        tries = conn.execute(sa.select(sa.func.count()).select_from(sa.table("task_try"))
                             .where(sa.column("dag_version").is_not(None))).scalar_one()
    if not rows and not tries:
        return None
    versions: dict[str, list[str]] = {}
    for dag_id, version_hash in rows:
        versions.setdefault(dag_id, []).append(version_hash)
    return CodeLoss(versions, tries)


def refuse_or_record(revision: str) -> None:
    """In migration `revision`'s downgrade, before it drops code: refuse when code would be lost and the
    downgrade was not forced; when forced, record what is lost as events."""
    from alembic import context, op

    from ledger.models.base import UtcDateTime

    conn = op.get_bind()
    loss = code_loss(conn, {revision})
    if loss is None:
        return
    attributes: dict[str, Any] = context.config.attributes
    if not attributes.get(FORCE):
        raise RuntimeError(f"refusing to undo migration {revision}: it drops {loss.describe()}; "
                           "`ledger db downgrade --force` drops them and records it")
    at = attributes.get(NOW) or datetime.now(UTC)
    actor = attributes.get(ACTOR) or "alembic"
    event = sa.table("event", sa.column("at", UtcDateTime(timezone=True)), sa.column("kind", sa.String),
                     sa.column("actor", sa.String), sa.column("dag_id", sa.String), sa.column("details", sa.JSON))
    conn.execute(sa.insert(event), [
        {"at": at, "kind": EVENT, "actor": actor, "dag_id": dag_id,
         "details": {"versions": hashes, "migration": revision, **({"tries": loss.tries} if loss.tries else {})}}
        for dag_id, hashes in loss.versions.items()])
