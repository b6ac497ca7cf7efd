"""Airflow's HTTP provider in ledger's namespace: `airflow.providers.http` (HttpHook, HttpOperator and its old name
SimpleHttpOperator, HttpSensor), on `requests`, as Airflow's.

The connection is read by id as the SQL hooks read it (ledger's, then `AIRFLOW_CONN_<ID>`: ledger/airflow_compat/
sql.py): its host (with a scheme, `https://api.example.com`, or without: the connection's schema, else its type
when that is http or https, else http), and its port, make the base URL the endpoint is joined to; its login and
password are basic auth; its extra (JSON) holds default headers. A response of status 400 or more raises an
AirflowException whose message starts with the status ("404:Not Found"), unless `extra_options={"check_response":
False}`, as Airflow's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ledger.airflow_compat.connection_lookup import connection
from ledger.airflow_compat.flow import BaseSensorOperator
from ledger.airflow_compat.graph import AirflowException
from ledger.airflow_compat.operators import BaseOperator


class HttpHook:
    """Airflow's HttpHook: `run(endpoint, data, headers, extra_options)` returns the `requests.Response`."""

    conn_name_attr = "http_conn_id"
    default_conn_name = "http_default"

    def __init__(self, method: str = "POST", http_conn_id: str = default_conn_name, auth_type: Any = None,
                 tcp_keep_alive: bool = True, **_: Any) -> None:
        self.method = method.upper()
        self.http_conn_id = http_conn_id
        self.auth_type = auth_type
        self.base_url = ""

    def get_conn(self, headers: Mapping[str, Any] | None = None) -> Any:
        import requests

        session = requests.Session()
        info = connection(self.http_conn_id)
        host = info.host or ""
        if "://" in host:
            self.base_url = host
        else:
            scheme = info.schema or (info.conn_type if info.conn_type in ("http", "https") else "http")
            self.base_url = f"{scheme}://{host}"
        if info.port:
            self.base_url += f":{info.port}"
        if info.login:
            session.auth = (info.login, info.password or "")
        extra = info.extra_dejson
        session.headers.update({str(k): str(v) for k, v in extra.items() if isinstance(v, (str, int, float))})
        if headers:
            session.headers.update(headers)
        return session

    def url_from_endpoint(self, endpoint: str | None) -> str:
        if not endpoint:
            return self.base_url
        return self.base_url.rstrip("/") + "/" + endpoint.lstrip("/")

    def run(self, endpoint: str | None = None, data: Any = None, headers: Mapping[str, Any] | None = None,
            extra_options: Mapping[str, Any] | None = None, **request_kwargs: Any) -> Any:
        """One request (GET and HEAD send `data` as the query string, the others as the body)."""
        import requests

        options = dict(extra_options or {})
        session = self.get_conn(headers)
        url = self.url_from_endpoint(endpoint)
        if self.method in ("GET", "HEAD"):
            request = requests.Request(self.method, url, params=data, headers=headers, **request_kwargs)
        else:
            request = requests.Request(self.method, url, data=data, headers=headers, **request_kwargs)
        prepared = session.prepare_request(request)
        print(f"Sending '{self.method}' to url: {url}", flush=True)
        response = session.send(prepared, timeout=options.get("timeout"), verify=options.get("verify", True),
                                allow_redirects=options.get("allow_redirects", True))
        if options.get("check_response", True) and response.status_code >= 400:
            raise AirflowException(f"{response.status_code}:{response.reason}")
        return response


class HttpOperator(BaseOperator):
    """Airflow's HttpOperator (SimpleHttpOperator): one request; `response_check(response)` False fails the try,
    `response_filter(response)` is what passes on (else the response's text)."""

    template_fields: ClassVar[tuple[str, ...]] = ("endpoint", "data", "headers")
    template_ext: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, endpoint: str | None = None, method: str = "POST", data: Any = None,
                 headers: dict[str, str] | None = None, response_check: Callable[..., Any] | None = None,
                 response_filter: Callable[..., Any] | None = None, extra_options: dict[str, Any] | None = None,
                 http_conn_id: str = "http_default", log_response: bool = False, auth_type: Any = None,
                 tcp_keep_alive: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.endpoint, self.method, self.data, self.headers = endpoint, method, data, dict(headers or {})
        self.response_check, self.response_filter = response_check, response_filter
        self.extra_options, self.http_conn_id, self.log_response = dict(extra_options or {}), http_conn_id, log_response

    def execute(self, context: Mapping[str, Any]) -> Any:
        data = json.dumps(self.data) if isinstance(self.data, (dict, list)) and self.headers.get(
            "Content-Type") == "application/json" else self.data
        response = HttpHook(self.method, http_conn_id=self.http_conn_id).run(self.endpoint, data, self.headers,
                                                                             self.extra_options)
        if self.log_response:
            print(response.text, flush=True)
        if self.response_check is not None and not self.response_check(response):
            raise AirflowException("Response check returned False.")
        return self.response_filter(response) if self.response_filter is not None else response.text


SimpleHttpOperator = HttpOperator  # Airflow 2's name


class HttpSensor(BaseSensorOperator):
    """Airflow's HttpSensor: waits until the endpoint answers (a 404 is "not yet"; another error fails), and
    `response_check(response)` holds when given."""

    template_fields: ClassVar[tuple[str, ...]] = ("endpoint", "request_params", "headers")

    def __init__(self, *, endpoint: str, http_conn_id: str = "http_default", method: str = "GET",
                 request_params: dict[str, Any] | None = None, headers: dict[str, Any] | None = None,
                 response_error_codes_allowlist: list[str] | None = None,
                 response_check: Callable[..., Any] | None = None, extra_options: dict[str, Any] | None = None,
                 tcp_keep_alive: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.endpoint, self.http_conn_id, self.method = endpoint, http_conn_id, method
        self.request_params, self.headers = dict(request_params or {}), dict(headers or {})
        self.allowed = list(response_error_codes_allowlist or ["404"])
        self.response_check, self.extra_options = response_check, dict(extra_options or {})

    def poke(self, context: Mapping[str, Any]) -> Any:  # type: ignore[override]
        try:
            response = HttpHook(self.method, http_conn_id=self.http_conn_id).run(
                self.endpoint, self.request_params, self.headers, self.extra_options)
        except AirflowException as exc:
            if str(exc).split(":", 1)[0] in self.allowed:
                return False
            raise
        return bool(self.response_check(response)) if self.response_check is not None else True
