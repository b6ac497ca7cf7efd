"""ended_session: a web session signed out before its cookie expires (decision 0352). The session cookie is signed,
not stored, so signing out only deleted it from the browser that signed out: a copy of it (another tab's request
in flight, a proxy's log, a shared machine's history) stayed valid for the rest of its 12 hours. The SHA-256 of a
signed-out cookie is kept here until that cookie would have expired, and a cookie found here signs nobody in

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.models.base import UtcDateTime

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

DROPS = "the web sessions signed out before they expired (table ended_session; their cookies sign in again)"
"""What the downgrade drops, as `ledger db downgrade` says it."""


def upgrade() -> None:
    op.create_table(
        'ended_session',
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('expires_at', UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('digest', name=op.f('pk_ended_session')),
    )
    with op.batch_alter_table('ended_session', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_ended_session_expires_at'), ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('ended_session', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_ended_session_expires_at'))
    op.drop_table('ended_session')
