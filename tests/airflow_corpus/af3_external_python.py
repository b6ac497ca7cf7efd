"""Airflow 3.x style: ExternalPythonOperator and @task.external_python from the standard provider and airflow.sdk;
serializer="dill" (values cross with dill, in the other interpreter too)."""
import sys

import pendulum
from airflow.providers.standard.operators.python import ExternalPythonOperator
from airflow.sdk import DAG, task


def where(word):
    import sys

    return f"{word} from {sys.version_info[0]}"


with DAG("af3_external_python", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    first = ExternalPythonOperator(task_id="where", python=sys.executable, python_callable=where,
                                   op_args=["hello"])

    @task.external_python(python=sys.executable)
    def shout(text):
        return text.upper()

    @task.external_python(python="/nonexistent/bin/python")
    def nowhere():
        return 1

    @task.external_python(python=sys.executable, serializer="dill")
    def dilled(text):
        import sys

        return f"{text} read with {'dill' if 'dill' in sys.modules else 'pickle'}"

    shout(first.output)
    dilled(first.output)
    nowhere()
