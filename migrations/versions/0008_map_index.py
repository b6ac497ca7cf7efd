"""dynamic task mapping: task instances (and the values their tries passed on) get a map_index (-1: not mapped);
a run holds one task instance per (task, map index)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 19:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    # SQLite cannot change a unique key in place: batch mode copies the table (existing rows get map_index -1)
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.add_column(sa.Column('map_index', sa.Integer(), server_default=sa.text('-1'), nullable=False))
        batch_op.drop_constraint('uq_task_instance_run_id_task_id', type_='unique')
        batch_op.create_unique_constraint('uq_task_instance_run_id_task_id_map_index',
                                          ['run_id', 'task_id', 'map_index'])
    with op.batch_alter_table('xcom', schema=None) as batch_op:
        batch_op.add_column(sa.Column('map_index', sa.Integer(), server_default=sa.text('-1'), nullable=False))


def downgrade() -> None:
    # refused while a run has mapped instances: folding them into one row per task would lose history
    mapped = op.get_bind().execute(sa.text('SELECT count(*) FROM task_instance WHERE map_index >= 0')).scalar()
    if mapped:
        raise RuntimeError(f'cannot downgrade below 0008: {mapped} mapped task instance(s) would not fit the old '
                           'one-instance-per-task key')
    with op.batch_alter_table('xcom', schema=None) as batch_op:
        batch_op.drop_column('map_index')
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.drop_constraint('uq_task_instance_run_id_task_id_map_index', type_='unique')
        batch_op.create_unique_constraint('uq_task_instance_run_id_task_id', ['run_id', 'task_id'])
        batch_op.drop_column('map_index')
