"""Fixtures of the chaos tests: the Celery cluster's (tests/celery_cluster.py)."""

from tests.celery_cluster import cluster, redis_server  # noqa: F401 (the Celery executor's fixtures)
