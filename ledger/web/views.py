"""What the pages show, computed from the JSON documents: timeline groups and their strip, graph layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Doc = dict[str, Any]


@dataclass
class DateGroup:
    """One logical date of a timeline page: its live run, the overridden runs beside it, and markers."""

    logical_date: str
    live: Doc | None = None
    replaced: list[Doc] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)


def cut_page(runs: list[Doc], limit: int) -> tuple[list[Doc], Doc | None]:
    """A page of at most `limit` runs out of `limit` + 1 read, and the first run after it (None at the end).
    A page does not end inside a logical date: the runs of one date (a live run and those it replaced)
    stay together, unless that date alone fills the page."""
    if len(runs) <= limit:
        return runs, None
    cut = limit
    while cut > 1 and runs[cut - 1]["logical_date"] == runs[cut]["logical_date"]:
        cut -= 1
    return runs[:cut], runs[cut]


def group_timeline(runs: list[Doc], older: Doc | None = None) -> list[DateGroup]:
    """Runs newest first (a timeline page) grouped by logical date; a live run whose version or schedule
    differs from the live run before it (the next one in the page, or `older`) gets a marker."""
    groups: list[DateGroup] = []
    for r in runs:
        if not groups or groups[-1].logical_date != r["logical_date"]:
            groups.append(DateGroup(r["logical_date"]))
        g = groups[-1]
        if r["state"] == "overridden":
            g.replaced.append(r)
        else:
            g.live = r
    lives = [g.live for g in groups if g.live is not None]
    if older is not None and older["state"] != "overridden":
        lives.append(older)
    for newer, before in zip(lives, lives[1:], strict=False):
        marks = []
        if newer["dag_version"] != before["dag_version"]:
            marks.append(f"version {before['dag_version'][:8]} → {newer['dag_version'][:8]}")
        if newer["schedule"] != before["schedule"]:
            marks.append(f"schedule {before['schedule']} → {newer['schedule']}")
        for g in groups:
            if g.live is newer:
                g.markers = marks
    return groups


@dataclass
class Mark:
    """A run drawn on the timeline strip: x and width in per mille of the page's span, lane 0 (live) or 1."""

    run_id: str
    x: float
    width: float
    lane: int
    state: str
    title: str
    backfill: bool = False


@dataclass
class Span:
    """A backfill drawn under the strip: a bracket from its first to its last run on the page."""

    backfill_id: str
    x: float
    width: float
    title: str


def strip(groups: list[DateGroup]) -> tuple[list[Mark], list[float], list[Span]]:
    """The page drawn over time: each run at its data interval, live runs on the top lane and overridden
    runs under their replacement; the x of each version or schedule change; and under the lanes one
    bracket per backfill grouping its runs."""
    runs = [r for g in groups for r in ([g.live] if g.live else []) + g.replaced]
    if not runs:
        return [], [], []
    starts = [datetime.fromisoformat(r["data_interval_start"]) for r in runs]
    ends = [datetime.fromisoformat(r["data_interval_end"]) for r in runs]
    lo, hi = min(starts), max(ends)
    span = max((hi - lo).total_seconds(), 1.0)
    marks = []
    for r, s, e in zip(runs, starts, ends, strict=True):
        x = (s - lo).total_seconds() / span * 1000
        width = max((e - s).total_seconds() / span * 1000 - 1, 1.5)
        lane = 1 if r["state"] == "overridden" else 0
        marks.append(Mark(r["run_id"], round(x, 1), round(width, 1), lane, r["state"],
                          f"run {r['run_id']} {r['run_type']} {r['state']} {r['logical_date']}",
                          r["backfill_id"] is not None))
    changes = [round((datetime.fromisoformat(g.live["data_interval_start"]) - lo).total_seconds() / span * 1000, 1)
               for g in groups if g.live is not None and g.markers]
    by_backfill: dict[str, list[Mark]] = {}
    for m, r in zip(marks, runs, strict=True):
        if r["backfill_id"] is not None:
            by_backfill.setdefault(r["backfill_id"], []).append(m)
    spans = []
    for backfill_id, of in sorted(by_backfill.items(), key=lambda item: int(item[0])):
        lo_x = min(m.x for m in of)
        hi_x = max(m.x + m.width for m in of)
        spans.append(Span(backfill_id, lo_x, round(hi_x - lo_x, 1),
                          f"backfill {backfill_id}: {len(of)} run(s) on this page"))
    return marks, changes, spans


def graph_layers(tasks: list[Doc]) -> list[list[Doc]]:
    """A version's tasks in layers: a task sits one layer after the deepest of its upstream tasks."""
    depth: dict[str, int] = {}
    by_id = {t["task_id"]: t for t in tasks}

    def level(task_id: str, seen: frozenset[str] = frozenset()) -> int:
        if task_id not in depth:
            ups = [u for u in by_id[task_id]["upstream"] if u in by_id and u not in seen]
            depth[task_id] = 1 + max((level(u, seen | {task_id}) for u in ups), default=-1)
        return depth[task_id]

    layers: list[list[Doc]] = []
    for t in tasks:
        n = level(t["task_id"])
        while len(layers) <= n:
            layers.append([])
        layers[n].append(t)
    return layers


def diff_lines(text: str | None) -> list[tuple[str, str]]:
    """(css class, line) of a unified diff."""
    out = []
    for line in (text or "").splitlines():
        kind = "meta" if line.startswith(("---", "+++", "@@")) else "add" if line.startswith("+") \
            else "del" if line.startswith("-") else "ctx"
        out.append((kind, line))
    return out


def backfills_of(groups: list[DateGroup]) -> list[tuple[str, int, int]]:
    """(backfill id, its live runs, its overridden runs) of the backfills with runs on a timeline page."""
    counts: dict[str, list[int]] = {}
    for g in groups:
        for r in ([g.live] if g.live else []) + g.replaced:
            if r["backfill_id"] is not None:
                counts.setdefault(r["backfill_id"], [0, 0])[r["state"] == "overridden"] += 1
    return [(b, live, gone) for b, (live, gone) in sorted(counts.items(), key=lambda item: int(item[0]))]
