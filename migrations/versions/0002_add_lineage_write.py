"""add lineage_write

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 05:06:52.663975
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import ledger.models.base

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table('lineage_write',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('dataset', sa.String(length=500), nullable=False),
    sa.Column('partition', sa.String(length=500), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('dag_id', sa.String(length=250), nullable=False),
    sa.Column('task_id', sa.String(length=250), nullable=False),
    sa.Column('try_number', sa.Integer(), nullable=False),
    sa.Column('dag_version', sa.String(length=64), nullable=False),
    sa.Column('try_state', sa.String(length=20), nullable=False),
    sa.Column('rows', sa.Integer(), nullable=True),
    sa.Column('path', sa.Text(), nullable=True),
    sa.Column('written_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.Column('recorded_at', ledger.models.base.UtcDateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['dag_run.id'], name=op.f('fk_lineage_write_run_id_dag_run')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_lineage_write'))
    )
    with op.batch_alter_table('lineage_write', schema=None) as batch_op:
        batch_op.create_index('ix_lineage_write_dataset_partition', ['dataset', 'partition'], unique=False)
        batch_op.create_index('ix_lineage_write_run_id', ['run_id'], unique=False)




def downgrade() -> None:

    with op.batch_alter_table('lineage_write', schema=None) as batch_op:
        batch_op.drop_index('ix_lineage_write_run_id')
        batch_op.drop_index('ix_lineage_write_dataset_partition')

    op.drop_table('lineage_write')

