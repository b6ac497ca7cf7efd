"""What DAG files import: the authoring API (DAG, tasks, sensors, datasets, timetables, the task context). No
database: task code reaches the ledger through one client.
"""
