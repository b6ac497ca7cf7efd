"""Mapped task groups, as Airflow's `@task_group` function `.expand(...)` / `.expand_kwargs(...)`.

The group function is called once, inside a task group, with a placeholder (GroupArg) for each mapped argument;
every task it makes is then mapped over the group's lists (expand_kind "group"): each gets the same number of
instances, instance i of a task gets the group's item i in place of the placeholders, and where it takes the
value of a task of the same group it gets that task's instance i (not the list of all of them), and waits for
that instance only (ledger/core/dependencies.py). Outside the group a task's value is the list of its instances'
values, as for any mapped task. A task that is itself mapped inside a mapped group is refused.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ledger.core.errors import DagDefinitionError
from ledger.sdk.dag import DAG, GroupArg, TaskGroup, _expand_sources, _kwargs_source

__all__ = ["expand_group"]


def expand_group(func: Callable[..., Any], group_id: str, *, partial: Mapping[str, Any],
                 expand: Mapping[str, Any] | None = None, expand_kwargs: Any = None, dag: DAG | None = None,
                 prefix_group_id: bool = True, tooltip: str = "",
                 open_group: Callable[[], TaskGroup] | None = None) -> Any:
    """Make the mapped task group of `func` (one of `expand`, `expand_kwargs`); returns what `func` returns, or
    the group. `open_group`: makes the group (default: a TaskGroup of `group_id`, `dag`, `prefix_group_id`,
    `tooltip`), for a caller whose groups take more arguments."""
    where = f"task group {group_id!r}"
    parameters = inspect.signature(func).parameters.values()
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    names = [p.name for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                      inspect.Parameter.KEYWORD_ONLY)]
    if expand is not None:
        sources = _expand_sources(where, expand, None if takes_any else names, partial)
        placeholders = {name: GroupArg(name) for name in sources}
    else:
        sources = _kwargs_source(where, expand_kwargs, None if takes_any else names, partial)
        placeholders = {name: GroupArg(name) for name in names if name not in partial}
    made = open_group() if open_group is not None else TaskGroup(group_id, dag=dag, prefix_group_id=prefix_group_id,
                                                                 tooltip=tooltip)
    with made as group:
        result = func(**partial, **placeholders)
    tasks = group.tasks()
    if not tasks:
        raise DagDefinitionError(f"{where}: the mapped task group makes no task")
    for task in tasks:
        if task.expand_args:
            raise DagDefinitionError(f"{where}: task {task.task_id!r} is mapped itself; a mapped task inside a "
                                     "mapped task group is not supported")
        task._map(sources, "group")
        task.mapped_group = group.group_id
    return result if result is not None else group
