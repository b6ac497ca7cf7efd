"""Options shared by several commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DagsFolder = Annotated[Path | None, typer.Option("--dags-folder", help="Folder of DAG files "
                       "(default: $LEDGER_DAGS_FOLDER or $LEDGER_HOME/dags).", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DagId = Annotated[str, typer.Argument(help="The DAG id.", show_default=False)]
