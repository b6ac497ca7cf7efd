"""The process around the rules: configuration from the environment, the clock, files (a version's code, log
paths), the Celery workers' registry and the worker's HTTP client. No database.
"""
