"""dataset_tally: what was written of each dataset (rows, distinct partitions, newest id, per source), kept as the
rows are written, so that the dataset graph reads a row per dataset instead of counting (decision 0300); filled
from the dataset events and recorded writes already there. And a `(dataset, id)` index on both, so that a
dataset's page reads its newest events and writes without sorting all of them

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

DROPS = ("the dataset tallies (table dataset_tally; the dataset events and recorded writes they count stay) and the "
         "`(dataset, id)` indexes of dataset_event and lineage_write")
"""What the downgrade drops, as `ledger db downgrade` says it."""


def upgrade() -> None:
    tally = op.create_table(
        'dataset_tally',
        sa.Column('dataset', sa.String(length=500), nullable=False),
        sa.Column('source', sa.String(length=10), nullable=False),
        sa.Column('rows', sa.Integer(), nullable=False),
        sa.Column('partitions', sa.Integer(), nullable=False),
        sa.Column('newest_id', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('dataset', 'source', name=op.f('pk_dataset_tally')),
    )
    assert tally is not None
    for source, name in (("event", "dataset_event"), ("write", "lineage_write")):
        rows = sa.table(name, sa.column("id", sa.Integer), sa.column("dataset", sa.String),
                        sa.column("partition", sa.String))
        counted = (sa.select(rows.c.dataset, sa.literal(source), sa.func.count(),
                             sa.func.count(rows.c.partition.distinct()), sa.func.max(rows.c.id))
                   .group_by(rows.c.dataset))
        op.execute(tally.insert().from_select(["dataset", "source", "rows", "partitions", "newest_id"], counted))


    op.create_index('ix_dataset_event_dataset_id', 'dataset_event', ['dataset', 'id'])
    op.create_index('ix_lineage_write_dataset_id', 'lineage_write', ['dataset', 'id'])


def downgrade() -> None:
    op.drop_index('ix_lineage_write_dataset_id', table_name='lineage_write')
    op.drop_index('ix_dataset_event_dataset_id', table_name='dataset_event')
    op.drop_table('dataset_tally')
