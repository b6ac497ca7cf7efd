"""Signals in the scheduler: what a signal starts, restarts or stops; task state signals; waking the loop.
"""
