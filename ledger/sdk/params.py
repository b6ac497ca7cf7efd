"""DAG params: named values with defaults and types, given to tasks as `params` (templates and context).

    DAG(..., params={"days": 7, "mode": Param("full", type="string", enum=["full", "delta"])})

`ledger trigger --conf` is checked against them: a key that a param declares must have the param's type
(and be one of its `enum`); a param without a default must be given. A param given as a plain value takes
that value's JSON type (`"days": 7` takes integers). A run's params are the defaults with
its conf laid over them. Types are JSON Schema's: string, integer, number, boolean, array, object, null.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ledger.core.errors import DagDefinitionError
from ledger.sdk.xcom import replace_leaves

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
    "object": (dict,), "null": (type(None),),
}
_NOTSET: Any = object()


class Param:
    """A param: its default, JSON type(s), allowed values, and (as Airflow's Param takes them) a title, a
    description and JSON Schema's keywords: minimum/maximum (numbers), minLength/maxLength and pattern (strings),
    minItems/maxItems (arrays), checked; others (format, examples, values_display, section, ...) are kept and
    shown only."""

    def __init__(self, default: Any = _NOTSET, description: str | None = None, *,
                 type: str | list[str] | None = None, enum: list[Any] | None = None, title: str | None = None,
                 **schema: Any) -> None:
        types = [type] if isinstance(type, str) else list(type or [])
        unknown = [t for t in types if t not in _TYPES]
        if unknown:
            raise DagDefinitionError(f"Param: unknown type {unknown[0]!r} (one of {', '.join(_TYPES)})")
        self.default, self.types, self.enum, self.description = default, types, enum, description or ""
        self.title = title or ""
        self.schema = {k: v for k, v in sorted(schema.items()) if v is not None}
        if default is not _NOTSET and (problem := self.problem(default)):
            raise DagDefinitionError(f"Param: its default {default!r} {problem}")

    @property
    def required(self) -> bool:
        return self.default is _NOTSET

    @property
    def value(self) -> Any:
        """Its default (Airflow's Param.value); None when it has none."""
        return None if self.required else self.default

    def problem(self, value: Any) -> str | None:
        """Why `value` does not fit, or None."""
        if not of_types(value, self.types):
            return f"is not of type {' or '.join(self.types)}"
        if self.enum is not None and value not in self.enum:
            return f"is not one of {as_json(self.enum)}"
        return _schema_problem(self.schema, value)

    def describe(self) -> dict[str, Any]:
        return {**({} if self.required else {"default": self.default}), **({"type": self.types} if self.types else {}),
                **({"enum": self.enum} if self.enum is not None else {}),
                **({"description": self.description} if self.description else {}),
                **({"title": self.title} if self.title else {}),
                **({"schema": _json_keys(self.schema)} if self.schema else {})}


def _json_keys(value: Any) -> Any:
    """`value` with every mapping's keys as JSON writes them (`values_display={1: "One", None: "None"}` has the
    keys "1" and "null"), so that a version's canonical JSON can sort them."""
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else json.dumps(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_keys(v) for v in value]
    return value


def _schema_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """Why `value` breaks one of the checked JSON Schema keywords, or None."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    checks: list[tuple[str, bool, Callable[[Any, Any], bool], str]] = [
        ("minimum", number, lambda v, n: v >= n, "is less than"),
        ("maximum", number, lambda v, n: v <= n, "is more than"),
        ("exclusiveMinimum", number, lambda v, n: v > n, "is not more than"),
        ("exclusiveMaximum", number, lambda v, n: v < n, "is not less than"),
        ("minLength", isinstance(value, str), lambda v, n: len(v) >= n, "is shorter than"),
        ("maxLength", isinstance(value, str), lambda v, n: len(v) <= n, "is longer than"),
        ("minItems", isinstance(value, list), lambda v, n: len(v) >= n, "has fewer items than"),
        ("maxItems", isinstance(value, list), lambda v, n: len(v) <= n, "has more items than"),
    ]
    for key, applies, ok, says in checks:
        if key in schema and applies and not ok(value, schema[key]):
            return f"{says} {schema[key]} ({key})"
    if "pattern" in schema and isinstance(value, str) and re.search(schema["pattern"], value) is None:
        return f"does not match the pattern {schema['pattern']!r}"
    return None


class ParamsDict(dict[str, Any]):
    """Airflow's ParamsDict: names to Params (or plain defaults); reading a name gives its value."""

    def __getitem__(self, name: str) -> Any:
        found = super().__getitem__(name)
        return found.value if isinstance(found, Param) else found

    def get_param(self, name: str) -> Param:
        found = super().__getitem__(name)
        return found if isinstance(found, Param) else Param(found, type=json_type(found))


def _fits(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False  # JSON's true is not a number
    return isinstance(value, _TYPES[type_name])


def of_types(value: Any, types: Sequence[str]) -> bool:
    """Whether `value` is of one of these JSON types (of any, when none is named)."""
    return not types or any(_fits(value, t) for t in types)


def as_json(value: Any) -> str:
    """A conf value as the person typed it, in a refusal: JSON (`"7"`, `true`, `null`), not Python's repr."""
    return json.dumps(value, ensure_ascii=False, default=repr)


def as_params(given: Mapping[str, Any] | None, *, where: str) -> dict[str, Param]:
    out = {}
    for name, value in dict.items(given) if isinstance(given, dict) else (given or {}).items():
        if not isinstance(name, str) or not name:
            raise DagDefinitionError(f"{where}: param names must be non-empty strings")
        out[name] = value if isinstance(value, Param) else Param(value, type=json_type(value))
    return out


def json_type(value: Any) -> str | None:
    """The JSON type of a plain default (a param given as `"days": 7` takes integers only)."""
    for name in ("boolean", "integer", "number", "string", "array", "object"):
        if _fits(value, name):
            return name
    return None


def from_description(described: Mapping[str, Mapping[str, Any]]) -> dict[str, Param]:
    """Params as a version recorded them (for checking --conf without importing the DAG file)."""
    return {name: Param(d.get("default", _NOTSET), d.get("description", ""), type=d.get("type"), enum=d.get("enum"),
                        title=d.get("title"), **d.get("schema", {})) for name, d in described.items()}


def check_conf(params: Mapping[str, Param], conf: Mapping[str, Any] | None, *, dag_id: str) -> None:
    """Raise ValueError (one line) when the conf does not fit the DAG's params."""
    conf = conf or {}
    for name, param in params.items():
        if name in conf:
            problem = param.problem(conf[name])
            if problem:
                raise ValueError(f"--conf {name}={as_json(conf[name])} {problem} (param {name!r} of DAG {dag_id!r})")
        elif param.required:
            raise ValueError(f"--conf must give {name!r}: param {name!r} of DAG {dag_id!r} has no default")


def resolve(params: Mapping[str, Param], conf: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's params: the defaults, with the conf's values of the same names laid over them."""
    conf = conf or {}
    return {name: conf.get(name, None if p.required else p.default) for name, p in params.items()}


class ParamRef:
    """Stands for a param's value in the run (Airflow's DagParam: an `@dag` function's parameter), resolved when
    a try runs: the run's conf over the param's default."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:  # how it reads in a version's structure
        return f"ParamRef({self.name!r})"


def resolve_refs(value: Any, params: Mapping[str, Any]) -> Any:
    """`value` with every ParamRef in it (also inside lists, tuples and dicts) replaced by the param's value."""
    return replace_leaves(value, lambda leaf: params.get(leaf.name) if isinstance(leaf, ParamRef) else leaf)
