"""pin each DAG version's code: content-addressed blobs and bundles, and the version each try ran

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.migrations.code_guard import refuse_or_record

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'code_blob',
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('size', sa.Integer(), nullable=False),
        sa.Column('data', sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint('sha256'),
    )
    op.create_table(
        'code_bundle',
        sa.Column('bundle_hash', sa.String(length=64), nullable=False),
        sa.Column('manifest', sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint('bundle_hash'),
    )
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.add_column(sa.Column('code_entry', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('code_entry_sha256', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('code_bundle', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('code_snapshot', sa.String(length=64), nullable=True))
    with op.batch_alter_table('dag_file', schema=None) as batch_op:
        batch_op.add_column(sa.Column('depends_on', sa.JSON(), nullable=True))
    with op.batch_alter_table('task_try', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dag_version', sa.String(length=64), nullable=True))


def downgrade() -> None:
    refuse_or_record('0006')  # the code versions ran is dropped below: only when forced, and recorded
    with op.batch_alter_table('task_try', schema=None) as batch_op:
        batch_op.drop_column('dag_version')
    with op.batch_alter_table('dag_file', schema=None) as batch_op:
        batch_op.drop_column('depends_on')
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.drop_column('code_snapshot')
        batch_op.drop_column('code_bundle')
        batch_op.drop_column('code_entry_sha256')
        batch_op.drop_column('code_entry')
    op.drop_table('code_bundle')
    op.drop_table('code_blob')
