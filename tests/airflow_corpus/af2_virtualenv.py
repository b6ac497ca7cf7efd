"""Airflow 2.x style: PythonVirtualenvOperator and @task.virtualenv; the value crosses to a normal task."""
import pendulum
from airflow import DAG
from airflow.decorators import task
from airflow.operators.python import PythonOperator, PythonVirtualenvOperator, is_venv_installed


def isolated(n, ds=None):
    import sys

    try:
        import pendulum  # noqa: F401
        sees_pendulum = True
    except ImportError:
        sees_pendulum = False
    return {"prefix": sys.prefix, "base": sys.base_prefix, "double": n * 2, "ds": ds, "sees_pendulum": sees_pendulum}


def check(value):
    import sys

    assert value["prefix"] != sys.prefix, "the virtualenv task ran in ledger's own interpreter"
    print("checked", value["double"], value["ds"], value["sees_pendulum"])
    return value["double"] + 1


with DAG("af2_virtualenv", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")):
    if is_venv_installed():
        venv = PythonVirtualenvOperator(task_id="isolated", python_callable=isolated, requirements=[],
                                        system_site_packages=False, op_kwargs={"n": 21})

        @task.virtualenv(task_id="with_site_packages", system_site_packages=True)
        def with_site_packages(values: list):
            import pendulum

            return [pendulum.__name__, sum(values)]

        followed = PythonOperator(task_id="check", python_callable=check, op_args=[venv.output])
        venv >> followed
        with_site_packages([1, 2, 3])
