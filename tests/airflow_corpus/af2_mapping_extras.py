"""Airflow 2.x style mapping extras: expand_kwargs, .map(), .zip() and a mapped task group."""
import pendulum
from airflow.decorators import dag, task, task_group
from airflow.operators.bash import BashOperator


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def af2_mapping_extras():
    @task
    def numbers():
        return [1, 2, 3]

    @task
    def letters():
        return ["a", "b"]

    @task
    def add(x, y):
        return x + y

    @task
    def show(value):
        return value

    @task
    def collect(values):
        return sorted(values)

    def as_command(n):
        return f"echo n={n}"

    nums = numbers()
    added = add.expand_kwargs([{"x": 1, "y": 10}, {"x": 2, "y": 20}])
    collect.override(task_id="collect_added")(added)
    show.override(task_id="squared").expand(value=nums.map(lambda n: n * n))
    show.override(task_id="pairs").expand(value=nums.zip(letters()))
    BashOperator.partial(task_id="echo").expand(bash_command=nums.map(as_command))

    @task_group
    def per_number(n):
        doubled = add.override(task_id="double")(n, n)
        return add.override(task_id="plus_hundred")(doubled, 100)

    collect.override(task_id="collect_group")(per_number.expand(n=nums))


af2_mapping_extras()
