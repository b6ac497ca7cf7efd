"""Values passed between tasks (XCom, as Airflow calls them).

A Python task's return value is stored for its try under the key `return_value`; `context.xcom_push(key,
value)` stores others. Values must be JSON (at most LEDGER_XCOM_MAX_BYTES, 64 KiB by default): a value that
is not, or is larger, fails the try with a clear reason. What Airflow's serializer also takes passes as a tagged
JSON object and comes back as it was (a date, a datetime, a set, a Decimal); a numpy scalar passes as its number.
The try writes them to a JSON-lines file beside its
log; the scheduler stores them with the try's outcome, in the `xcom` table, per try and with its run, so a
run that was overridden keeps its own values.

Before a try starts, the scheduler gives it the values its run's tasks stored so far (the newest try of
each); `context.xcom_pull` and the `XComRef` placeholders that `@task` functions pass read from those.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.core.mapping import split_label

RETURN_KEY = "return_value"


class XComError(ValueError):
    """A value that cannot be passed on: not JSON, or too large."""


def max_bytes() -> int:
    return int(os.environ.get("LEDGER_XCOM_MAX_BYTES", str(64 * 1024)))


TYPE_KEY = "__ledger_xcom_type__"  # a value JSON has no type for, as a tagged object: {TYPE_KEY: "set", "value": [...]}


def _tagged(value: Any) -> Any:
    """What JSON cannot hold that Airflow's XCom serializer takes: a date or datetime, a set, a Decimal (tagged, and
    given back as they were by `decoded`), a numpy scalar (its Python number)."""
    if isinstance(value, dt.datetime):
        return {TYPE_KEY: "datetime", "value": value.isoformat()}
    if isinstance(value, dt.date):
        return {TYPE_KEY: "date", "value": value.isoformat()}
    if isinstance(value, (set, frozenset)):
        return {TYPE_KEY: "set", "value": sorted(value, key=repr)}
    if isinstance(value, decimal.Decimal):
        return {TYPE_KEY: "decimal", "value": str(value)}
    if type(value).__name__ == "ObjectStoragePath" and type(value).__module__ == "ledger.sdk.object_storage":
        return {TYPE_KEY: "object_storage_path", "value": value.as_uri()}
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _path(url: str) -> Any:
    from ledger.sdk.object_storage import ObjectStoragePath

    return ObjectStoragePath(url)


_UNTAG: dict[str, Callable[[Any], Any]] = {"datetime": dt.datetime.fromisoformat, "date": dt.date.fromisoformat,
                                           "set": set, "decimal": decimal.Decimal, "object_storage_path": _path}


def decoded(value: Any) -> Any:
    """A value as it was passed on: the tagged objects of `_tagged` turned back into their types."""
    if isinstance(value, list):
        return [decoded(v) for v in value]
    if isinstance(value, dict):
        if value.keys() == {TYPE_KEY, "value"} and value[TYPE_KEY] in _UNTAG:
            return _UNTAG[value[TYPE_KEY]](decoded(value["value"]))
        return {k: decoded(v) for k, v in value.items()}
    return value


def encode(key: str, value: Any) -> str:
    """The JSON text of a value to pass on, or XComError."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=_tagged)
    except (TypeError, ValueError) as exc:
        raise XComError(f"the value for {key!r} is not JSON-serialisable ({type(value).__name__}: {exc})") from None
    size = len(text.encode("utf-8"))
    if size > max_bytes():
        raise XComError(f"the value for {key!r} is {size} bytes of JSON, more than the {max_bytes()} allowed "
                        "(LEDGER_XCOM_MAX_BYTES); pass a path or a table name instead")
    return text


class _NotSet:
    def __repr__(self) -> str:
        return "NOTSET"


NOTSET: Any = _NotSet()  # zip() without a fillvalue


class _Chain:
    """`.map(fn)` and `.zip(*others)` on a value another task passes on (Airflow's XComArg), for expand()."""

    def map(self, fn: Callable[[Any], Any]) -> MapRef:
        """Each item of the list transformed by `fn` (called in the mapped instance's try, on its item only)."""
        if not callable(fn):
            raise TypeError(f"map() needs a callable, not {fn!r}")
        return MapRef(self, fn)

    def zip(self, *others: Any, fillvalue: Any = NOTSET) -> ZipRef:
        """Tuples of the items at the same index of this list and of `others` (as zip(); with `fillvalue`, as
        itertools.zip_longest)."""
        return ZipRef((self, *(getattr(o, "output", o) for o in others)), fillvalue)


@dataclass(frozen=True)
class XComRef(_Chain):
    """Stands for a value another task of the run passes on: `b(a())` with `@task` functions, or `a.output`."""

    task_id: str
    key: str = RETURN_KEY

    def as_json(self) -> dict[str, str]:
        return {"xcom_from": self.task_id, "key": self.key}

    def __repr__(self) -> str:  # how it reads in op_args of a version's structure
        return f"XComRef({self.task_id!r}, {self.key!r})"


@dataclass(frozen=True)
class MapRef(_Chain):
    source: Any  # XComRef, MapRef, ZipRef or a literal list
    fn: Callable[[Any], Any] = field(compare=False)


