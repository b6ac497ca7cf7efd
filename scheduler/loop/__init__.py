"""The DagRunJob loop and its steps: collect runs, lock them, plan task instances, hand tries to the executor,
record outcomes, heartbeat.
"""
