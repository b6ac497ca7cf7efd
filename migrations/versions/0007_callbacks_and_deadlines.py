"""callbacks: one row per call of a callback or notifier, with its outcome; the run's missed deadline; a DAG
paused with --stop-queued; values passed between tasks (xcom) and each try's rendered templates; variables and connections

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 02:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.models.base import UtcDateTime

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'callback',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('kind', sa.String(length=32), nullable=False),
        sa.Column('dag_id', sa.String(length=250), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('task_id', sa.String(length=250), nullable=True),
        sa.Column('try_number', sa.Integer(), nullable=True),
        sa.Column('dag_version', sa.String(length=64), nullable=False),
        sa.Column('position', sa.Integer(), nullable=False),
        sa.Column('target', sa.String(length=500), nullable=False),
        sa.Column('state', sa.String(length=16), nullable=False),
        sa.Column('context', sa.JSON(), nullable=False),
        sa.Column('created_at', UtcDateTime(timezone=True), nullable=False),
        sa.Column('started_at', UtcDateTime(timezone=True), nullable=True),
        sa.Column('ended_at', UtcDateTime(timezone=True), nullable=True),
        sa.Column('job_id', sa.Integer(), nullable=True),
        sa.Column('message', sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(['run_id'], ['dag_run.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_callback_state', 'callback', ['state'])
    op.create_index('ix_callback_run_id', 'callback', ['run_id'])
    with op.batch_alter_table('dag_run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('deadline_missed_at', UtcDateTime(timezone=True), nullable=True))
    with op.batch_alter_table('dag', schema=None) as batch_op:
        batch_op.add_column(sa.Column('hold_queued', sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        'xcom',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('run_id', sa.Integer(), nullable=False),
        sa.Column('task_id', sa.String(length=250), nullable=False),
        sa.Column('try_number', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=250), nullable=False),
        sa.Column('value', sa.JSON(), nullable=True),
        sa.Column('created_at', UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['run_id'], ['dag_run.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_xcom_run_id', 'xcom', ['run_id'])
    with op.batch_alter_table('task_try', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rendered', sa.JSON(), nullable=True))
    op.create_table(
        'variable',
        sa.Column('key', sa.String(length=250), nullable=False),
        sa.Column('value_encrypted', sa.Text(), nullable=False),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('updated_at', UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('key'),
    )
    op.create_table(
        'connection',
        sa.Column('conn_id', sa.String(length=250), nullable=False),
        sa.Column('conn_type', sa.String(length=100), nullable=False),
        sa.Column('host', sa.String(length=500), nullable=True),
        sa.Column('port', sa.Integer(), nullable=True),
        sa.Column('login', sa.String(length=500), nullable=True),
        sa.Column('schema', sa.String(length=500), nullable=True),
        sa.Column('password_encrypted', sa.Text(), nullable=True),
        sa.Column('extra_encrypted', sa.Text(), nullable=True),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('updated_at', UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('conn_id'),
    )


def downgrade() -> None:
    op.drop_table('connection')
    op.drop_table('variable')
    with op.batch_alter_table('task_try', schema=None) as batch_op:
        batch_op.drop_column('rendered')
    op.drop_index('ix_xcom_run_id', table_name='xcom')
    op.drop_table('xcom')
    with op.batch_alter_table('dag', schema=None) as batch_op:
        batch_op.drop_column('hold_queued')
    with op.batch_alter_table('dag_run', schema=None) as batch_op:
        batch_op.drop_column('deadline_missed_at')
    op.drop_index('ix_callback_run_id', table_name='callback')
    op.drop_index('ix_callback_state', table_name='callback')
    op.drop_table('callback')
