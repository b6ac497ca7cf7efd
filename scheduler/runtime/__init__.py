"""The try side, which runs where the try runs (a forked child, a Celery worker): loading the pinned code, running
the task, writing its outcome. Imports neither the store nor SQLAlchemy.
"""
