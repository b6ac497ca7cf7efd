"""The loop's hot statements on the DB-API cursor (ledger/store/hot.py): they write and read exactly what the
same statements write and read through SQLAlchemy, on a real SQLite file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pendulum
import pytest
from sqlalchemy import bindparam, func, select, text, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError, InvalidRequestError
from sqlalchemy.orm import Session

from ledger.models import Event, Pool
from ledger.models.base import UtcDateTime
from ledger.store import events, hot
from ledger.store.hot import Hot
from tests.statements import statements_on

AT = datetime(2026, 11, 25, 6, 30, tzinfo=UTC)
EVENTS: Any = Event.__table__
POOLS: Any = Pool.__table__
_RENAME = update(EVENTS).where(EVENTS.c.id == bindparam("event")).values(
    kind=bindparam("kind"), at=bindparam("when", type_=EVENTS.c.at.type), actor="hot")
_KINDS = select(EVENTS.c.kind, func.count()).where(EVENTS.c.id.in_(bindparam("ids", expanding=True)),
                                                  EVENTS.c.actor.in_(["hot", "cold"])).group_by(EVENTS.c.kind)


@pytest.fixture
def sessions(sqlite_sessions: Any) -> Any:
    """SQLite's only: on PostgreSQL Hot hands every statement to SQLAlchemy (ledger/store/hot.py)."""
    return sqlite_sessions


def some_events(session: Session, n: int) -> list[int]:
    events.record_many(session, [dict(at=AT, kind="pool_set", actor="cold", details={"i": i}) for i in range(n)])
    return events.written_ids(session)[-n:]


def test_an_update_of_many_rows_binds_aware_datetimes_as_sqlalchemy_would(session: Session) -> None:
    ids = some_events(session, 3)
    Hot(_RENAME).run(session, [{"event": i, "kind": f"renamed_{n}", "when": AT + timedelta(hours=n)}
                               for n, i in enumerate(ids[:2])])
    rows = session.execute(select(Event).where(Event.id.in_(ids)).order_by(Event.id)).scalars().all()
    assert [(e.kind, e.at, e.actor) for e in rows] == [
        ("renamed_0", AT, "hot"), ("renamed_1", AT + timedelta(hours=1), "hot"), ("pool_set", AT, "cold")]
    assert rows[0].at.tzinfo is not None


def test_an_insert_sets_only_the_columns_its_rows_give_and_serialises_json(session: Session) -> None:
    insert = Hot(EVENTS.insert().returning(EVENTS.c.id))
    (first,), = insert.rows(session, {"at": AT, "kind": "pool_set", "actor": "hot", "details": {"slots": 4}})
    (second,), = insert.rows(session, {"at": AT, "kind": "pool_set", "actor": "hot", "details": {"slots": 5},
                                        "dag_id": "daily"})
    found = {e.id: e for e in session.execute(select(Event).where(Event.id.in_([first, second]))).scalars()}
    assert (found[first].details, found[first].dag_id) == ({"slots": 4}, None)
    assert (found[second].details, found[second].dag_id) == ({"slots": 5}, "daily")


def test_a_select_expands_its_in_lists_for_each_length(session: Session) -> None:
    ids = some_events(session, 4)
    kinds = Hot(_KINDS)
    assert kinds.rows(session, {"ids": ids[:1]}) == [("pool_set", 1)]
    assert kinds.rows(session, {"ids": ids}) == [("pool_set", 4)]
    assert kinds.rows(session, {"ids": []}) == []
    assert kinds.rows(session, {"ids": ids[:2]}) == [tuple(r) for r in session.execute(_KINDS, {"ids": ids[:2]})]


def test_a_text_statement_with_returning_gives_its_rows(session: Session) -> None:
    bump = Hot(text('INSERT INTO signal_key ("key", version) VALUES (:key, :n) ON CONFLICT ("key") DO UPDATE '
                    'SET version = signal_key.version + excluded.version RETURNING "key", version'))
    assert bump.rows(session, {"key": "sales.ready", "n": 2}) == [("sales.ready", 2)]
    assert bump.rows(session, {"key": "sales.ready", "n": 3}) == [("sales.ready", 5)]


def test_a_missing_parameter_is_refused_before_anything_runs(session: Session) -> None:
    ids = some_events(session, 1)
    with pytest.raises(InvalidRequestError, match="'when'"):  # SQLAlchemy's own refusal
        Hot(_RENAME).run(session, [{"event": ids[0], "kind": "renamed"}])
    with pytest.raises(KeyError, match="'when'"):  # a later row of the same call
        Hot(_RENAME).run(session, [{"event": ids[0], "kind": "renamed", "when": AT}, {"event": ids[0], "kind": "x"}])
    assert session.get(Event, ids[0]).kind == "pool_set"  # type: ignore[union-attr]


def test_a_driver_error_is_raised_as_sqlalchemys_error(session: Session) -> None:
    insert = Hot(POOLS.insert())
    insert.run(session, [{"name": "spark", "slots": 2, "description": ""}])
    with pytest.raises(IntegrityError, match="UNIQUE"):
        insert.run(session, [{"name": "spark", "slots": 3, "description": ""}])


