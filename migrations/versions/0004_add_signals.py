"""add signals: signal, signal_key (the per-key version counter) and signal_cursor

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 15:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import ledger.models.base

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('signal',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.Column('sender', sa.String(length=250), nullable=False),
    sa.Column('sent_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_signal')),
    sa.UniqueConstraint('key', 'version', name=op.f('uq_signal_key_version'))
    )
    op.create_table('signal_key',
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_signal_key'))
    )
    op.create_table('signal_cursor',
    sa.Column('listener', sa.String(length=250), nullable=False),
    sa.Column('key', sa.String(length=200), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('updated_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('listener', 'key', name=op.f('pk_signal_cursor'))
    )


def downgrade() -> None:
    op.drop_table('signal_cursor')
    op.drop_table('signal_key')
    op.drop_table('signal')
