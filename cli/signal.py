"""`ledger signal send|list`: versioned (key, value) messages, kept and heard at once by listeners."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ledger.cli.env import open_env, parse_conf, print_json
from ledger.cli.options import MAX_ID, Json
from ledger.core.errors import InvalidInput
from ledger.core.signals import validate_key, validate_meta, validate_value
from ledger.services.signal_delivery import ring
from ledger.store import signals as signal_store

app = typer.Typer(help="Signals: (key, value) messages, versioned per key, kept and heard at once by listeners.",
                  no_args_is_help=True)
out = Console(highlight=False, soft_wrap=True)

SHOWN_VALUE_CHARS = 80


def _meta(text: str | None) -> dict[str, Any] | None:
    value = parse_conf(text, "--meta")
    return None if value is None else _check(validate_meta, value, "'--meta'")


def _check(validate: Any, value: Any, hint: str) -> Any:
    """A key, value or meta the signal rules refuse is wrong whatever the ledger holds: a usage error (exit 2)."""
    try:
        return validate(value)
    except InvalidInput as exc:
        raise typer.BadParameter(str(exc), param_hint=hint) from None


@app.command()
def send(
    key: Annotated[str, typer.Argument(help="The signal key: letters, digits and _ . : / - (1 to 200, starting "
                                            "with a letter or digit).", show_default=False)],
    value: Annotated[str, typer.Argument(help="The value: text, up to 65536 UTF-8 bytes.", show_default=False)],
    meta: Annotated[str | None, typer.Option(help="A JSON object kept with the signal.")] = None,
) -> None:
    """Send a signal: store the next version of KEY with VALUE and wake its listeners."""
    _check(validate_key, key, "'KEY'")
    _check(validate_value, value, "'VALUE'")
    meta_value = _meta(meta)
    env = open_env()
    with env.transaction() as session:
        sent = signal_store.send(session, key, value, sender=env.actor, now=env.clock.now(), meta=meta_value)
    ring(env.engine, env.settings.home)
    out.print(f"signal {sent.key} version {sent.version} (id {sent.id})", markup=False)


@app.command("list")
def list_(
    key: Annotated[str | None, typer.Argument(help="Only this key's signals, in version order.",
                                              show_default=False)] = None,
    since: Annotated[int, typer.Option("--since", help="Only signals after this version (with "
                                       "a KEY) or this id (without).")] = 0,
    limit: Annotated[int | None, typer.Option(help="At most N signals (the first N after "
                                              "--since).")] = None,
    as_json: Json = False,
) -> None:
    """Signals in the order they were sent, or one key's in version order."""
    if not 0 <= since <= MAX_ID:
        raise typer.BadParameter(f"--since must be 0 or more, up to {MAX_ID}, not {since}", param_hint="'--since'")
    if limit is not None and not 1 <= limit <= MAX_ID:
        raise typer.BadParameter(f"--limit must be 1 or more, up to {MAX_ID}, not {limit}", param_hint="'--limit'")
    if key is not None:
        _check(validate_key, key, "'KEY'")
    env = open_env()
    with env.reading() as session:
        found = signal_store.listing(session, key, since_version=since if key is not None else 0,
                                     since_id=since if key is None else 0, limit=limit)
    if as_json:
        print_json([s.as_json() for s in found])
        return
    table = Table("id", "key", "version", "sent at", "sender", "value")
    for s in found:
        shown = s.value if len(s.value) <= SHOWN_VALUE_CHARS else s.value[:SHOWN_VALUE_CHARS - 3] + "..."
        table.add_row(str(s.id), s.key, str(s.version), s.sent_at.isoformat(), s.sender, shown)
    out.print(table)
