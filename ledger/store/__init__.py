"""Persistence: functions that take a caller's Session and never commit."""
