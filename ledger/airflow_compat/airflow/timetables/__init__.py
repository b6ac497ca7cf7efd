"""`airflow.timetables`."""
