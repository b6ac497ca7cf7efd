"""Conf and params are strict JSON: no NaN or Infinity (JSON has neither: a document holding them is not JSON,
and every reader after would fail on it), nested at most MAX_DEPTH deep and at most MAX_BYTES long. Pure: what
is refused is InvalidInput, one line naming the problem and where it is."""

from __future__ import annotations

import json
import math
from typing import Any

from ledger.core.errors import InvalidInput

MAX_DEPTH = 32  # objects and lists within each other
MAX_BYTES = 256 * 1024  # the JSON text, UTF-8


def loads(text: str, what: str = "--conf") -> Any:
    """`text` read as strict JSON (refused: not JSON, NaN or Infinity, too deep, too long)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise InvalidInput(f"{what} is {size} bytes long; at most {MAX_BYTES} are taken")

    def refuse(constant: str) -> Any:
        raise InvalidInput(f"{what} holds {constant}, which is not JSON (use null, a string or a finite number)")

    try:
        value = json.loads(text, parse_constant=refuse)
    except RecursionError:
        raise InvalidInput(f"{what} is nested more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON: {exc.msg} at character {exc.pos}") from None
    check(value, what)
    return value


def check(value: Any, what: str = "conf") -> None:
    """Refuse a value that is not strict JSON: a float that is NaN or infinite, lists and objects nested more than
    MAX_DEPTH deep, a JSON text longer than MAX_BYTES. Walks without recursion (a value nested thousands deep is
    refused, never a RecursionError)."""
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(f"{what}{path} is {item!r}, which is not JSON (use null, a string or a finite number)")
        if isinstance(item, dict | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidInput(f"{what} is nested more than {MAX_DEPTH} deep (at {what}{path})")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            stack.extend((v, depth + 1, f"{path}[{json.dumps(k) if isinstance(k, str) else k}]") for k, v in pairs)
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise InvalidInput(f"{what} is {size} bytes long as JSON; at most {MAX_BYTES} are taken")


def finite(value: Any) -> Any:
    """`value` with each NaN or infinite float as its name ("NaN", "Infinity", "-Infinity"), so that it can be
    written as JSON: for values stored before conf was strict."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
