"""Persistence, and the only place that writes SQL: functions that take a caller's Session and never commit
(tests/test_layout.py checks that no module outside builds or runs SQL)."""
