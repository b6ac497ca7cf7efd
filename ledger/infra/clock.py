"""Time is passed in: long-lived objects take a Clock, pure functions take `now`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pendulum import DateTime


class Clock(Protocol):
    def now(self) -> DateTime: ...


class SystemClock:
    def now(self) -> DateTime:
        import pendulum  # on the first reading: a command that never reads the clock does not load pendulum

        return pendulum.now("UTC")


@dataclass
class FixedClock:
    current: DateTime

    def now(self) -> DateTime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current = self.current.add(**delta)  # type: ignore[arg-type]
