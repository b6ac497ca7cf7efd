"""datasets: the events producer tries record, the events each consumer run consumed, and backfills that send
their rewrites downstream

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26 17:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.models.base import UtcDateTime

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'dataset_event',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('dataset', sa.String(length=500), nullable=False),
        sa.Column('partition', sa.String(length=100), nullable=True),
        sa.Column('alias', sa.String(length=500), nullable=True),
        sa.Column('extra', sa.JSON(), nullable=True),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('dag_id', sa.String(length=250), nullable=False),
        sa.Column('task_id', sa.String(length=250), nullable=False),
        sa.Column('try_number', sa.Integer(), nullable=False),
        sa.Column('downstream', sa.Boolean(), nullable=False),
        sa.Column('created_at', UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['dag_run.id'], name=op.f('fk_dataset_event_run_id_dag_run')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_dataset_event')),
    )
    op.create_index('ix_dataset_event_dataset_partition', 'dataset_event', ['dataset', 'partition'])
    op.create_index('ix_dataset_event_run_id', 'dataset_event', ['run_id'])
    op.create_table(
        'dataset_consumed',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('dag_id', sa.String(length=250), nullable=False),
        sa.Column('event_id', sa.Integer(), nullable=False),
        sa.Column('cause', sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['dag_run.id'], name=op.f('fk_dataset_consumed_run_id_dag_run')),
        sa.ForeignKeyConstraint(['event_id'], ['dataset_event.id'],
                                name=op.f('fk_dataset_consumed_event_id_dataset_event')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_dataset_consumed')),
    )
    op.create_index('ix_dataset_consumed_run_id', 'dataset_consumed', ['run_id'])
    op.create_index('ix_dataset_consumed_event_id', 'dataset_consumed', ['event_id'])
    op.create_index(op.f('ix_dataset_consumed_dag_id'), 'dataset_consumed', ['dag_id'])
    with op.batch_alter_table('backfill', schema=None) as batch_op:
        batch_op.add_column(sa.Column('downstream', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('backfill', schema=None) as batch_op:
        batch_op.drop_column('downstream')
    op.drop_table('dataset_consumed')
    op.drop_table('dataset_event')
