"""signal-driven task instances

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 15:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.add_column(sa.Column('signal_armed', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('signal_request', sa.String(length=10), nullable=True))
        batch_op.add_column(sa.Column('signal_id', sa.Integer(), nullable=True))
        batch_op.create_index('ix_task_instance_signal_request', ['signal_request'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.drop_index('ix_task_instance_signal_request')
        batch_op.drop_column('signal_id')
        batch_op.drop_column('signal_request')
        batch_op.drop_column('signal_armed')
