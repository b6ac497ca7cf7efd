"""The schema's history (alembic): the only way the database schema changes; shipped in the distribution so
that `ledger db upgrade` works after a plain install.
"""
