"""Airflow 3's retry policies (`airflow.sdk`: RetryPolicy, ExceptionRetryPolicy, RetryRule, RetryAction,
RetryDecision), as Airflow applies them.

A task's `retry_policy=` is asked, in the try's own process, what a failure's exception means: FAIL ends the task
now (no retry left is spent: the try fails as an AirflowFailException fails it), RETRY retries it (within its
`retries`, never beyond) after the rule's `retry_delay` instead of the task's, DEFAULT leaves the task's own retry
rules. An AirflowFailException or a sensor's timeout fails at once and never asks the policy; a policy that raises
is logged and the task's own rules apply, as in Airflow. The decision's reason is written in the try's log.
"""

from __future__ import annotations

import abc
import importlib
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from typing import Any

from ledger.core.errors import DagDefinitionError, FailWithoutRetry

log = logging.getLogger("airflow.task")


class RetryAction(Enum):
    RETRY = "retry"
    FAIL = "fail"
    DEFAULT = "default"


@dataclass(frozen=True)
class RetryDecision:
    action: RetryAction = RetryAction.DEFAULT
    retry_delay: timedelta | None = None
    reason: str | None = None

    @classmethod
    def fail(cls, reason: str | None = None) -> RetryDecision:
        return cls(RetryAction.FAIL, reason=reason)

    @classmethod
    def retry(cls, delay: timedelta | None = None, reason: str | None = None) -> RetryDecision:
        return cls(RetryAction.RETRY, delay, reason)

    @classmethod
    def default(cls) -> RetryDecision:
        return cls()


class RetryPolicy(abc.ABC):
    """A policy of your own: `evaluate(exception, try_number, max_tries, context)` returns a RetryDecision."""

    @abc.abstractmethod
    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Any = None) -> RetryDecision:
        """What the failure means."""

    def serialize(self) -> dict[str, Any]:
        return {"__type": type(self).__qualname__}


def _import_class(path: str) -> type[BaseException] | None:
    module, _, name = path.rpartition(".")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


@dataclass
class RetryRule:
    """One exception (a class, a dotted path, or a list of them) -> what to do."""

    exception: type[BaseException] | str | list[type[BaseException] | str]
    action: RetryAction = RetryAction.RETRY
    retry_delay: timedelta | None = None
    reason: str | None = None
    match_subclasses: bool = True
    _classes: list[type[BaseException]] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for spec in self.specs:
            if isinstance(spec, str) and (not spec or "." not in spec):
                raise DagDefinitionError(f"RetryRule exception string must be a dotted import path (e.g. "
                                         f"'builtins.ValueError'), got {spec!r}")
            if not isinstance(spec, (str, type)):
                raise DagDefinitionError(f"RetryRule exception must be an exception class or a dotted path, got "
                                         f"{spec!r}")

    @property
    def specs(self) -> list[type[BaseException] | str]:
        return list(self.exception) if isinstance(self.exception, list) else [self.exception]

    def matches(self, exc: BaseException) -> bool:
        """Whether `exc` is one of the rule's classes (a path that does not import matches nothing)."""
        if self._classes is None:
            self._classes = [c for c in (s if isinstance(s, type) else _import_class(s) for s in self.specs) if c]
        if self.match_subclasses:
            return isinstance(exc, tuple(self._classes))
        return type(exc) in self._classes

    def serialize(self) -> dict[str, Any]:
        paths = [s if isinstance(s, str) else f"{s.__module__}.{s.__qualname__}" for s in self.specs]
        return {"exception": paths if len(paths) > 1 else paths[0], "action": self.action.value,
                "match_subclasses": self.match_subclasses,
                **({"retry_delay": self.retry_delay.total_seconds()} if self.retry_delay is not None else {}),
                **({"reason": self.reason} if self.reason is not None else {})}


class ExceptionRetryPolicy(RetryPolicy):
    """Rules in order, the first that matches wins; none: `default`."""

    def __init__(self, rules: list[RetryRule], default: RetryAction = RetryAction.DEFAULT) -> None:
        self.rules = list(rules)
        self.default = default

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int,
                 context: Any = None) -> RetryDecision:
        for rule in self.rules:
            if rule.matches(exception):
                return RetryDecision(rule.action, rule.retry_delay,
                                     rule.reason or f"Matched rule for {type(exception).__name__}")
        return RetryDecision(self.default)

    def serialize(self) -> dict[str, Any]:
        return {"__type": "ExceptionRetryPolicy", "rules": [r.serialize() for r in self.rules],
                "default": self.default.value}


def check_policy(task_id: str, policy: Any) -> RetryPolicy | None:
    if policy is not None and not isinstance(policy, RetryPolicy):
        raise DagDefinitionError(f"task {task_id!r}: retry_policy must be a RetryPolicy (ExceptionRetryPolicy or a "
                                 f"subclass of RetryPolicy), not {type(policy).__name__}")
    return policy


def decide(policy: RetryPolicy, exc: BaseException, try_number: int, max_tries: int,
           context: Any) -> RetryDecision | None:
    """The policy's decision on a failure's exception (None: the task's own rules apply)."""
    if isinstance(exc, FailWithoutRetry):  # AirflowFailException, a sensor's timeout: never asked
        return None
    try:
        decision = policy.evaluate(exception=exc, try_number=try_number, max_tries=max_tries, context=context)
    except Exception:
        log.exception("Retry policy evaluation failed, falling back to default behaviour")
        return None
    if decision.reason:
        log.info("Retry policy decision: %s (%s)", decision.action.value, decision.reason)
    return decision
