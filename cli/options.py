"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DagsFolder = Annotated[Path | None, typer.Option("--dags-folder", help="Folder of DAG files "
                       "(default: $LEDGER_DAGS_FOLDER or $LEDGER_HOME/dags).", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DagId = Annotated[str, typer.Argument(help="The DAG id.", show_default=False)]
Reason = Annotated[str | None, typer.Option("--reason", help="Why (kept in the event, with who did it).",
                                            show_default=False)]


def reason_text(text: str | None) -> str | None:
    """An operator's --reason on one line; an empty one is refused."""
    if text is not None and not text.strip():
        raise typer.BadParameter("--reason must not be empty", param_hint="'--reason'")
    return None if text is None else " ".join(text.split())
