"""Airflow's e-mail: `airflow.utils.email.send_email`, the SMTP provider's `SmtpHook`, and the SMTP server
EmailOperator sends through.

An SMTP connection is read by id as the other providers read it (ledger's, then `AIRFLOW_CONN_<ID>`:
ledger/airflow_compat/sql.py), with Airflow's SmtpHook defaults: TLS from the start unless its extra says
`"disable_ssl": true`, then STARTTLS unless `"disable_tls": true`; `from_email` and `timeout` in its extra. When
the connection is `smtp_default` (or none is named) and is not defined, ledger's own SMTP settings (LEDGER_SMTP_*)
are the server, as Airflow falls back to its `[smtp]` configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledger.airflow_compat.connection_lookup import connection
from ledger.airflow_compat.graph import AirflowNotFoundException
from ledger.core.errors import DagDefinitionError
from ledger.sdk.notifiers import SmtpServer
from ledger.sdk.notifiers import send_email as send_message

DEFAULT_CONN = "smtp_default"


def _flag(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")


def smtp_server(conn_id: str | None) -> SmtpServer:
    """The SMTP server of connection `conn_id` (see the module docstring)."""
    try:
        info = connection(conn_id or DEFAULT_CONN)
    except AirflowNotFoundException:
        if conn_id in (None, DEFAULT_CONN):
            return SmtpServer.from_settings()
        raise
    extra = info.extra_dejson
    use_ssl = not _flag(extra.get("disable_ssl", False))
    return SmtpServer(host=info.host or "localhost", port=info.port or (465 if use_ssl else 25), user=info.login,
                      password=info.password, ssl=use_ssl,
                      starttls=not use_ssl and not _flag(extra.get("disable_tls", False)),
                      timeout=float(extra.get("timeout", 30)), sender=extra.get("from_email"))


def listed(value: str | Iterable[str] | None) -> list[str]:
    """Addresses as Airflow takes them: a list, or one string separated by commas or semicolons."""
    if not value:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.replace(";", ",").split(",") if v.strip()]
    return list(value)


def check_subtype(mime_subtype: str) -> None:
    if mime_subtype != "mixed":
        raise DagDefinitionError(f"mime_subtype={mime_subtype!r}: ledger sends e-mails as multipart/mixed only "
                                 "(Airflow's default)")


def send_email(to: str | Iterable[str], subject: str, html_content: str, files: list[str] | None = None,
               dryrun: bool = False, cc: str | Iterable[str] | None = None, bcc: str | Iterable[str] | None = None,
               mime_subtype: str = "mixed", mime_charset: str = "utf-8", conn_id: str | None = None,
               custom_headers: Mapping[str, Any] | None = None, from_email: str | None = None,
               **_: Any) -> None:
    """Airflow's `airflow.utils.email.send_email`: an HTML e-mail through connection `conn_id`'s server; with
    `dryrun`, nothing is sent."""
    check_subtype(mime_subtype)
    if dryrun:
        return
    send_message(listed(to), subject, html_content, html=True, cc=listed(cc), bcc=listed(bcc), files=list(files or []),
                 server=smtp_server(conn_id), sender=from_email,
                 headers={str(k): str(v) for k, v in (custom_headers or {}).items()}, charset=mime_charset)


class SmtpHook:
    """Airflow's SmtpHook: `with SmtpHook(smtp_conn_id) as hook: hook.send_email_smtp(...)`."""

    conn_name_attr = "smtp_conn_id"
    default_conn_name = DEFAULT_CONN

    def __init__(self, smtp_conn_id: str = DEFAULT_CONN, auth_type: str = "basic", **_: Any) -> None:
        if auth_type != "basic":
            raise DagDefinitionError(f"SmtpHook auth_type={auth_type!r}: ledger logs in with the connection's login "
                                     "and password only ('basic')")
        self.smtp_conn_id = smtp_conn_id

    def get_conn(self) -> SmtpHook:
        smtp_server(self.smtp_conn_id)  # a connection that is not defined fails here, as in Airflow
        return self

    def __enter__(self) -> SmtpHook:
        return self.get_conn()

    def __exit__(self, *exc: object) -> None:
        return None

    def send_email_smtp(self, *, to: str | Iterable[str], subject: str, html_content: str,
                        from_email: str | None = None, files: list[str] | None = None, dryrun: bool = False,
                        cc: str | Iterable[str] | None = None, bcc: str | Iterable[str] | None = None,
                        mime_subtype: str = "mixed", mime_charset: str = "utf-8",
                        custom_headers: Mapping[str, Any] | None = None, **_: Any) -> None:
        send_email(to, subject, html_content, files=files, dryrun=dryrun, cc=cc, bcc=bcc, mime_subtype=mime_subtype,
                   mime_charset=mime_charset, conn_id=self.smtp_conn_id, custom_headers=custom_headers,
                   from_email=from_email)
