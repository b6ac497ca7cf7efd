"""WCAG AA contrast of the pages' text in light and dark (issue 41, part 6), computed from static/ledger.css: each
rule that sets a text colour or a background is paired with what it lies on or what is written on it, as the
cascade gives them in each colour scheme (a dark-mode rule overrides the light one of the same selector; what a
scheme does not set comes from the light rule, then the page), and each pair must reach 4.5:1."""

from __future__ import annotations

import re
from pathlib import Path

CSS = Path(__file__).resolve().parents[2] / "ledger" / "web" / "static" / "ledger.css"
DARK = re.compile(r"@media \(prefers-color-scheme: dark\) \{((?:[^{}]*\{[^{}]*\})*)\s*\}")
# not text: squares, bars and lines of the drawings, SVG (filled, not coloured), the backgrounds ANSI output
# combines with its own colours
NOT_TEXT = re.compile(r"\.sq\b|\.strip|\.gantt|\.dag-graph|\.ansi-bg|:root|nav\.tries a\.current|tr\.changed")
AA = 4.5


def _rules(text: str) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", text):
        props = {k.strip(): v.strip() for k, v in (p.split(":", 1) for p in body.split(";") if ":" in p)}
        for selector in selectors.split(","):
            found.setdefault(" ".join(selector.split()), {}).update(props)
    return found


def schemes() -> dict[str, dict[str, dict[str, str]]]:
    css = re.sub(r"/\*.*?\*/", "", CSS.read_text(), flags=re.S)
    light = _rules(DARK.sub("", css))
    dark = {sel: dict(props) for sel, props in light.items()}
    for sel, props in _rules("".join(DARK.findall(css))).items():
        dark.setdefault(sel, {}).update(props)
    return {"light": light, "dark": dark}


def _rgb(value: str | None) -> tuple[float, float, float] | None:
    found = re.search(r"#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", value or "")
    if found is None:
        return None
    h = found.group(1) if len(found.group(1)) == 6 else "".join(c * 2 for c in found.group(1))
    return int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255


def ratio(fg: tuple[float, float, float], bg: tuple[float, float, float]) -> float:
    def lum(c: tuple[float, float, float]) -> float:
        r, g, b = (x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def pairs(rules: dict[str, dict[str, str]]) -> list[tuple[str, float]]:
    """(selector, contrast) of every rule setting a text colour or a background, in one scheme."""
    def colour(sel: str, prop: str) -> tuple[float, float, float] | None:
        props = rules.get(sel, {})
        return _rgb(props.get(prop)) or (_rgb(props.get("background")) if prop == "background-color" else None)

    page_fg, page_bg = _rgb(rules["body"]["color"]), _rgb(rules["body"]["background"])
    table_bg = _rgb(rules["table"]["background"])
    out = []
    for sel, props in rules.items():
        if NOT_TEXT.search(sel) or not ({"color", "background"} & set(props)):
            continue
        fg = _rgb(props.get("color"))
        bg = colour(sel, "background-color")
        if bg is None:  # what it is written on
            bg = _rgb(rules["pre"]["background"]) if sel.startswith(".ansi-fg") else \
                _rgb(rules["header"]["background"]) if sel.startswith("header") else \
                table_bg if re.search(r"\b(td|th|tr|table)\b", sel) else page_bg
        if fg is None:
            fg = _rgb(rules["header"]["color"]) if sel.startswith("header") else page_fg
        if fg is None or bg is None:
            continue
        out.append((sel, round(ratio(fg, bg), 2)))
    return out


def test_every_text_colour_pair_reaches_wcag_aa_in_light_and_dark() -> None:
    low = {scheme: [(sel, r) for sel, r in pairs(rules) if r < AA] for scheme, rules in schemes().items()}
    assert low == {"light": [], "dark": []}


def test_the_check_finds_a_low_contrast_pair() -> None:
    rules = {"body": {"color": "#1d2330", "background": "#fafbfc"}, "table": {"background": "#fff"},
             "pre": {"background": "#fff"}, "header": {"color": "#fff", "background": "#1d2330"},
             ".faint": {"color": "#bbb"}, ".fine": {"color": "#555"}}
    found = dict(pairs(rules))
    assert found[".faint"] < AA <= found[".fine"]
    assert ratio((0, 0, 0), (1, 1, 1)) == 21.0
