"""The newest migration revision, so that commands can check the database without loading alembic.

A test (tests/store/test_migrations.py) keeps this equal to the head of migrations/versions; change it with
every new migration.
"""

HEAD = "0017"
