"""Notifiers: ready-made callbacks that tell people. Give one wherever a callback goes
(`on_failure_callback=WebhookNotifier(url)`), or set `email` in default_args as in Airflow.

A notifier is called with the callback context (a dict: kind, dag_id, run_id, task_id, try_number,
dag_version, logical_date, data interval, state, reason, ...) in the callback's own process; raising makes
the callback's outcome `error`, which `ledger events` and `ledger callbacks` show.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

from ledger.core.errors import DagDefinitionError
from ledger.infra.settings import value as setting


def summary(context: dict[str, Any]) -> str:
    """One line saying what happened: `task_failure: daily_sales.load run 7 try 2 (2024-03-01T00:00:00+00:00)`."""
    what = context.get("dag_id", "?")
    if context.get("task_id"):
        what += f".{context['task_id']}"
    line = f"{context.get('kind', 'callback')}: {what} run {context.get('run_id', '?')}"
    if context.get("try_number"):
        line += f" try {context['try_number']}"
    return line + f" ({context.get('logical_date', '?')})"


class Notifier:
    """Base class: subclasses implement notify(context) and describe() (what the DAG version records)."""

    def __call__(self, context: dict[str, Any]) -> None:
        self.notify(context)

    def notify(self, context: dict[str, Any]) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {}


class WebhookNotifier(Notifier):
    """POSTs the context as JSON to `url` (any 2xx answer is success; anything else is an error)."""

    def __init__(self, url: str, *, headers: dict[str, str] | None = None, timeout: float = 10.0) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise DagDefinitionError(f"WebhookNotifier: url must start with http:// or https://, not {url!r}")
        self.url, self.headers, self.timeout = url, dict(headers or {}), timeout

    def describe(self) -> dict[str, Any]:
        return {"url": self.url}  # headers may hold tokens: not recorded

    def notify(self, context: dict[str, Any]) -> None:
        from urllib import request as url_request  # (here: a DAG file that imports ledger does not load it, issue 43)

        body = json.dumps({"text": summary(context), **context}, default=str).encode()
        request = url_request.Request(self.url, data=body, method="POST",
                                      headers={"Content-Type": "application/json", **self.headers})
        with url_request.urlopen(request, timeout=self.timeout) as answer:
            if not 200 <= answer.status < 300:
                raise RuntimeError(f"webhook {self.url} answered {answer.status}")


class EmailNotifier(Notifier):
    """Sends an e-mail through the SMTP server of the LEDGER_SMTP_* settings:
    LEDGER_SMTP_HOST (default localhost), LEDGER_SMTP_PORT (25), LEDGER_SMTP_USER, LEDGER_SMTP_PASSWORD,
    LEDGER_SMTP_STARTTLS (false), LEDGER_SMTP_SSL (false), LEDGER_SMTP_FROM (ledger@<host>),
    LEDGER_SMTP_TIMEOUT (30 s)."""

    def __init__(self, to: str | list[str], *, subject: str | None = None) -> None:
        recipients = [to] if isinstance(to, str) else list(to)
        if not recipients or not all(isinstance(r, str) and "@" in r for r in recipients):
            raise DagDefinitionError(f"EmailNotifier: `to` must be e-mail addresses, not {to!r}")
        self.to, self.subject = recipients, subject

    def describe(self) -> dict[str, Any]:
        return {"to": self.to, **({"subject": self.subject} if self.subject else {})}

    def notify(self, context: dict[str, Any]) -> None:
        lines = [summary(context), ""] + [f"{k}: {v}" for k, v in context.items() if v not in (None, "", {})]
        send_email(self.to, self.subject or f"[ledger] {summary(context)}", "\n".join(lines) + "\n")


@dataclass(frozen=True)
class SmtpServer:
    """Where an e-mail goes: by default the LEDGER_SMTP_* settings (`from_settings`); an Airflow SMTP connection
    gives its own (ledger/airflow_compat/smtp.py)."""

    host: str = "localhost"
    port: int = 25
    user: str | None = None
    password: str | None = None
    ssl: bool = False
    starttls: bool = False
    timeout: float = 30.0
    sender: str | None = None

    @staticmethod
    def from_settings() -> SmtpServer:
        return SmtpServer(setting("LEDGER_SMTP_HOST") or "localhost", setting("LEDGER_SMTP_PORT") or 25,
                          setting("LEDGER_SMTP_USER") or None, setting("LEDGER_SMTP_PASSWORD") or None,
                          bool(setting("LEDGER_SMTP_SSL")), bool(setting("LEDGER_SMTP_STARTTLS")),
                          setting("LEDGER_SMTP_TIMEOUT") or 30.0, setting("LEDGER_SMTP_FROM") or None)


def send_email(to: list[str], subject: str, body: str, *, html: bool = False, cc: list[str] | None = None,
               bcc: list[str] | None = None, files: list[str] | None = None, server: SmtpServer | None = None,
               sender: str | None = None, headers: dict[str, str] | None = None, charset: str = "utf-8") -> None:
    """Send one e-mail through `server` (default: the SMTP server of the LEDGER_SMTP_* settings, see
    EmailNotifier)."""
    import smtplib  # (here: a DAG file that imports ledger does not load them, issue 43)
    import ssl
    from email.message import EmailMessage

    server = server or SmtpServer.from_settings()
    message = EmailMessage()
    message["From"] = sender or server.sender or f"ledger@{socket.gethostname()}"
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    message["Subject"] = subject
    for name, text in (headers or {}).items():
        message[name] = text
    if html:
        message.set_content(body, subtype="html", charset=charset)
    else:
        message.set_content(body, charset=charset)
    for path in files or ():
        with open(path, "rb") as f:
            message.add_attachment(f.read(), maintype="application", subtype="octet-stream",
                                   filename=os.path.basename(path))
    smtp: smtplib.SMTP = smtplib.SMTP_SSL(server.host, server.port, timeout=server.timeout,
                                          context=ssl.create_default_context()) \
        if server.ssl else smtplib.SMTP(server.host, server.port, timeout=server.timeout)
    with smtp:
        if server.starttls:
            smtp.starttls(context=ssl.create_default_context())
        if server.user:
            smtp.login(server.user, server.password or "")
        smtp.send_message(message, to_addrs=[*to, *(cc or []), *(bcc or [])])
