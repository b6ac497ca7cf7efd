"""Airflow 3.x style mapping extras: a mapped task group over expand_kwargs, from airflow.sdk."""
import pendulum
from airflow.sdk import dag, task, task_group


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def af3_mapping_extras():
    @task
    def orders():
        return [{"item": "tea", "qty": 2}, {"item": "cake", "qty": 1}]

    @task
    def price(item):
        return {"tea": 3, "cake": 5}[item]

    @task
    def total(unit, qty):
        return unit * qty

    @task
    def bill(totals):
        return sum(totals)

    @task_group
    def line(item, qty, currency):
        return total(price(item), qty)

    bill(line.partial(currency="EUR").expand_kwargs(orders()))


af3_mapping_extras()
