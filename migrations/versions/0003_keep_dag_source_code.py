"""keep each DAG version's source code

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 15:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.migrations.code_guard import refuse_or_record

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source_code', sa.Text(), nullable=True))


def downgrade() -> None:
    refuse_or_record('0003')  # the code versions ran is dropped below: only when forced, and recorded
    with op.batch_alter_table('dag_version', schema=None) as batch_op:
        batch_op.drop_column('source_code')
