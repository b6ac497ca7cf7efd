"""web users and their API tokens: who signs in to the web view, with which role

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.models.base import UtcDateTime

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'web_user',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('username', sa.String(length=100), nullable=False),
        sa.Column('password_hash', sa.String(length=250), nullable=False),
        sa.Column('role', sa.String(length=16), nullable=False),
        sa.Column('created_at', UtcDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_web_user')),
        sa.UniqueConstraint('username', name=op.f('uq_web_user_username')),
    )
    op.create_table(
        'api_token',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=100), nullable=False),
        sa.Column('token_sha256', sa.String(length=64), nullable=False),
        sa.Column('created_at', UtcDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['user_id'], ['web_user.id'], name=op.f('fk_api_token_user_id_web_user'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_api_token')),
        sa.UniqueConstraint('token_sha256', name=op.f('uq_api_token_token_sha256')),
    )
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_token_user_id'), ['user_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('api_token', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_token_user_id'))
    op.drop_table('api_token')
    op.drop_table('web_user')
