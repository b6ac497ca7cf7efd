"""Pure rules: states and their transitions, schedules, the timeline, dependency rules, plans. No database, no I/O,
no clock: every function gets what it needs (now included) as arguments.
"""
