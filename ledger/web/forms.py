"""Pure helpers of the action pages: the fields of a trigger form built from a DAG's params, the conf read back
from them, the fingerprint of a plan shown for confirmation, where to go after signing in, and the sentence an
action leaves for the page it ends on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, unquote

from ledger.core import strict_json
from ledger.core.errors import InvalidInput
from ledger.sdk.params import of_types

PARAM_PREFIX = "param."


def param_fields(params: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One form field per param: its name, what it takes, its default as the field shows it, its choices."""
    out = []
    for name, p in sorted(params.items()):
        types = p.get("type") or []
        default = p.get("default")
        shown = "" if "default" not in p else default if isinstance(default, str) and types == ["string"] \
            else json.dumps(default)
        out.append({"name": name, "field": PARAM_PREFIX + name, "types": types, "required": "default" not in p,
                    "default": shown, "enum": [json.dumps(v) if not isinstance(v, str) else v
                                               for v in p["enum"]] if p.get("enum") is not None else None,
                    "description": p.get("description", "")})
    return out


def _value(text: str, types: list[str]) -> Any:
    """A field's text as the param's value: text for a string-only param, else JSON (`3`, `true`, `[1, 2]`). The
    text itself when the param takes strings and its JSON is not a value the param takes, or is not JSON at all:
    `20240301` typed for a `["null", "string"]` param is a batch id, not a number it would refuse."""
    if types == ["string"]:
        return text
    try:
        value = strict_json.loads(text, "the value")
    except InvalidInput:
        if not types or "string" in types:
            return text
        raise InvalidInput(f"{text[:80]!r} is not valid JSON for a param of type {' or '.join(types)}") from None
    return text if "string" in types and not of_types(value, types) else value


def conf_from_form(params: Mapping[str, Mapping[str, Any]], form: Mapping[str, str]) -> dict[str, Any] | None:
    """The run's conf from a trigger form: the `conf` JSON object (if any) with each param field that was filled
    laid over it; an empty field leaves the param to its default. None when nothing was given."""
    conf: dict[str, Any] = {}
    raw = (form.get("conf") or "").strip()
    if raw:
        conf = strict_json.loads(raw, "--conf")
        if not isinstance(conf, dict):
            raise InvalidInput("--conf must be a JSON object, like '{\"key\": \"value\"}'")
    for name, p in params.items():
        text = form.get(PARAM_PREFIX + name, "")
        if text.strip():
            conf[name] = _value(text.strip(), list(p.get("type") or []))
    return conf or None


def plan_digest(rows: Any) -> str:
    """A fingerprint of a plan (its JSON rows): the plan confirmed must be the plan shown."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:32]


def local_target(next_path: str | None) -> str:
    """Where to go after signing in: a path of this server, never another site (`//x`, `https://x`)."""
    if not next_path or not next_path.startswith("/") or next_path.startswith("//") or "\\" in next_path:
        return "/"
    return next_path


SAID_COOKIE = "ledger_said"  # what the last action did, said by the page it ends on (read once, then dropped)


def said_text(raw: str | None) -> str | None:
    """The sentence of the said cookie, as the page shows it (as text), or None."""
    return unquote(raw)[:500] if raw else None


def said_cookie(text: str) -> str:
    return quote(text[:500])
