"""Time is passed in: long-lived objects take a Clock, pure functions take `now`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pendulum
from pendulum import DateTime


class Clock(Protocol):
    def now(self) -> DateTime: ...


class SystemClock:
    def now(self) -> DateTime:
        return pendulum.now("UTC")


@dataclass
class FixedClock:
    current: DateTime

    def now(self) -> DateTime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current = self.current.add(**delta)  # type: ignore[arg-type]
