"""task_instance.dag_version: the version a task instance's next tries run when it is not its run's (a partial
clear on the latest version leaves the run on its own version; decision 0271)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 23:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.add_column(sa.Column('dag_version', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('task_instance', schema=None) as batch_op:
        batch_op.drop_column('dag_version')
