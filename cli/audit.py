"""`ledger audit verify` and `ledger audit export`: the events' hash chains (decisions 0260-0262)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ledger.cli.env import open_env
from ledger.cli.options import id_parser
from ledger.core.dates import parse_user_date
from ledger.core.errors import DagNotFound, InvalidInput

app = typer.Typer(no_args_is_help=True, help="Verify that the history was not edited, and export it for others to "
                                             "check.")
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

TAMPERED = 3
"""The exit status of a verify that found a break: apart from 1 (refused: an unknown DAG, the database down), so
that a job running it tells an edited history from a misspelt name (docs/cli-reference.md, "Exit statuses")."""


@app.command()
def verify(
    dags: Annotated[list[str] | None, typer.Argument(help="Only these DAGs' chains (default: every chain, the "
                                                         "events with no DAG included, and all code).")] = None,
    since: Annotated[int | None, typer.Option("--since", parser=id_parser("event id"), show_default=False,
                                              help="Only from this event on (and the runs those events report).")
                     ] = None,
    bundle: Annotated[Path | None, typer.Option("--bundle", help="Check this export instead, with no database.",
                                                show_default=False)] = None,
    key: Annotated[str | None, typer.Option("--key", help="With --bundle: the public key (hex) the export must be "
                                                          "signed with.", show_default=False)] = None,
) -> None:
    """Recompute the events' hash chains and the rows they cover; print the first break of each, one line each.

    Exit 0 when everything verifies; 3 when something does not (the history was edited past
    ledger); 1 when the check is refused (an unknown DAG, no such file, the database down)."""
    from ledger.services import audit

    if bundle is not None:
        if dags or since is not None:
            raise InvalidInput("--bundle checks the export alone: give no DAG and no --since with it")
        report = audit.verify_bundle(audit.read_bundle(bundle), trusted_key=key)
    else:
        if key is not None:
            raise InvalidInput("--key checks the signature of an export: give it with --bundle")
        env = open_env()
        with env.reading() as session:
            report = audit.verify(session, dags, since=since)
    for b in report.notices + report.breaks:
        out.print(b.line(), markup=False)
    if not report.ok:
        err.print(f"{len(report.breaks)} break(s); {report.summary()}", markup=False)
        raise typer.Exit(TAMPERED)
    out.print(report.summary(), markup=False)


@app.command()
def export(
    dag: Annotated[str, typer.Argument(help="The DAG.")],
    start: Annotated[str, typer.Option(help="First logical date (ISO; a bare date is read in the DAG's timezone).",
                                       show_default=False)],
    end: Annotated[str, typer.Option(help="Last logical date (inclusive).", show_default=False)],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="The file to write (default: "
                                                "DAG-START-END.audit.json here).", show_default=False)] = None,
) -> None:
    """Write the runs of DAG with a logical date in [START, END], their tries, their versions' code and the
    chain's events from the first about them to its head, to one file `ledger audit verify --bundle` (or the
    script in docs/concepts.md) checks with no database. Signed with LEDGER_AUDIT_KEY when it is set."""
    from ledger.services import audit
    from ledger.store import dags as dag_store

    key = audit.audit_key()
    env = open_env()
    with env.reading() as session:
        found = dag_store.find(session, dag)
        if found is None:
            raise DagNotFound(dag)
        first = parse_user_date(start, timezone=found.timezone, what="--start")
        last = parse_user_date(end, timezone=found.timezone, what="--end", end_of_day=True)
        doc = audit.export(session, dag, first, last, key=key)
    path = output or Path(f"{dag}-{first.date()}-{last.date()}.audit.json")
    try:
        audit.write_bundle(doc, path)
    except OSError as exc:
        raise InvalidInput(f"cannot write {path}: {exc.strerror or exc}") from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    signed = f", signed by {doc['signature']['public_key']}" if "signature" in doc else ", unsigned"
    out.print(f"wrote {path}: {len(doc['runs'])} run(s), {len(doc['events'])} event(s), head {doc['head']['hash']}"
              f"{signed}; sha256 {digest}", markup=False)
