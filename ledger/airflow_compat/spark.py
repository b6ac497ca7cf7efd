"""Airflow's Spark provider in ledger's namespace: `SparkSubmitOperator`, `SparkSqlOperator` and `@task.pyspark`.

`@task.pyspark` and `SparkSqlOperator` are Spark tasks (ledger.sdk.spark.SparkTask): their tries run in the
worker's own SparkSession, made from ledger's Spark settings (LEDGER_SPARK_MASTER, LEDGER_SPARK_REMOTE,
LEDGER_SPARK_CONF; scheduler/runtime/spark_session.py), where Airflow starts a session (or the `spark-sql`
binary, which pyspark does not ship) for each try. `SparkSubmitOperator` runs `spark-submit` as Airflow does, with
the master of its connection (`spark_default`: its host, `local[2]` or `spark://host` with the port), or
LEDGER_SPARK_MASTER when that connection is not defined.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ledger.airflow_compat.connection_lookup import connection
from ledger.airflow_compat.graph import AirflowException, AirflowNotFoundException
from ledger.airflow_compat.operators import (
    BaseOperator,
    _frame_folder,
    get_current_context,
    operator_dag,
    template_file,
)
from ledger.airflow_compat.sql import split_sql
from ledger.core.errors import DagDefinitionError
from ledger.infra.settings import value as setting
from ledger.sdk.context import TaskContext, push_return, set_current
from ledger.sdk.dag import _as_ref, _jsonable, after_values
from ledger.sdk.spark import SparkTask
from ledger.sdk.templates import render
from ledger.sdk.xcom import resolve

DEFAULT_CONN = "spark_default"


def _refuse(task_id: str, given: Mapping[str, Any], what: str) -> None:
    for name, value in given.items():
        if value not in (None, False, [], {}, ""):
            raise DagDefinitionError(f"task {task_id!r}: {name}= is not supported: {what}")


class PySparkTask(SparkTask):
    """`@task.pyspark`: the function gets the worker's SparkSession as `spark` (and its SparkContext as `sc`) when
    it has parameters of those names, with the values of other tasks as arguments and the context's values by
    parameter name (`ds`, `ti`...; all of them with `**kwargs`); what it returns is passed on."""

    kind = "spark"

    def __init__(self, task_id: str, python_callable: Callable[..., Any], *, op_args: Sequence[Any] = (),
                 op_kwargs: Mapping[str, Any] | None = None, multiple_outputs: bool = False,
                 config_kwargs: Mapping[str, Any] | None = None, conn_id: str | None = None,
                 **task_args: Any) -> None:
        _refuse(task_id, {"conn_id": conn_id}, "@task.pyspark runs in ledger's SparkSession (LEDGER_SPARK_MASTER, "
                                               "LEDGER_SPARK_CONF); give spark settings in config_kwargs")
        # a task given as an argument stands for its return value, as for a @task function
        self.fn_args = [_as_ref(a) for a in op_args]
        self.fn_kwargs = {k: _as_ref(v) for k, v in dict(op_kwargs or {}).items()}
        self.multiple_outputs = multiple_outputs
        super().__init__(task_id, python_callable, spark_conf=config_kwargs, **task_args)
        after_values(self, [self.fn_args, self.fn_kwargs])

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "op_args": _jsonable(self.fn_args), "fn_kwargs": _jsonable(self.fn_kwargs)}

    def run(self, spark: Any, context: TaskContext) -> Any:
        set_current(context, self)  # get_current_context() inside the function
        args = resolve(self.fn_args, context.xcom_values)
        kwargs = resolve(self.fn_kwargs, context.xcom_values)
        params = inspect.signature(self.spark_callable).parameters
        if "spark" in params:
            kwargs["spark"] = spark
        if "sc" in params:
            kwargs["sc"] = spark.sparkContext
        # the context's values by parameter name (all of them with **kwargs), as Airflow's @task.pyspark gives them
        given = {*kwargs, *list(params)[:len(args)]}
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kwargs.update((name, value) for name, value in get_current_context().items()
                      if name not in given and (takes_any or name in params))
        value = self.spark_callable(*args, **kwargs)
        if value is not None:
            push_return(self, context, value)
        return value


def _run_sql(spark: Any, context: TaskContext) -> None:  # the callable that names a SparkSqlOperator's kind
    raise AssertionError("SparkSqlOperator runs through its run()")


class SparkSqlOperator(SparkTask):
    """Airflow's SparkSqlOperator: `sql` (a string, or a `.sql`/`.hql` file beside the DAG file; a template) run
    statement by statement in the worker's SparkSession; `conf` (a dict, or Airflow's `"k=v,k2=v2"`) sets spark
    settings for the try."""

    template_fields: ClassVar[tuple[str, ...]] = ("sql",)
    template_ext: ClassVar[tuple[str, ...]] = (".sql", ".hql")

    def __init__(self, *, sql: str, task_id: str, conf: str | Mapping[str, Any] | None = None,
                 conn_id: str = DEFAULT_CONN, name: str = "default-name", master: str | None = None,
                 total_executor_cores: int | None = None, executor_cores: int | None = None,
                 executor_memory: str | None = None, keytab: str | None = None, principal: str | None = None,
                 num_executors: int | None = None, verbose: bool = True, yarn_queue: str | None = None,
                 **task_args: Any) -> None:
        _refuse(task_id, {"master": master, "keytab": keytab, "principal": principal, "yarn_queue": yarn_queue,
                          "total_executor_cores": total_executor_cores, "executor_cores": executor_cores,
                          "executor_memory": executor_memory, "num_executors": num_executors},
                "SparkSqlOperator runs in ledger's SparkSession, whose master and resources are ledger's Spark "
                "settings (LEDGER_SPARK_MASTER, LEDGER_SPARK_CONF)")
        if conn_id != DEFAULT_CONN:
            raise DagDefinitionError(f"task {task_id!r}: conn_id={conn_id!r}: SparkSqlOperator runs in ledger's "
                                     "SparkSession (LEDGER_SPARK_MASTER); drop conn_id")
        pairs = dict(p.split("=", 1) for p in conf.split(",") if "=" in p) if isinstance(conf, str) else conf
        self.sql = template_file(task_id, "sql", sql, self.template_ext, _frame_folder(),  # a file's text
                                 operator_dag(task_args))
        self.name = name
        super().__init__(task_id, _run_sql, spark_conf=pairs, **task_args)

    def definition(self) -> dict[str, Any]:
        return {**super().definition(), "sql": self.sql}

    def run(self, spark: Any, context: TaskContext) -> Any:
        set_current(context, self)
        sql = render(self.sql, get_current_context(), field="sql")
        for statement in split_sql(sql):
            print(f"[ledger] spark.sql: {statement}", flush=True)
            spark.sql(statement).show(truncate=False)
        return None


class SparkSubmitOperator(BaseOperator):
    """Airflow's SparkSubmitOperator: `spark-submit` with the application and its arguments (see the module
    docstring for the master)."""

    template_fields: ClassVar[tuple[str, ...]] = (
        "application", "conf", "files", "py_files", "jars", "driver_class_path", "packages", "exclude_packages",
        "name", "application_args", "env_vars", "properties_file")

    def __init__(self, *, application: str = "", conf: dict[str, Any] | None = None, conn_id: str = DEFAULT_CONN,
                 files: str | None = None, py_files: str | None = None, archives: str | None = None,
                 driver_class_path: str | None = None, jars: str | None = None, java_class: str | None = None,
                 packages: str | None = None, exclude_packages: str | None = None, repositories: str | None = None,
                 total_executor_cores: int | None = None, executor_cores: int | None = None,
                 executor_memory: str | None = None, driver_memory: str | None = None, name: str = "arrow-spark",
                 num_executors: int | None = None, application_args: list[Any] | None = None,
                 env_vars: dict[str, Any] | None = None, verbose: bool = False, spark_binary: str | None = None,
                 properties_file: str | None = None, keytab: str | None = None, principal: str | None = None,
                 proxy_user: str | None = None, **kwargs: Any) -> None:
        _refuse(kwargs.get("task_id", "?"), {"keytab": keytab, "principal": principal, "proxy_user": proxy_user},
                "ledger runs spark-submit without Kerberos; authenticate in the cluster's own configuration")
        super().__init__(**kwargs)
        self.application, self.conf, self.conn_id = application, dict(conf or {}), conn_id
        self.files, self.py_files, self.archives, self.jars = files, py_files, archives, jars
        self.driver_class_path, self.java_class, self.packages = driver_class_path, java_class, packages
        self.exclude_packages, self.repositories = exclude_packages, repositories
        self.total_executor_cores, self.executor_cores = total_executor_cores, executor_cores
        self.executor_memory, self.driver_memory, self.name = executor_memory, driver_memory, name
        self.num_executors, self.application_args = num_executors, list(application_args or [])
        self.env_vars, self.verbose, self.spark_binary = dict(env_vars or {}), verbose, spark_binary
        self.properties_file = properties_file

    def master(self) -> tuple[str, dict[str, Any]]:
        """(the master, the connection's extra) of the connection, else LEDGER_SPARK_MASTER."""
        try:
            info = connection(self.conn_id)
        except AirflowNotFoundException:
            if self.conn_id != DEFAULT_CONN:
                raise
            return str(setting("LEDGER_SPARK_MASTER") or "local[*]"), {}
        host = info.host or "local[*]"
        if info.conn_type == "spark" and "://" not in host and not host.startswith(("local", "yarn", "k8s")):
            host = f"spark://{host}"
        return host + (f":{info.port}" if info.port else ""), info.extra_dejson

    def command(self) -> list[str]:
        master, extra = self.master()
        binary = self.spark_binary or extra.get("spark-binary") or "spark-submit"
        found = shutil.which(binary, path=os.pathsep.join([str(Path(sys.executable).parent),
                                                           os.environ.get("PATH", "")]))
        cmd = [found or binary, "--master", master]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        options = {"--files": self.files, "--py-files": self.py_files, "--archives": self.archives,
                   "--driver-class-path": self.driver_class_path, "--jars": self.jars,
                   "--packages": self.packages, "--exclude-packages": self.exclude_packages,
                   "--repositories": self.repositories, "--num-executors": self.num_executors,
                   "--total-executor-cores": self.total_executor_cores, "--executor-cores": self.executor_cores,
                   "--executor-memory": self.executor_memory, "--driver-memory": self.driver_memory,
                   "--properties-file": self.properties_file, "--name": self.name, "--class": self.java_class,
                   "--deploy-mode": extra.get("deploy-mode"), "--queue": extra.get("queue")}
        for flag, value in options.items():
            if value not in (None, ""):
                cmd += [flag, str(value)]
        if self.verbose:
            cmd.append("--verbose")
        return [*cmd, self.application, *(str(a) for a in self.application_args)]

    def execute(self, context: Mapping[str, Any]) -> None:
        cmd = self.command()
        print(f"[ledger] running: {' '.join(cmd)}", flush=True)
        env = {**os.environ, **{str(k): str(v) for k, v in self.env_vars.items()}}
        process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, text=True, errors="backslashreplace")
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
        code = process.wait()
        if code != 0:
            raise AirflowException(f"Cannot execute: {' '.join(cmd)}. Error code is: {code}.")
