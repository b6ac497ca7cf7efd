"""Airflow's `airflow.configuration.conf` as a DAG file reads it: `conf.get("core", "dags_folder")`.

ledger has no airflow.cfg. A value is read, as Airflow reads it first, from the variable
`AIRFLOW__{SECTION}__{KEY}`; `[core] dags_folder` is ledger's DAGs folder and `[core] default_timezone` is UTC (as
ledger's); any other option gives its `fallback` when one is given, and is otherwise refused in one line naming the
variable to set (AirflowConfigException), never an invented value; an option of the Kubernetes executor's
sections is refused naming what to use instead, as ledger has no such executor.
"""

from __future__ import annotations

import os
from typing import Any

from ledger.airflow_compat.graph import AirflowConfigException

_NO_FALLBACK: Any = object()
KUBERNETES = "kubernetes"  # [kubernetes_executor], [kubernetes]: the executor ledger does not have
_TRUE, _FALSE = ("t", "true", "1", "yes", "on"), ("f", "false", "0", "no", "off")


def _ledger_value(section: str, key: str) -> str | None:
    if (section, key) == ("core", "dags_folder"):
        from ledger.infra.config import load_settings

        return str(load_settings(dict(os.environ)).dags_folder)
    if (section, key) == ("core", "default_timezone"):
        return "utc"
    return None


class AirflowConf:
    """`conf.get(section, key, fallback=...)`, getboolean, getint, getfloat, has_option (see the module)."""

    def get(self, section: str, key: str, fallback: Any = _NO_FALLBACK, **_: Any) -> Any:
        name = f"AIRFLOW__{section.upper()}__{key.upper()}"
        if name in os.environ:
            return os.environ[name]
        found = _ledger_value(section.lower(), key.lower())
        if found is not None:
            return found
        if fallback is not _NO_FALLBACK:
            return fallback
        if section.lower().startswith(KUBERNETES):  # refused by design: no Kubernetes executor to configure
            raise AirflowConfigException(f"[{section}] {key}: ledger has no Kubernetes executor; run the container "
                                         "from a @task.bash (`kubectl run ...`) or a @task")
        raise AirflowConfigException(f"[{section}] {key} is not set: ledger has no airflow.cfg; set {name} or "
                                     "give conf.get a fallback (ledger's own settings: docs/operations.md)")

    def has_option(self, section: str, key: str) -> bool:
        return self.get(section, key, fallback=None) is not None

    def getboolean(self, section: str, key: str, fallback: Any = _NO_FALLBACK, **kw: Any) -> Any:
        value = self.get(section, key, fallback=fallback, **kw)
        if not isinstance(value, str):
            return value
        if value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise AirflowConfigException(f"[{section}] {key} is {value!r}, not a boolean")

    def getint(self, section: str, key: str, fallback: Any = _NO_FALLBACK, **kw: Any) -> Any:
        value = self.get(section, key, fallback=fallback, **kw)
        return int(value) if isinstance(value, str) else value

    def getfloat(self, section: str, key: str, fallback: Any = _NO_FALLBACK, **kw: Any) -> Any:
        value = self.get(section, key, fallback=fallback, **kw)
        return float(value) if isinstance(value, str) else value


conf = AirflowConf()
