"""task_instance.pool_slots: the slots of its pool a task instance takes while it is queued or running (Airflow's
pool_slots; decision 0364). Every task instance already there takes one, as each took before

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 11:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

DROPS = "each task instance's pool slots (task_instance.pool_slots; every one takes a single slot of its pool again)"
"""What the downgrade drops, as `ledger db downgrade` says it."""


def upgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.add_column(sa.Column('pool_slots', sa.Integer(), server_default=sa.text('1'), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.drop_column('pool_slots')