def test_a_statement_on_the_cursor_is_reported_to_hots_observers_and_counted_with_sqlalchemys(
        sessions: Any) -> None:
    """Listening changes nothing: the statements run on the cursor, as in production, and Hot reports them."""
    reported: list[tuple[str, Any, bool]] = []
    with sessions.begin() as session:
        ids = some_events(session, 2)
        with hot.observe(lambda _conn, sql, parameters, many: reported.append((sql, parameters, many))), \
                statements_on(session.get_bind()) as counted:
            Hot(_RENAME).run(session, [{"event": i, "kind": "renamed", "when": AT} for i in ids])
            assert Hot(_KINDS).rows(session, {"ids": ids}) == [("renamed", 2)]
            session.execute(select(func.count()).select_from(Event))
        assert hot._connection(session)[1] is not None
    assert [(sql.split()[0], many) for sql, _, many in reported] == [("UPDATE", True), ("SELECT", False)]
    assert reported[0][1] == [("2026-11-25 06:30:00.000000", "renamed", "hot", i) for i in ids]  # columns in order
    assert len(counted) == 3 and counted[:2] == [" ".join(sql.split()) for sql, _, _ in reported]
    with sessions() as session:
        assert {session.get(Event, i).kind for i in ids} == {"renamed"}  # type: ignore[union-attr]


def test_an_observer_is_told_nothing_after_its_block(session: Session) -> None:
    reported: list[str] = []
    with hot.observe(lambda _conn, sql, *_: reported.append(sql)):
        Hot(_KINDS).rows(session, {"ids": [1]})
    Hot(_KINDS).rows(session, {"ids": [1]})
    assert len(reported) == 1 and not hot._OBSERVERS


@pytest.mark.parametrize("value", [AT, AT.replace(microsecond=0), AT.replace(microsecond=123456),
                                   datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin")),
                                   datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-7))),
                                   datetime(2026, 1, 5, 8, 0, 1, 5, tzinfo=ZoneInfo("Europe/London")),  # offset 0
                                   datetime(2026, 7, 5, tzinfo=timezone(timedelta(0))),
                                   datetime(5, 1, 1, tzinfo=UTC),
                                   pendulum.datetime(2024, 3, 31, 2, 30, 1, 7, tz="Europe/Amsterdam"),
                                   pendulum.datetime(2024, 3, 31, 2, 30, tz="UTC"),
                                   None])
def test_an_aware_datetime_is_bound_as_sqlalchemy_binds_it_on_sqlite(value: datetime | None) -> None:
    dialect = sqlite.dialect()
    sqlalchemys = UtcDateTime().dialect_impl(dialect).bind_processor(dialect)
    assert sqlalchemys is not None and hot._sqlite_utc(value) == sqlalchemys(value)


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        hot._sqlite_utc(datetime(2026, 11, 25, 6, 30))


def test_in_lists_of_many_lengths_share_a_few_compiled_forms(session: Session) -> None:
    ids = some_events(session, 70)
    kinds = Hot(_KINDS)
    for n in range(1, 71):
        assert kinds.rows(session, {"ids": ids[:n]}) == [("pool_set", n)]
    assert len(kinds._forms) <= 8  # lengths rounded up to 1, 2, 4, ..., 128


def test_a_list_longer_than_any_form_goes_through_sqlalchemy(session: Session) -> None:
    ids = some_events(session, 3)
    long = ids + [0] * hot.LONGEST_LIST
    assert Hot(_KINDS).rows(session, {"ids": long}) == [("pool_set", 3)]


def test_a_column_default_computed_in_python_is_applied_as_sqlalchemy_applies_it(session: Session) -> None:
    Hot(POOLS.insert()).run(session, [{"name": "spark", "slots": 2}])  # description: default ""
    assert session.execute(select(Pool.description).where(Pool.name == "spark")).scalar_one() == ""


def test_an_update_sets_a_column_its_rows_name_as_sqlalchemy_would(session: Session) -> None:
    ids = some_events(session, 1)
    renamed = update(EVENTS).where(EVENTS.c.id == bindparam("event")).values(kind=bindparam("new_kind"))
    Hot(renamed).run(session, [{"event": ids[0], "new_kind": "renamed", "actor": "hot"}])
    found = session.execute(select(Event.kind, Event.actor).where(Event.id == ids[0])).one()
    assert tuple(found) == ("renamed", "hot")


def test_several_rows_return_every_id(session: Session) -> None:
    insert = Hot(EVENTS.insert().returning(EVENTS.c.id))
    rows = [{"at": AT, "kind": "pool_set", "actor": "hot", "details": {"i": i}} for i in range(3)]
    ids = [i for (i,) in insert.rows_of_each(session, rows)]
    assert len(set(ids)) == 3
    found = session.execute(select(Event.details).where(Event.id.in_(ids)).order_by(Event.id)).scalars().all()
    assert found == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_constant_of_the_statement_is_bound_with_its_processor(session: Session) -> None:
    ids = some_events(session, 1)
    stamped = update(EVENTS).where(EVENTS.c.id == bindparam("event")).values(details={"fixed": True},
                                                                           at=AT + timedelta(days=1))
    Hot(stamped).run(session, [{"event": ids[0]}])
    found = session.execute(select(Event.details, Event.at).where(Event.id == ids[0])).one()
    assert tuple(found) == ({"fixed": True}, AT + timedelta(days=1))