@dataclass(frozen=True)
class ZipRef(_Chain):
    sources: tuple[Any, ...]
    fillvalue: Any = NOTSET


class MissingValue(LookupError):
    pass


class _MappedItems(Sequence[Any]):
    """A list seen through a map() function, applied to an item when it is read."""

    def __init__(self, items: Sequence[Any], fn: Callable[[Any], Any]) -> None:
        self.items, self.fn = items, fn

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        item = self.items[index]
        try:
            return self.fn(item)
        except Exception as exc:
            name = getattr(self.fn, "__name__", repr(self.fn))
            raise ValueError(f"the map() function {name} failed on item {index}: {type(exc).__name__}: {exc}") \
                from None


class _ZippedItems(Sequence[Any]):
    def __init__(self, lists: Sequence[Sequence[Any]], fillvalue: Any) -> None:
        self.lists, self.fillvalue = lists, fillvalue

    def __len__(self) -> int:
        lengths = [len(items) for items in self.lists]
        return max(lengths) if self.fillvalue is not NOTSET else min(lengths)

    def __getitem__(self, index: Any) -> Any:
        if not 0 <= index < len(self):
            raise IndexError(index)
        return tuple(items[index] if index < len(items) else self.fillvalue for items in self.lists)


LAZY_LISTS = (_MappedItems, _ZippedItems)


def resolve_source(src: Any, values: dict[str, dict[str, Any]]) -> Any:
    """The list a mapped task is expanded over (a list, or a sequence whose items map() and zip() make when read);
    a value that is not a list is returned as it is, for the caller to refuse."""
    if isinstance(src, MapRef):
        items = resolve_source(src.source, values)
        return _MappedItems(items, src.fn) if isinstance(items, (list, *LAZY_LISTS)) else items
    if isinstance(src, ZipRef):
        lists = [resolve_source(s, values) for s in src.sources]
        for items in lists:
            if not isinstance(items, (list, *LAZY_LISTS)):
                return items
        return _ZippedItems(lists, src.fillvalue)
    return resolve(src, values)


def replace_leaves(value: Any, swap: Callable[[Any], Any]) -> Any:
    """`value` with each of its leaves (what is not a list, tuple or dict, walked into) passed through `swap`."""
    if isinstance(value, list):
        return [replace_leaves(v, swap) for v in value]
    if isinstance(value, tuple):
        return tuple(replace_leaves(v, swap) for v in value)
    if isinstance(value, dict):
        return {k: replace_leaves(v, swap) for k, v in value.items()}
    return swap(value)


def resolve(value: Any, values: dict[str, dict[str, Any]]) -> Any:
    """`value` with every XComRef in it (also inside lists, tuples and dicts) replaced by the value it stands for.
    A task's return value that is not there (the task was skipped, or ended without one, and this task's trigger
    rule let it run) is None, as Airflow's TaskFlow passes it; another key that is not there is MissingValue."""
    def one(item: Any) -> Any:
        if not isinstance(item, XComRef):
            return item
        found = values.get(item.task_id, {})
        if item.key not in found:
            if item.key == RETURN_KEY:
                return None
            raise MissingValue(f"task {item.task_id!r} passed no value {item.key!r} in this run")
        return found[item.key]

    return replace_leaves(value, one)


def pull_view(stored: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What tries pull (task id -> key -> value) from what a run's task instances stored (by label: the task id,
    or `task[i]` for instance i of a mapped task): a mapped task's value under a key is the list of its
    instances' values, ordered by map index (instances that stored none under that key are left out); each
    instance's own values are there too, under its label (a task of a mapped task group takes its sibling's
    instance with the same index: ledger/sdk/mapped_groups.py)."""
    out: dict[str, dict[str, Any]] = {}
    mapped: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for key, values in stored.items():
        task_id, index = split_label(key)
        if index < 0:
            out[task_id] = dict(values)
        else:
            mapped.setdefault(task_id, []).append((index, values))
    for task_id, items in mapped.items():
        for index, values in items:  # each instance's own too, for a task of a mapped task group
            out[f"{task_id}[{index}]"] = dict(values)
        items.sort(key=lambda item: item[0])
        names = sorted({name for _i, values in items for name in values})
        out[task_id] = {name: [values[name] for _i, values in items if name in values] for name in names}
    return out


def refs_in(value: Any) -> list[XComRef]:
    if isinstance(value, XComRef):
        return [value]
    if isinstance(value, MapRef):
        return refs_in(value.source)
    if isinstance(value, ZipRef):
        return refs_in(list(value.sources))
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in refs_in(v)]
    if isinstance(value, dict):
        return [r for v in value.values() for r in refs_in(v)]
    return []


def read_json_lines(path: str) -> list[Any]:
    """The JSON value on each line of a file a try wrote (a missing file: none; a bad line is skipped)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_pushed(path: str) -> list[tuple[str, Any]]:
    """(key, value) pairs a try wrote to its file (a missing file: none; a bad line is skipped)."""
    return [(item["key"], item["value"]) for item in read_json_lines(path)
            if isinstance(item, dict) and isinstance(item.get("key"), str) and "value" in item]


def read_rendered(path: str) -> dict[str, Any] | None:
    """The template fields a try rendered (None: it rendered none, or the file is unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
