"""Storing signals, handing out their versions, and remembering what each listener was given.

Every function takes the caller's Session and never commits: a signal is sent by the transaction
that sends it, together with whatever else that transaction changes (the scheduler sends the task
state changes of a loop in the same transaction as it writes them).

Why a counter table (`signal_key`): the next version of a key is taken by one upsert that increments
the key's row and returns the new value (``INSERT ... ON CONFLICT (key) DO UPDATE SET version =
version + n RETURNING version``). It is atomic on both backends, costs one statement for a whole
batch, and the row it updates stays locked until commit, so a concurrent sender of the same key waits
and takes the following version: versions are 1, 2, 3, ... per key, without gaps or duplicates (a
rolled-back send rolls its increment back too), and they become visible in version order. That is
what lets a listener keep one number per key (its cursor) and know exactly what it missed.
``SELECT max(version) + 1`` would hand the same version to two concurrent senders; a sequence per key
would leave gaps.

Signal ids come from a sequence, so on PostgreSQL two sending transactions may commit in the
opposite order of their ids, and a reader that keeps the last id it handled could skip the smaller one
for good. `after_id` prevents that with a barrier: every sending transaction holds a shared
transaction-level advisory lock (`SEND_LOCK`) from its first send to its end, and `after_id` first
takes that lock exclusively (at session level) and releases it in the statement that reads the newest
id: two round trips. That waits for the sending transactions in flight; the newest id read under the
lock is a horizon below which every signal is committed (or rolled back), and `after_id` returns
nothing above it. (Session-level advisory locks need a session: behind PgBouncer, use session pooling.)
Senders never wait for each other; a reader waits for the senders in flight, and a sender starting
meanwhile waits for the barrier. So send signals late in a transaction, after its other writes and
after reading with `after_id`, to keep that wait short. (A transaction that has sent signals holds the
shared lock; two of them each waiting for the other's would deadlock, so there `after_id` waits at most
UPGRADE_WAIT and then returns nothing new, to be asked again.) On SQLite writers are serialised
(``BEGIN IMMEDIATE``), so ids are in commit order already. Per key, versions need none of this: the
counter row lock orders them. Each sending transaction also runs
``pg_notify('ledger_signals', <newest id>)``, delivered to listeners when (and only if) it commits; on
SQLite the sender rings the doorbells after commit (`ledger.services.signal_delivery.ring`).

Each signal is also an event (`signal_sent`) so that `ledger events` shows it with everything else.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import String, bindparam, func, or_, select, text, union_all
from sqlalchemy import cast as sql_cast
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from ledger.core.errors import InvalidInput
from ledger.core.signals import Signal, validate_key, validate_meta, validate_value
from ledger.models import tables
from ledger.store import events
from ledger.store.dialects import conflict_insert
from ledger.store.hot import Hot

CHANNEL = "ledger_signals"
"""The PostgreSQL NOTIFY channel; the payload is the newest signal id of the sending transaction."""

SEND_LOCK = 0x1ED6E751
"""PostgreSQL advisory lock key: shared by sending transactions, taken exclusively by `after_id`'s barrier."""

SIGNALS = tables.signal
KEYS = tables.signal_key
CURSORS = tables.signal_cursor

UPGRADE_WAIT = 0.2  # seconds `after_id` waits in a transaction that has sent signals itself
_SENT_IN = "ledger.core.signals.sent_in"  # session.info: the transaction that took the shared send lock

EVENT_VALUE_CHARS = 200
_CHUNK = 500  # rows per multi-row upsert (SQLite allows 32766 bound parameters per statement)

Item = tuple[str, str, dict[str, Any] | None]


def dialect_of(session: Session) -> str:
    return session.get_bind().dialect.name


def _utc(now: datetime) -> datetime:
    """`now` as a plain datetime in UTC (not pendulum's)."""
    if now.tzinfo is None:
        raise ValueError(f"naive datetime {now!r}; timestamps must be aware")
    if type(now) is datetime and now.tzinfo is UTC:
        return now
    offset = now.utcoffset()
    if offset is None:
        raise ValueError(f"datetime {now!r} has no UTC offset; timestamps must be aware")
    u = now.astimezone(UTC) if offset else now  # (a zero offset: its fields are UTC's already)
    return datetime(u.year, u.month, u.day, u.hour, u.minute, u.second, u.microsecond, tzinfo=UTC)


