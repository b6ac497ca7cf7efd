"""Where a try's log lives: $LEDGER_HOME/logs/<dag>/run_<run>/<task>[/map_<i>]/try_<n>.log. The scheduler
writes there; `ledger tasks logs`, `ledger dags test --record` and the web view read it."""

from __future__ import annotations

import os
from pathlib import Path

from ledger.core.mapping import NOT_MAPPED


def log_path(logs: Path, dag_id: str, run_id: int, task_id: str, try_number: int, map_index: int = NOT_MAPPED) -> Path:
    """Where a try's log goes: $LEDGER_HOME/logs/<dag>/run_<run>/<task>[/map_<i>]/try_<n>.log."""
    return Path(log_file(str(logs), dag_id, run_id, task_id, try_number, map_index))


def log_file(logs: str, dag_id: str, run_id: int, task_id: str, try_number: int, map_index: int = NOT_MAPPED) -> str:
    """log_path as text (the scheduler builds one per try: without pathlib's parsing)."""
    if map_index < 0:
        return os.path.join(logs, dag_id, f"run_{run_id}", task_id, f"try_{try_number}.log")
    return os.path.join(logs, dag_id, f"run_{run_id}", task_id, f"map_{map_index}", f"try_{try_number}.log")


MARK = ".database"  # in the logs folder: the identity of the database whose tries' logs it holds


def claim_folder(logs: Path, identity: str, *, new_database: bool = False) -> Path | None:
    """Make `logs` the folder of the database `identity` (decision 0350). Its paths name runs and tries by their
    ids, which a database made again in the same LEDGER_HOME starts at 1 again: the folder an earlier database
    wrote (its mark another identity; or no mark, when `new_database` says the database was just made) is moved
    aside whole, to `logs.<its identity>` (or `logs.before-<identity>`), so that no try's log begins with another
    database's try's. Returns where it went; None when the folder is already this database's or is new (a folder
    without a mark and a database that is not new, as after an upgrade to 0015, is taken as the database's own).
    Held under a lock beside the folder: two jobs starting together move it once."""
    import fcntl

    mark = logs / MARK
    if _held_by(logs) == identity:
        return None  # (every start of a job after the first: one read)
    logs.parent.mkdir(parents=True, exist_ok=True)
    with open(logs.parent / f".{logs.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        held = _held_by(logs)
        if held == identity:
            return None
        moved: Path | None = None
        if held is not None or (new_database and logs.is_dir() and any(logs.iterdir())):
            moved = _free_name(logs.with_name(f"{logs.name}.{held}" if held else f"{logs.name}.before-{identity}"))
            logs.rename(moved)
        logs.mkdir(exist_ok=True)
        partial = logs / f"{MARK}.{os.getpid()}"
        partial.write_text(identity + "\n")
        partial.replace(mark)
        return moved


def holds_logs_of(logs: Path, identity: str) -> bool:
    """Whether the folder's files are the logs of database `identity`: its mark names it, or it has no mark (a
    folder no job of a marked database has claimed yet: as claim_folder takes it). A reader on a host where no job
    has started since the database was made again (a PostgreSQL database made again from another host; a
    webserver's host) finds the earlier database's folder there, marked with its identity: not this try's log."""
    held = _held_by(logs) if identity else None
    return held is None or held == identity


def _held_by(logs: Path) -> str | None:
    """The identity the folder's mark names (None: no mark)."""
    try:
        return (logs / MARK).read_text().strip()
    except FileNotFoundError:
        return None


def _free_name(path: Path) -> Path:
    """`path`, or `path.2`, `path.3`, ...: the first that does not exist."""
    n = 1
    candidate = path
    while candidate.exists():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate
