"""create the ledger schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 03:51:34.175245
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import ledger.models.base

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('backfill',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('range_start', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('range_end', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('reprocess', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('requested_by', sa.String(length=250), nullable=False),
    sa.Column('backwards', sa.Boolean(), nullable=False),
    sa.Column('submit_only', sa.Boolean(), nullable=False),
    sa.Column('max_active_runs', sa.Integer(), nullable=True),
    sa.Column('conf', sa.JSON(), nullable=True),
    sa.Column('created_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('ended_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_backfill'))
    )
    with op.batch_alter_table('backfill', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_backfill_dag_id'), ['dag_id'], unique=False)

    op.create_table('dag',
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('fileloc', sa.Text(), nullable=False),
    sa.Column('current_version', sa.String(length=64), nullable=True),
    sa.Column('schedule', sa.String(length=250), nullable=False),
    sa.Column('timezone', sa.String(length=64), nullable=False),
    sa.Column('is_paused', sa.Boolean(), nullable=False),
    sa.Column('is_active', sa.Boolean(), nullable=False),
    sa.Column('last_parsed_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('dag_id', name=op.f('pk_dag'))
    )
    op.create_table('dag_file',
    sa.Column('fileloc', sa.Text(), nullable=False),
    sa.Column('content_hash', sa.Text(), nullable=False),
    sa.Column('last_parsed_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('fileloc', name=op.f('pk_dag_file'))
    )
    op.create_table('event',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('actor', sa.String(length=250), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=True),
    sa.Column('run_id', sa.Integer(), nullable=True),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_event'))
    )
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.create_index('ix_event_dag_id', ['dag_id'], unique=False)
        batch_op.create_index('ix_event_run_id', ['run_id'], unique=False)

    op.create_table('import_error',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fileloc', sa.Text(), nullable=False),
    sa.Column('error', sa.Text(), nullable=False),
    sa.Column('at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_import_error')),
    sa.UniqueConstraint('fileloc', name=op.f('uq_import_error_fileloc'))
    )
    op.create_table('job',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_type', sa.String(length=30), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('hostname', sa.String(length=250), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('started_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('latest_heartbeat', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('ended_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_job'))
    )
    op.create_table('pool',
    sa.Column('name', sa.String(length=250), nullable=False),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_pool'))
    )
    op.create_table('dag_run',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('logical_date', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('data_interval_start', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('data_interval_end', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('run_type', sa.String(length=16), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('previous_run_id', sa.Integer(), nullable=True),
    sa.Column('overridden_by', sa.Integer(), nullable=True),
    sa.Column('version_hash', sa.String(length=64), nullable=False),
    sa.Column('schedule', sa.String(length=250), nullable=False),
    sa.Column('backfill_id', sa.Integer(), nullable=True),
    sa.Column('lock_holder', sa.Integer(), nullable=True),
    sa.Column('conf', sa.JSON(), nullable=True),
    sa.Column('created_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('started_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('ended_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('overridden_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['backfill_id'], ['backfill.id'], name=op.f('fk_dag_run_backfill_id_backfill')),
    sa.ForeignKeyConstraint(['overridden_by'], ['dag_run.id'], name=op.f('fk_dag_run_overridden_by_dag_run')),
    sa.ForeignKeyConstraint(['previous_run_id'], ['dag_run.id'], name=op.f('fk_dag_run_previous_run_id_dag_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dag_run'))
    )
    with op.batch_alter_table('dag_run', schema=None) as batch_op:
        batch_op.create_index('ix_dag_run_backfill_id', ['backfill_id'], unique=False)
        batch_op.create_index('ix_dag_run_dag_id_logical_date', ['dag_id', 'logical_date'], unique=False)
        batch_op.create_index('ix_dag_run_state', ['state'], unique=False)
        batch_op.create_index('uq_dag_run_live_date', ['dag_id', 'logical_date'], unique=True, sqlite_where=sa.text("state != 'overridden'"), postgresql_where=sa.text("state != 'overridden'"))

    op.create_table('dag_version',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('version_hash', sa.String(length=64), nullable=False),
    sa.Column('structure', sa.Text(), nullable=False),
    sa.Column('created_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['dag_id'], ['dag.dag_id'], name=op.f('fk_dag_version_dag_id_dag')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dag_version')),
    sa.UniqueConstraint('dag_id', 'version_hash', name=op.f('uq_dag_version_dag_id_version_hash'))
    )
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dag_version_dag_id'), ['dag_id'], unique=False)

    op.create_table('task_instance',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('task_id', sa.String(length=250), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('try_number', sa.Integer(), nullable=False),
    sa.Column('max_tries', sa.Integer(), nullable=False),
    sa.Column('priority_weight', sa.Integer(), nullable=False),
    sa.Column('pool', sa.String(length=250), nullable=False),
    sa.Column('queued_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('started_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('ended_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('next_try_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.Column('hostname', sa.String(length=250), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['dag_run.id'], name=op.f('fk_task_instance_run_id_dag_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_instance')),
    sa.UniqueConstraint('run_id', 'task_id', name=op.f('uq_task_instance_run_id_task_id'))
    )
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.create_index('ix_task_instance_state', ['state'], unique=False)

    op.create_table('task_try',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('task_instance_id', sa.Integer(), nullable=False),
    sa.Column('try_number', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.Column('hostname', sa.String(length=250), nullable=True),
    sa.Column('started_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.Column('ended_at', ledger.models.base.UtcDateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['task_instance_id'], ['task_instance.id'], name=op.f('fk_task_try_task_instance_id_task_instance')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_try')),
    sa.UniqueConstraint('task_instance_id', 'try_number', name=op.f('uq_task_try_task_instance_id_try_number'))
    )



def downgrade() -> None:

    op.drop_table('task_try')
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.drop_index('ix_task_instance_state')

    op.drop_table('task_instance')
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dag_version_dag_id'))

    op.drop_table('dag_version')
    with op.batch_alter_table('dag_run', schema=None) as batch_op:
        batch_op.drop_index('uq_dag_run_live_date', sqlite_where=sa.text("state != 'overridden'"), postgresql_where=sa.text("state != 'overridden'"))
        batch_op.drop_index('ix_dag_run_state')
        batch_op.drop_index('ix_dag_run_dag_id_logical_date')
        batch_op.drop_index('ix_dag_run_backfill_id')

    op.drop_table('dag_run')
    op.drop_table('pool')
    op.drop_table('job')
    op.drop_table('import_error')
    with op.batch_alter_table('event', schema=None) as batch_op:
        batch_op.drop_index('ix_event_run_id')
        batch_op.drop_index('ix_event_dag_id')

    op.drop_table('event')
    op.drop_table('dag_file')
    op.drop_table('dag')
    with op.batch_alter_table('backfill', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_backfill_dag_id'))

    op.drop_table('backfill')

