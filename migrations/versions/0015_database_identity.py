"""database_identity: a random identity made once per database, which the Celery task ids of its tries carry
(`ledger-<identity>-<ti>-<try>`), so that a database made again against the same Redis (its ids start at 1 again)
never takes the keys another database's tries left there (their claims, states, leases, logs) for its own
(decision 0344). The task instances already there keep their task ids (`legacy_through`), so that a job that
adopts their tries after the upgrade finds them where their workers write

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 09:50:00
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None

DROPS = ("the database's identity (table database_identity; upgrading again makes a new one, and the task instances "
         "there by then get Celery task ids without an identity)")
"""What the downgrade drops, as `ledger db downgrade` says it."""


def upgrade() -> None:
    table = op.create_table(
        'database_identity',
        sa.Column('identity', sa.String(length=32), nullable=False),
        sa.Column('legacy_through', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('identity', name=op.f('pk_database_identity')),
    )
    assert table is not None
    newest = op.get_bind().scalar(sa.select(sa.func.max(sa.table("task_instance", sa.column("id", sa.Integer)).c.id)))
    op.execute(table.insert().values(identity=secrets.token_hex(4), legacy_through=newest or 0))


def downgrade() -> None:
    op.drop_table('database_identity')
