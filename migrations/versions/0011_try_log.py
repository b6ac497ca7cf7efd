"""try_log: the log of a try that ran on another host (a Celery worker), kept in the database once it has ended

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 18:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('try_log',
    sa.Column('task_instance_id', sa.Integer(), nullable=False),
    sa.Column('try_number', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=250), nullable=True),
    sa.Column('text', sa.Text(), nullable=False),
    sa.ForeignKeyConstraint(['task_instance_id'], ['task_instance.id'], name=op.f('fk_try_log_task_instance_id_task_instance')),
    sa.PrimaryKeyConstraint('task_instance_id', 'try_number', name=op.f('pk_try_log'))
    )


def downgrade() -> None:
    op.drop_table('try_log')