def _chunks(values: Sequence[str], size: int = _CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _from_row(row: Row[Any]) -> Signal:
    return Signal(id=row.id, key=row.key, version=row.version, value=row.value, sender=row.sender,
                  sent_at=row.sent_at, meta=row.meta)


# -- sending -----------------------------------------------------------------------------------------


# One key's counter bump and one cursor's move, as text: SQLAlchemy compiles an ON CONFLICT statement afresh
# on each execution (it has no cache key), which costs more than its round trip. The same SQL runs on
# PostgreSQL and SQLite (3.35 or later, for RETURNING).
_BUMP_ONE = Hot(text('INSERT INTO signal_key ("key", version) VALUES (:key, :n) ON CONFLICT ("key") DO UPDATE '
                     'SET version = signal_key.version + excluded.version RETURNING "key", version'))
_INSERT_SIGNALS = Hot(SIGNALS.insert())
_LOCK_AND_BUMP_ONE = text(  # PostgreSQL: the shared send lock is taken before the row is written
    'INSERT INTO signal_key ("key", version) SELECT :key, :n FROM (SELECT pg_advisory_xact_lock_shared(:lock)) '
    'AS send_lock ON CONFLICT ("key") DO UPDATE SET version = signal_key.version + excluded.version '
    'RETURNING "key", version')
_INSERT_AND_NOTIFY = SIGNALS.insert().returning(SIGNALS.c.id, func.pg_notify(CHANNEL, sql_cast(SIGNALS.c.id, String)))
_NOTIFY_NEWEST = text("SELECT pg_notify(:channel, lastval()::text)")  # the id of the row just inserted
_ADVANCE_ONE = text(
    'INSERT INTO signal_cursor (listener, "key", version, updated_at) VALUES (:listener, :key, :version, :at) '
    'ON CONFLICT (listener, "key") DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at '
    'WHERE signal_cursor.version < excluded.version').bindparams(bindparam("at", type_=CURSORS.c.updated_at.type))


_BUMP_MANY: dict[int, Hot] = {}


def _bump_many(n: int) -> Hot:
    """The counter upsert of `n` keys, as text built once per `n` (as _BUMP_ONE, and for the same reason)."""
    found = _BUMP_MANY.get(n)
    if found is None:
        values = ", ".join(f"(:k{i}, :n{i})" for i in range(n))
        found = _BUMP_MANY[n] = Hot(text(
            f'INSERT INTO signal_key ("key", version) VALUES {values} ON CONFLICT ("key") DO UPDATE '
            'SET version = signal_key.version + excluded.version RETURNING "key", version'))
    return found


def listen(conn: Any) -> None:
    """Subscribe a raw psycopg connection (autocommit) to the signals' NOTIFY channel (ledger.services.signal_delivery's
    PostgreSQL doorbell)."""
    conn.execute(f"LISTEN {CHANNEL}")


def send(session: Session, key: str, value: str, *, sender: str, now: datetime,
         meta: dict[str, Any] | None = None) -> Signal:
    """Store the next version of `key` with `value`; an event records it. Validates first (InvalidInput)."""
    return send_many(session, [(key, value, meta)], sender=sender, now=now)[0]


def send_many(session: Session, items: Sequence[Item], *, sender: str, now: datetime,
              record_events: bool = True) -> list[Signal]:
    """Store a batch of (key, value, meta): per key, consecutive versions in list order.

    Cheap enough for a hot loop: one counter upsert per 500 distinct keys, one bulk insert of the
    signals, one of their events, and on PostgreSQL one lock and one pg_notify. Nothing is stored
    when any item is invalid. `record_events=False` leaves the events out (task state signals: their
    changes are recorded as task tries already).
    """
    return _send(session, items, sender=sender, now=now, record_events=record_events) or []


def send_unreturned(session: Session, items: Sequence[Item], *, sender: str, now: datetime) -> None:
    """send_many without events and without reading the new signals' ids back: the batch is one executemany
    (SQLite cannot return the ids of a multi-row insert in order, so send_many inserts row by row there).
    For the scheduler's task state signals, whose ids nobody asks for, and which it builds itself: keys it
    checked with is_valid_key, task states for values, meta of names and numbers (the insert still refuses meta
    that is not JSON). They are not validated a second time."""
    _send(session, items, sender=sender, now=now, record_events=False, want_ids=False, checked=True)


def _send(session: Session, items: Sequence[Item], *, sender: str, now: datetime, record_events: bool,
          want_ids: bool = True, checked: bool = False) -> list[Signal] | None:
    if not items:
        return []
    valid = items if checked else [(validate_key(k), validate_value(v), validate_meta(m)) for k, v, m in items]
    if not sender or len(sender) > 250:
        raise InvalidInput(f"signal sender must have 1 to 250 characters, not {len(sender)}")
    dialect = dialect_of(session)
    conflict_insert(dialect)  # refuses a database other than SQLite and PostgreSQL
    postgres = dialect == "postgresql"
    counts: dict[str, int] = {}
    for key, _, _ in valid:
        counts[key] = counts.get(key, 0) + 1
    following: dict[str, int] = {}
    if session.autoflush:  # Core statements on the session's connection (the ORM's execute costs more per call)
        session.flush()
    conn = session.connection() if postgres else None
    if len(counts) == 1:  # the usual send: one key, one cached statement (that takes the lock on PostgreSQL)
        ((key, n),) = counts.items()
        top = _BUMP_ONE.rows(session, {"key": key, "n": n})[0][1] if conn is None \
            else conn.execute(_LOCK_AND_BUMP_ONE, {"key": key, "n": n, "lock": SEND_LOCK}).one()[1]
        counts = {}
        following[key] = top - n + 1
    elif postgres:
        session.execute(text("SELECT pg_advisory_xact_lock_shared(:lock)"), {"lock": SEND_LOCK})
    if postgres:
        session.info[_SENT_IN] = session.get_transaction()  # this transaction holds the shared lock
    for chunk in _chunks(sorted(counts)):  # sorted: concurrent batches lock key rows in the same order
        params: dict[str, Any] = {}
        for i, k in enumerate(chunk):
            params[f"k{i}"], params[f"n{i}"] = k, counts[k]
        for key, top in _bump_many(len(chunk)).rows(session, params):
            following[key] = top - counts[key] + 1
    at = _utc(now)
    rows: list[dict[str, Any]] = []
    for key, value, meta in valid:
        rows.append({"key": key, "version": following[key], "value": value, "sender": sender, "sent_at": at,
                     "meta": meta})
        following[key] += 1
    if not want_ids:
        _INSERT_SIGNALS.run(session, rows)
        if conn is not None:
            conn.execute(_NOTIFY_NEWEST, {"channel": CHANNEL})
        return None
    if postgres and len(rows) == 1:  # its NOTIFY in the same statement
        ids = [session.execute(_INSERT_AND_NOTIFY.values(rows[0])).one()[0]]
    else:
        ids = list(session.execute(SIGNALS.insert().returning(SIGNALS.c.id, sort_by_parameter_order=True),
                                   rows).scalars())
    signals = [Signal(id=int(i), key=r["key"], version=r["version"], value=r["value"], sender=sender, sent_at=at,
                      meta=r["meta"]) for i, r in zip(ids, rows, strict=True)]
    events.record_many(session, [] if not record_events else [
        {"at": at, "kind": "signal_sent", "actor": sender, "dag_id": None, "run_id": None,
         "details": {"key": s.key, "version": s.version, "value": s.value[:EVENT_VALUE_CHARS], "signal_id": s.id,
                     "meta": s.meta}}
        for s in signals])
    if postgres and len(rows) > 1:
        session.execute(text("SELECT pg_notify(:channel, :payload)"),
                        {"channel": CHANNEL, "payload": str(signals[-1].id)})
    return signals


# -- reading -----------------------------------------------------------------------------------------


def listing(session: Session, key: str | None = None, *, since_version: int = 0, since_id: int = 0,
            limit: int | None = None) -> list[Signal]:
    """Signals in id order, or one key's in version order; the first `limit` after `since_*`."""
    if since_version < 0 or since_id < 0:
        raise InvalidInput(f"since must be 0 or more, not {min(since_version, since_id)}")
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be 1 or more, not {limit}")
    stmt = select(SIGNALS)
    if key is not None:
        stmt = stmt.where(SIGNALS.c.key == validate_key(key)).order_by(SIGNALS.c.version)
        if since_version:
            stmt = stmt.where(SIGNALS.c.version > since_version)
    else:
        if since_version:
            raise InvalidInput("since_version needs a key (versions count the signals of one key)")
        stmt = stmt.order_by(SIGNALS.c.id)
    if since_id:
        stmt = stmt.where(SIGNALS.c.id > since_id)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [_from_row(r) for r in session.execute(stmt)]


def newest_first(session: Session, key: str | None = None, *, before: int | None = None, limit: int,
                 hide_prefix: str | None = None, scan: int | None = None) -> tuple[list[Signal], int | None]:
    """The newest `limit` signals (of one key), newest first: those with an id below `before` (the keyset of the
    next older page), leaving out the keys that start with `hide_prefix`, looking then at most at the `scan` ids
    below `before` (a page of a few shown signals among many hidden ones stays fast). Returns the signals and the
    `before` of the next older page (None when there is none)."""
    top = before if before is not None else newest_id(session) + 1
    stmt = select(SIGNALS).where(SIGNALS.c.id < top).order_by(SIGNALS.c.id.desc()).limit(limit)
    floor = 1
    if key is not None:
        stmt = stmt.where(SIGNALS.c.key == validate_key(key))
    elif hide_prefix is not None:
        stmt = stmt.where(~SIGNALS.c.key.startswith(hide_prefix, autoescape=True))
        if scan is not None:
            floor = max(top - scan, 1)
            stmt = stmt.where(SIGNALS.c.id >= floor)
    found = [_from_row(r) for r in session.execute(stmt)]
    if len(found) == limit:
        return found, found[-1].id
    return found, (floor if floor > 1 else None)


def newest_id(session: Session) -> int:
    """The id of the newest signal, 0 when there is none."""
    return int(session.scalar(select(func.max(SIGNALS.c.id))) or 0)


def newest_version(session: Session, key: str) -> int:
    """The newest version of `key` (how many signals it has had), 0 when none."""
    return int(session.scalar(select(KEYS.c.version).where(KEYS.c.key == key)) or 0)


def by_ids(session: Session, ids: Collection[int]) -> dict[int, Signal]:
    """The signals with these ids, by id (ids that do not exist are left out)."""
    wanted = sorted(set(ids))
    found: dict[int, Signal] = {}
    for start in range(0, len(wanted), _CHUNK):
        stmt = select(SIGNALS).where(SIGNALS.c.id.in_(wanted[start:start + _CHUNK]))
        found.update((s.id, s) for s in map(_from_row, session.execute(stmt)))
    return found


def after_id(session: Session, since_id: int, keys: Collection[str] | None = None,
             limit: int = 1000, *, prefixes: Collection[str] = ()) -> list[Signal]:
    """The first `limit` signals with an id above `since_id` (of `keys` only, if given), in id order.

    A reader that keeps the last id it handled never skips a signal that commits later: on PostgreSQL
    this waits for the sending transactions in flight and returns only ids up to the horizon they
    leave (see the module docstring). Call it before sending signals in the same transaction: after,
    it waits at most UPGRADE_WAIT for other senders and may return [] (nothing lost: ask again).
    """
    stmt = select(SIGNALS).where(SIGNALS.c.id > since_id)
    if keys is not None:  # these keys, and keys starting with one of `prefixes`
        wanted = sorted(set(keys))
        if not wanted and not prefixes:
            return []
        stmt = stmt.where(or_(SIGNALS.c.key.in_(wanted),
                              *(SIGNALS.c.key.startswith(p, autoescape=True) for p in sorted(set(prefixes)))))
    if dialect_of(session) == "postgresql":
        horizon = committed_horizon(session)
        if horizon is None:
            return []
        stmt = stmt.where(SIGNALS.c.id <= horizon)
    return [_from_row(r) for r in session.execute(stmt.order_by(SIGNALS.c.id).limit(limit))]


def committed_horizon(session: Session) -> int | None:
    """PostgreSQL: wait for the sending transactions in flight (other than this one), then the newest
    signal id: every signal up to it is committed, rolled back, or this transaction's own.

    Two statements: take the send lock exclusively at session level (it waits for the senders in
    flight, and holds off new ones); then, in one statement whose snapshot is taken while the lock is
    held, read the newest id and release the lock. Should anything fail between the two, the
    connection is closed (the only sure way to release a session-level lock) and the error raised.

    A transaction that has sent signals itself holds the shared lock, and two such transactions waiting
    for each other's would deadlock; so it waits at most UPGRADE_WAIT (inside a savepoint that undoes
    the lock and the timeout), and None (no horizon now: try again later) is the answer when that is not
    enough. Read before you send to avoid this.
    """
    if session.info.get(_SENT_IN) is session.get_transaction():
        return _horizon_after_sending(session)
    conn = session.connection()
    try:
        conn.execute(_BARRIER, {"lock": SEND_LOCK})
        newest = conn.execute(_RELEASE, {"lock": SEND_LOCK}).one()[1]
    except BaseException:
        conn.invalidate()
        raise
    return int(newest or 0)


_BARRIER = text("SELECT pg_advisory_lock(:lock)")
_RELEASE = text("SELECT pg_advisory_unlock(:lock), (SELECT max(id) FROM signal)")


def _horizon_after_sending(session: Session) -> int | None:
    barrier = session.begin_nested()
    try:
        session.execute(text(f"SET LOCAL lock_timeout = '{int(UPGRADE_WAIT * 1000)}ms'"))
        try:
            session.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": SEND_LOCK})
        except DBAPIError:
            return None
        return int(session.scalar(select(func.max(SIGNALS.c.id))) or 0)
    finally:
        barrier.rollback()  # releases the exclusive lock at once (and undoes SET LOCAL)


def pending(session: Session, versions: Mapping[str, int], limit: int = 1000) -> list[Signal]:
    """The first `limit` signals of the keys of `versions` above the version given for each, in id order
    (which is version order within a key). Each key is read on the (key, version) index."""
    found: list[Signal] = []
    keys = sorted(versions)
    for chunk in _chunks(keys, 100):
        parts = [select(SIGNALS).where(SIGNALS.c.key == k, SIGNALS.c.version > versions[k])
                 .order_by(SIGNALS.c.version).limit(limit).subquery() for k in chunk]
        both = union_all(*[select(part) for part in parts]).subquery()
        found += [_from_row(r) for r in session.execute(select(both).order_by(both.c.id).limit(limit))]
    found.sort(key=lambda s: s.id)
    return found[:limit]


# -- cursors -----------------------------------------------------------------------------------------


def _check_cursor(listener: str, key: str) -> None:
    if not listener or len(listener) > 250:
        raise InvalidInput(f"a listener name has 1 to 250 characters, not {len(listener)}")
    if not key or len(key) > 200:
        raise InvalidInput(f"a cursor key has 1 to 200 characters, not {len(key)}")


def cursor(session: Session, listener: str, key: str, *, lock: bool = False) -> int:
    """The last version of `key` delivered to `listener` (0 if none).

    Cursor keys are free text (up to 200 characters), so a listener may also keep a position that is
    not a signal key, such as the last signal id it handled under ``"*"``.

    With `lock`, on PostgreSQL the cursor row is created if missing and locked (``SELECT ... FOR
    UPDATE``) until the end of the transaction: a second process of the same listener waits there, and
    then reads the cursor the first one advanced, so the two never deliver the same signal. On SQLite
    the write transaction (``BEGIN IMMEDIATE``) already serialises them.
    """
    return cursors(session, listener, [key], lock=lock)[key]


def cursors(session: Session, listener: str, keys: Collection[str], *, lock: bool = False,
            skip_locked: bool = False) -> dict[str, int]:
    """The cursors of `listener` for `keys` (0 if none), as `cursor` does for one key.

    With `lock` and `skip_locked` (PostgreSQL) nothing is waited for: only cursor rows that exist and
    that no other transaction holds are locked and returned; the other keys are left out (a peer is
    delivering them, or their row was never made: see `ensure_cursors`).
    """
    wanted = sorted(set(keys))
    for key in wanted:
        _check_cursor(listener, key)
    if not wanted:
        return {}
    stmt = select(CURSORS.c.key, CURSORS.c.version).where(CURSORS.c.listener == listener,
                                                           CURSORS.c.key.in_(wanted))
    if lock and dialect_of(session) == "postgresql":
        stmt = stmt.order_by(CURSORS.c.key).with_for_update(skip_locked=skip_locked)
        found = {k: int(v) for k, v in session.execute(stmt).tuples()}
        if skip_locked or len(found) == len(wanted):  # the usual case: every row exists, one statement
            return found
        _ensure(session, listener, [k for k in wanted if k not in found], func.now())
        return {k: int(v) for k, v in session.execute(stmt).tuples()}
    found = {k: int(v) for k, v in session.execute(stmt).tuples()}
    return {k: found.get(k, 0) for k in wanted}


def ensure_cursors(session: Session, listener: str, keys: Collection[str], now: datetime) -> None:
    """Create the missing cursor rows of `listener` for `keys` at version 0 (so that they can be locked).
    Commit this before locking them with `skip_locked`: it waits for a concurrent insert of the same row."""
    wanted = sorted(set(keys))
    for key in wanted:
        _check_cursor(listener, key)
    if wanted:
        _ensure(session, listener, wanted, _utc(now))


def _ensure(session: Session, listener: str, keys: Sequence[str], at: Any) -> None:
    insert = conflict_insert(dialect_of(session))
    for chunk in _chunks(keys):
        stmt = insert(CURSORS).values(_rows([{"listener": listener, "key": k, "version": 0, "updated_at": at}
                                             for k in chunk]))
        session.execute(stmt.on_conflict_do_nothing(index_elements=[CURSORS.c.listener, CURSORS.c.key]))


def _rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | dict[str, Any]:
    """VALUES for an insert: one row as a dict, so that SQLAlchemy can cache the compiled statement (a
    multi-row VALUES is compiled afresh each time, which costs more than the round trip in a hot loop)."""
    return rows[0] if len(rows) == 1 else rows


def advance(session: Session, listener: str, key: str, version: int, now: datetime) -> None:
    """Move the cursor of (`listener`, `key`) to `version`; a cursor never moves backwards."""
    advance_many(session, listener, {key: version}, now)


def advance_many(session: Session, listener: str, versions: Mapping[str, int], now: datetime) -> None:
    """`advance` for several keys of one listener, in one statement per 500 keys."""
    for key, version in versions.items():
        _check_cursor(listener, key)
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidInput(f"a cursor version is a whole number, 0 or more, not {version!r}")
    if not versions:
        return
    at = _utc(now)
    if len(versions) == 1:
        ((key, version),) = versions.items()
        session.execute(_ADVANCE_ONE, {"listener": listener, "key": key, "version": version, "at": at})
        return
    insert = conflict_insert(dialect_of(session))
    for chunk in _chunks(sorted(versions)):
        stmt = insert(CURSORS).values(_rows([{"listener": listener, "key": k, "version": versions[k],
                                              "updated_at": at} for k in chunk]))
        stmt = stmt.on_conflict_do_update(
            index_elements=[CURSORS.c.listener, CURSORS.c.key],
            set_={"version": stmt.excluded.version, "updated_at": stmt.excluded.updated_at},
            where=CURSORS.c.version < stmt.excluded.version)
        session.execute(stmt)
