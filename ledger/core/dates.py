"""Reading dates given by people: ISO dates or datetimes; bare dates and naive times in a timezone."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger.core.errors import InvalidInput

if TYPE_CHECKING:
    from pendulum import DateTime

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


MIN_YEAR, MAX_YEAR = 1000, 9000


def parse_user_date(text: str, *, timezone: str, what: str = "date", end_of_day: bool = False) -> DateTime:
    """An aware UTC DateTime from `2024-03-01`, `2024-03-01T06:00` or `2024-03-01T06:00+02:00`.

    A bare date is a whole day in `timezone`: its first instant, or with `end_of_day` its last (the
    inclusive end of a range), whatever the day's length (23 or 25 hours when clocks change)."""
    import pendulum  # here: iso() and the other helpers, which many commands import, do not need it
    from pendulum import DateTime

    value = text.strip()
    if not value:
        raise InvalidInput(f"empty {what}; give an ISO date like 2024-03-01 or 2024-03-01T06:00:00+00:00")
    try:
        parsed = pendulum.parse(value, tz=pendulum.timezone(timezone), strict=True, exact=True)
    except Exception:
        parsed = None
    if isinstance(parsed, pendulum.Date) and not isinstance(parsed, DateTime) and _DATE.match(value):
        day = pendulum.datetime(parsed.year, parsed.month, parsed.day, tz=timezone)
        parsed = day.add(days=1).subtract(microseconds=1) if end_of_day and parsed.year < MAX_YEAR else day
    if not isinstance(parsed, DateTime):
        raise InvalidInput(f"invalid {what} {text!r}; give an ISO date like 2024-03-01 or "
                           "2024-03-01T06:00:00+00:00")
    # schedules step a period past a date, and time zones shift it: keep clear of datetime's limits
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise InvalidInput(f"{what} {text!r} is out of range; give a date between the years {MIN_YEAR} and "
                           f"{MAX_YEAR}")
    return parsed.in_timezone("UTC")


def iso(value: datetime | None) -> str | None:
    """ISO-8601 with UTC offset, or None."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat()


def iso_raw(value: object) -> str | None:
    """ISO-8601 (UTC offset) of a timestamp as a driver returns it without conversion: SQLite text
    like '2024-03-01 00:00:00.000000' (stored in UTC) or an aware datetime. Fast: no parsing."""
    if value is None:
        return None
    if isinstance(value, str):
        date, _, time_part = value.partition(" ")
        if time_part.endswith(".000000"):
            time_part = time_part[:-7]
        return f"{date}T{time_part}+00:00"
    if isinstance(value, datetime):
        return iso(value if value.tzinfo else value.replace(tzinfo=UTC))
    raise TypeError(f"not a timestamp: {value!r}")


def check_within_dag(spec: Any, at: datetime, *, what: str) -> None:
    """Refuse a logical date before the DAG's start_date or after its end_date (as backfill does): a run
    there would become the chain's head or tail outside the DAG's life."""
    if at < spec.start_date:
        raise InvalidInput(f"{what} {iso(at)} is before DAG {spec.dag_id!r} starts ({iso(spec.start_date)})")
    if spec.end_date is not None and at > spec.end_date:
        raise InvalidInput(f"{what} {iso(at)} is after DAG {spec.dag_id!r} ends ({iso(spec.end_date)})")


def local_text(value: datetime | str | None, timezone: str) -> str:
    """A time for people: in `timezone`, with its UTC offset, so that the two 02:00 of a night when clocks go
    back read differently (`2024-10-27 02:00:00+02:00`, `2024-10-27 02:00:00+01:00`)."""
    if value is None:
        return ""
    import pendulum

    moment = pendulum.parse(value) if isinstance(value, str) else pendulum.instance(value)
    return str(moment.in_timezone(timezone).format("YYYY-MM-DD HH:mm:ssZ"))  # type: ignore[union-attr]
