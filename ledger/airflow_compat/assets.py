"""Airflow 3's `@asset` (`airflow.sdk.asset`) on ledger's datasets: the decorated function is the one task of a DAG
of its name, whose outlet is the asset (name: the function's, or `name=`; `uri=`, `group=`, `extra=` as given), so
each successful try is a dataset event that DAGs scheduled on the asset consume and lineage records. The
function's parameters named after other assets are its inlets (`context["inlet_events"][asset]`); `self` is the
asset itself and `context` the try's context, as in Airflow.

    @asset(schedule="@daily", uri="s3://lake/raw_orders")
    def raw_orders(): ...

    @asset(schedule=raw_orders)
    def clean_orders(self, context, raw_orders): ...
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ledger.airflow_compat.dag import SdkDAG
from ledger.airflow_compat.operators import PythonOperator
from ledger.sdk.datasets import Asset

RESERVED = ("self", "context")


class AssetDefinition(Asset):
    """An asset made by an `@asset` function: the Asset, and the DAG that materializes it (`.dag`)."""

    dag: SdkDAG


def asset(*, schedule: Any, uri: str | None = None, name: str | None = None, group: str = "asset",
          extra: Mapping[str, Any] | None = None, **dag_kwargs: Any) -> Callable[[Callable[..., Any]],
                                                                              AssetDefinition]:
    def wrap(fn: Callable[..., Any]) -> AssetDefinition:
        made = AssetDefinition(name or fn.__name__, uri, group=group, extra=extra)
        inputs = [p for p in inspect.signature(fn).parameters if p not in RESERVED]
        inlets = {p: Asset(p) for p in inputs}

        def arguments(context: dict[str, Any]) -> dict[str, Any]:
            given: dict[str, Any] = {p: inlets[p] for p in inputs}
            if "self" in inspect.signature(fn).parameters:
                given["self"] = made
            if "context" in inspect.signature(fn).parameters:
                given["context"] = context
            return given

        if inspect.isgeneratorfunction(fn):  # `yield Metadata(...)`: the task runner reads what it yields
            @functools.wraps(fn)  # the function's source is the task's code (its version)
            def materialize(**context: Any) -> Any:
                return (yield from fn(**arguments(context)))
        else:
            @functools.wraps(fn)
            def materialize(**context: Any) -> Any:
                return fn(**arguments(context))

        # it takes Airflow's whole context, whatever the function's own parameters
        materialize.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("context", inspect.Parameter.VAR_KEYWORD)])
        with SdkDAG(made.name, schedule=schedule, **dag_kwargs) as dag:
            PythonOperator(task_id=made.name, python_callable=materialize, outlets=[made],
                           inlets=list(inlets.values()))
        made.dag = dag  # type: ignore[assignment]
        return made

    return wrap


@dataclasses.dataclass
class AssetAccessControl:
    """Airflow 3's `AssetAccessControl(producer_teams=[...], consumer_teams=None, allow_global=True)`: which teams'
    events an asset's consumers take when Airflow runs in multi-team mode. ledger has no teams, as Airflow without
    that mode (its default): every DAG scheduled on the asset takes every event of it, whatever the asset says."""

    producer_teams: list[str] = dataclasses.field(default_factory=list)
    consumer_teams: list[str] | None = None
    allow_global: bool = True


class AirflowAsset(Asset):
    """`airflow.sdk.Asset`: ledger's Asset, also taking Airflow 3's `access_control=` (kept on the asset; see
    AssetAccessControl)."""

    def __init__(self, name: str | None = None, uri: str | None = None, *,
                 access_control: AssetAccessControl | None = None, **kwargs: Any) -> None:
        super().__init__(name, uri, **kwargs)
        self.access_control = access_control
