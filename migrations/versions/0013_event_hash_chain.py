"""event hash chains: each event is a link of its DAG's chain (decision 0260); the history before is chained as
it is, and each chain that has history gets one `audit_started` event recording where verified history begins

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 23:30:00
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from ledger.core.audit import GENESIS, STOPPED, ZERO, body_json, chain_of, event_hash, run_cover, timestamp
from ledger.migrations.code_guard import ACTOR, NOW
from ledger.models.base import UtcDateTime

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

DROPS = ("the events' hash chains (columns seq, prev_hash, covers and hash of event, table event_chain); the events "
         "stay, and each chain gets an `audit_stopped` event naming its head")
"""What the downgrade drops, as `ledger db downgrade` says it."""

_EVENT = sa.table("event", sa.column("id", sa.Integer), sa.column("at", UtcDateTime(timezone=True)),
                  sa.column("kind", sa.String), sa.column("actor", sa.String), sa.column("dag_id", sa.String),
                  sa.column("run_id", sa.Integer), sa.column("details", sa.JSON), sa.column("seq", sa.Integer),
                  sa.column("prev_hash", sa.String), sa.column("covers", sa.JSON), sa.column("hash", sa.String))
_UNCHAINED = sa.table("event", sa.column("at", UtcDateTime(timezone=True)), sa.column("kind", sa.String),
                      sa.column("actor", sa.String), sa.column("dag_id", sa.String), sa.column("run_id", sa.Integer),
                      sa.column("details", sa.JSON))
"""The event table below this migration."""
_CHAIN = sa.table("event_chain", sa.column("chain", sa.String), sa.column("head_id", sa.Integer),
                  sa.column("head_hash", sa.String), sa.column("length", sa.Integer))
_RUN = sa.table("dag_run", sa.column("id", sa.Integer), sa.column("dag_id", sa.String), sa.column("state", sa.String),
                sa.column("previous_run_id", sa.Integer), sa.column("version_hash", sa.String))
_VERSION = sa.table("dag_version", sa.column("dag_id", sa.String), sa.column("version_hash", sa.String),
                    sa.column("code_snapshot", sa.String))


def upgrade() -> None:
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.add_column(sa.Column('seq', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('prev_hash', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('covers', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('hash', sa.String(length=64), nullable=True))
    op.create_table(
        'event_chain',
        sa.Column('chain', sa.String(length=250), nullable=False),
        sa.Column('head_id', sa.Integer(), nullable=True),
        sa.Column('head_hash', sa.String(length=64), nullable=False),
        sa.Column('length', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('chain', name=op.f('pk_event_chain')),
    )
    _chain_the_history(op.get_bind())


def _chain_the_history(conn: Any) -> None:
    attributes: dict[str, Any] = context.config.attributes
    at = attributes.get(NOW) or datetime.now(UTC)
    actor = attributes.get(ACTOR) or "ledger db upgrade"
    runs: dict[str, dict[str, Any]] = {}
    found = conn.execute(sa.select(_RUN.c.id, _RUN.c.dag_id, _RUN.c.state, _RUN.c.previous_run_id, _RUN.c.version_hash,
                                   _VERSION.c.code_snapshot)
                         .select_from(_RUN.outerjoin(_VERSION, sa.and_(_VERSION.c.dag_id == _RUN.c.dag_id,
                                                                      _VERSION.c.version_hash == _RUN.c.version_hash)))
                         .order_by(_RUN.c.id))
    for run_id, dag_id, state, previous, version, code in found:
        runs.setdefault(dag_id, {})[str(run_id)] = run_cover(run_id, state, previous, version, code)
    chains = {chain_of(d) for (d,) in conn.execute(sa.select(_EVENT.c.dag_id).distinct())} | set(runs)
    for chain in sorted(chains):
        dag_id = None if chain == "" else chain
        where = _EVENT.c.dag_id.is_(None) if dag_id is None else _EVENT.c.dag_id == dag_id
        prev, seq, links = ZERO, 0, []
        for row in conn.execute(sa.select(_EVENT.c.id, _EVENT.c.at, _EVENT.c.kind, _EVENT.c.actor, _EVENT.c.run_id,
                                          _EVENT.c.details).where(where).order_by(_EVENT.c.id)):
            seq += 1
            prev_hash, prev = prev, event_hash(prev, None, body_json(row.at, row.kind, row.actor, dag_id, row.run_id,
                                                                     row.details))
            links.append({"eid": row.id, "s": seq, "p": prev_hash, "h": prev})
        if links:
            conn.execute(_EVENT.update().where(_EVENT.c.id == sa.bindparam("eid"))
                         .values(seq=sa.bindparam("s"), prev_hash=sa.bindparam("p"), hash=sa.bindparam("h")), links)
        covers = {"runs": runs.get(chain, {})} if dag_id is not None else None
        details = {"events_before": seq, "runs_before": len(runs.get(chain, {}))}
        genesis = event_hash(prev, covers, body_json(timestamp(at), GENESIS, actor, dag_id, None, details))
        head_id = conn.execute(sa.insert(_EVENT).values(
            at=at, kind=GENESIS, actor=actor, dag_id=dag_id, run_id=None, details=details, seq=seq + 1, prev_hash=prev,
            covers=covers, hash=genesis).returning(_EVENT.c.id)).scalar_one()
        conn.execute(sa.insert(_CHAIN).values(chain=chain, head_id=head_id, head_hash=genesis, length=seq + 1))


def downgrade() -> None:
    conn = op.get_bind()
    heads = conn.execute(sa.select(_CHAIN.c.chain, _CHAIN.c.head_id, _CHAIN.c.head_hash, _CHAIN.c.length)
                         .order_by(_CHAIN.c.chain)).all()
    op.drop_table('event_chain')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_column('hash')
        batch_op.drop_column('covers')
        batch_op.drop_column('prev_hash')
        batch_op.drop_column('seq')
    # the trace of the drop (decision 0359): upgrading again chains it with the history, and verify names it
    attributes: dict[str, Any] = context.config.attributes
    at = attributes.get(NOW) or datetime.now(UTC)
    actor = attributes.get(ACTOR) or "ledger db downgrade"
    if heads:
        conn.execute(sa.insert(_UNCHAINED), [
            {"at": at, "kind": STOPPED, "actor": actor, "dag_id": None if chain == "" else chain, "run_id": None,
             "details": {"head_id": head_id, "head_hash": head_hash, "length": length}}
            for chain, head_id, head_hash, length in heads])
