"""`ledger db upgrade|downgrade|check|rotate-fernet-key`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ledger.cli.env import Env, open_env
from ledger.cli.options import usage_error
from ledger.core.errors import DatabaseNotReady, InvalidInput
from ledger.migrations.code_guard import ACTOR, FORCE, NOW, CodeLoss, code_loss
from ledger.store.db import (
    alembic_config,
    current_revision,
    describe_database,
    ensure_ready,
    head_revision,
    make_engine,
    newer_than_this_ledger,
    sqlite_file_missing,
)

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Engine

app = typer.Typer(help="Create, upgrade and check the ledger database.", no_args_is_help=True)
out = Console()


@app.command()
def upgrade(revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Create the database or bring its schema up to REVISION (default: the newest)."""
    env = open_env()
    if sqlite_file_missing(env.settings.database_url):  # the one command that creates the database
        make_engine(env.settings.database_url, create=True).dispose()
    before = current_revision(env.engine)
    newer = newer_than_this_ledger(describe_database(env.settings.database_url), before)
    if newer is not None:
        raise DatabaseNotReady(newer)
    from alembic import command  # here: every other command starts faster without alembic (0.14 s of imports)
    from alembic.util.exc import CommandError

    try:
        command.upgrade(alembic_config(env.settings.database_url), revision)
    except CommandError as exc:
        raise InvalidInput(f"cannot upgrade to {revision!r}: {exc}") from None
    after = current_revision(env.engine)
    where = describe_database(env.settings.database_url)
    if before == after:
        out.print(f"{where} is already at revision {after}")
    else:
        out.print(f"upgraded {where} from {before or 'empty'} to {after}")
    if before is None and after is not None and after >= "0015":  # a database just made, with its identity
        _claim_logs(env)


def _claim_logs(env: Env) -> None:
    """A new database's logs folder: one an earlier database in this LEDGER_HOME wrote is moved aside (decision
    0350), so that the new database's first tries, whose ids start at 1 again, do not write after the old ones."""
    from ledger.infra.logs import claim_folder
    from ledger.store import identity as identity_store

    if not env.settings.logs_folder.is_dir():
        return  # (the first job marks the folder it makes)
    with env.sessions.begin() as session:
        identity = identity_store.read(session).identity
    moved = claim_folder(env.settings.logs_folder, identity, new_database=True)
    if moved is not None:
        out.print(f"moved the logs of an earlier database from {env.settings.logs_folder} to {moved}", soft_wrap=True)


@app.command()
def downgrade(revision: Annotated[str, typer.Argument(help="Target revision; 'base' removes every "
                                                      "table.")] = "-1",
              force: Annotated[bool, typer.Option("--force", help="Also when it drops the code DAG versions ran "
                                                  "(below 0006; recorded as code_dropped events).")] = False
              ) -> None:
    """Take the schema down to REVISION (default: one step back).

    Refused, changing nothing, when it would drop the code DAG versions ran (below 0006), unless --force."""
    env = open_env()
    _known_revision(alembic_config(env.settings.database_url), revision)
    if sqlite_file_missing(env.settings.database_url):
        raise DatabaseNotReady(f"no database at {describe_database(env.settings.database_url)}; nothing to "
                               "downgrade")
    before = current_revision(env.engine)
    if before is None:
        raise DatabaseNotReady(f"{describe_database(env.settings.database_url)} has no ledger schema to "
                               "downgrade")
    from alembic import command
    from alembic.util.exc import CommandError

    config = alembic_config(env.settings.database_url)
    loss = _code_lost(env.engine, config, before, revision)
    if loss is not None and not force:
        raise InvalidInput(f"refusing to downgrade to {revision}: it drops {loss.describe()}, and runs could no "
                           "longer say what code they ran; back the database up, then pass --force to drop them "
                           "(recorded as code_dropped events)")
    config.attributes.update({FORCE: force, NOW: env.clock.now(), ACTOR: env.actor})
    for drops in _what_it_drops(config, before, revision):
        out.print(f"dropping {drops}")
    try:
        command.downgrade(config, revision)
    except CommandError as exc:
        raise InvalidInput(f"cannot downgrade to {revision!r}: {exc}") from None
    out.print(f"downgraded {describe_database(env.settings.database_url)} from {before} to "
              f"{current_revision(env.engine) or 'base'}")


def _known_revision(config: Config, revision: str) -> None:
    """A revision no migration has (or a relative one that goes past the first) is a usage error (exit 2)."""
    from alembic.script import ScriptDirectory
    from alembic.util.exc import CommandError

    try:
        ScriptDirectory.from_config(config).get_revisions(revision)
    except CommandError as exc:
        raise usage_error(f"no schema revision {revision!r} ({exc}); the revisions are 0001 to "
                          f"{ScriptDirectory.from_config(config).get_current_head()}, or base") from None


def _what_it_drops(config: Config, before: str, revision: str) -> list[str]:
    """What the migrations a downgrade undoes say they drop (their DROPS), newest first."""
    from alembic.script import ScriptDirectory
    from alembic.script.revision import RevisionError

    try:
        undone = list(ScriptDirectory.from_config(config).iterate_revisions(before, revision))
    except RevisionError:
        return []
    return [str(drops) for script in undone if (drops := getattr(script.module, "DROPS", None))]


def _code_lost(engine: Engine, config: Config, before: str, revision: str) -> CodeLoss | None:
    """What downgrading from `before` to `revision` drops of the code versions ran (None: nothing, or a
    revision alembic cannot resolve: it says why when asked to downgrade)."""
    from alembic.script import ScriptDirectory
    from alembic.script.revision import RevisionError

    try:
        undone = {r.revision for r in ScriptDirectory.from_config(config).iterate_revisions(before, revision)}
    except RevisionError:
        return None
    with engine.connect() as conn:
        return code_loss(conn, undone)


@app.command()
def check() -> None:
    """Exit 0 when the database is at the newest revision, 1 (with the reason) otherwise."""
    env = open_env()
    ensure_ready(env.settings.database_url, env.read_engine)
    out.print(f"{describe_database(env.settings.database_url)} is at revision "
              f"{head_revision(env.settings.database_url)} (head)")


@app.command("rotate-fernet-key")
def rotate_fernet_key() -> None:
    """Encrypt every stored secret again with the first Fernet key.

    The first of LEDGER_FERNET_KEY, or of the key file in LEDGER_HOME; the keys after it can then be removed."""
    from ledger.infra.fernet import fernet_keys, rotate
    from ledger.store import events
    from ledger.store import secrets as secret_store

    env = open_env()
    keys, where = fernet_keys()
    with env.transaction() as session:
        variables, connections = secret_store.reencrypt(session, rotate)
        events.record(session, "fernet_key_rotated", at=env.clock.now(), actor=env.actor, variables=variables,
                      connections=connections)
    out.print(f"re-encrypted {variables} variable(s) and {connections} connection(s) with the first key of {where}"
              + ("; the keys after it can now be removed" if len(keys) > 1 else ""), highlight=False)
