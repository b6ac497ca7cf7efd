"""What the pages show, computed from the JSON documents: timeline groups and their strip, graph layers."""

from __future__ import annotations

from calendar import monthrange
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from urllib.parse import quote

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


# -- state colours shared by the graph and the grid ------------------------------------------------------

# the state a mapped task's cell shows for its instances: the first of this order that one of them is in
SUMMARY_ORDER = ("failed", "upstream_failed", "running", "queued", "up_for_retry", "scheduled", "stopped",
                 "success", "skipped", "removed")


def summary_state(states: list[str]) -> str:
    """One state for several task instances (a mapped task's): what needs a look first."""
    present = set(states)
    for s in SUMMARY_ORDER:
        if s in present:
            return s
    return states[0] if states else "none"


def states_by_task(instances: list[Doc]) -> dict[str, tuple[str, int]]:
    """task id -> (its state, or its instances' summary state; how many mapped instances) of a run document's
    task instances."""
    grouped: dict[str, list[Doc]] = {}
    for ti in instances:
        grouped.setdefault(ti["task_id"], []).append(ti)
    out = {}
    for task_id, tis in grouped.items():
        mapped = [ti for ti in tis if ti["map_index"] >= 0]
        if mapped:
            out[task_id] = (summary_state([ti["state"] for ti in mapped]), len(mapped))
        else:
            out[task_id] = (tis[0]["state"], 0)
    return out


# -- the graph of a run or version, drawn as SVG -------------------------------------------------------

NODE_W, NODE_H, GAP_X, GAP_Y, MARGIN, GROUP_PAD = 180, 44, 70, 34, 16, 10


@dataclass
class Node:
    task_id: str
    kind: str
    x: int
    y: int
    state: str | None
    note: str  # its kind, and for a mapped task how many instances
    group: str | None


@dataclass
class Box:
    """A task group drawn around its tasks (nested groups inside their parent's box)."""

    group_id: str
    x: int
    y: int
    width: int
    height: int


@dataclass
class EdgeLabel:
    """An edge's Label (Airflow's `a >> Label("text") >> b`), drawn at the middle of its edge."""

    text: str
    x: int
    y: int


@dataclass
class Graph:
    nodes: list[Node]
    edges: list[str]  # SVG path data, one per dependency
    groups: list[Box]
    width: int
    height: int
    labels: list[EdgeLabel] = field(default_factory=list)


def graph_drawing(tasks: list[Doc], states: dict[str, tuple[str, int]] | None = None) -> Graph:
    """Tasks placed in layers (left to right, a task one layer after the deepest of its upstream tasks), the
    tasks of one group next to each other in a layer, an edge per dependency, a box per task group."""
    states = states or {}
    layers = graph_layers(tasks)
    place: dict[str, tuple[int, int]] = {}
    nodes: list[Node] = []
    for col, layer in enumerate(layers):
        def weight(t: Doc) -> tuple[str, float, str]:
            ups = [place[u][1] for u in t["upstream"] if u in place]
            return (t.get("group") or "", sum(ups) / len(ups) if ups else 0.0, t["task_id"])
        for row, t in enumerate(sorted(layer, key=weight)):
            x = MARGIN + col * (NODE_W + GAP_X)
            y = MARGIN + 48 + row * (NODE_H + GAP_Y)
            place[t["task_id"]] = (x, y)
            state, count = states.get(t["task_id"], (None, 0))
            if t.get("mapped") or "expand" in t:
                note = f"{t['kind']} x{count if states else t.get('instances', '?')} mapped"
            else:
                note = t["kind"]
            nodes.append(Node(t["task_id"], t["kind"], x, y, state, note, t.get("group")))
    edges, labels = [], []
    for t in tasks:
        x2, y2 = place[t["task_id"]]
        for u in t["upstream"]:
            if u not in place:
                continue
            x1, y1 = place[u]
            sx, sy, ex, ey = x1 + NODE_W, y1 + NODE_H // 2, x2 - 4, y2 + NODE_H // 2
            mid = (sx + ex) // 2
            edges.append(f"M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}")
            if u in t.get("labels", {}):
                labels.append(EdgeLabel(t["labels"][u], mid, (sy + ey) // 2 - 4))
    groups = []
    names = sorted({".".join(n.group.split(".")[:i + 1]) for n in nodes if n.group
                    for i in range(n.group.count(".") + 1)}, key=lambda g: (g.count("."), g))
    for g in names:
        members = [n for n in nodes if n.group == g or (n.group or "").startswith(g + ".")]
        depth = g.count(".")
        pad = GROUP_PAD * (3 - min(depth, 2))
        x0 = min(n.x for n in members) - pad
        y0 = min(n.y for n in members) - pad - 14
        x1 = max(n.x for n in members) + NODE_W + pad
        y1 = max(n.y for n in members) + NODE_H + pad
        groups.append(Box(g, x0, y0, x1 - x0, y1 - y0))
    width = MARGIN * 2 + max(len(layers), 1) * (NODE_W + GAP_X) - GAP_X + 2 * GROUP_PAD * 3
    tallest = max((len(la) for la in layers), default=1)
    height = MARGIN + 48 + tallest * (NODE_H + GAP_Y) - GAP_Y + GROUP_PAD * 3 + MARGIN
    return Graph(nodes, edges, groups, width, height, labels)


# -- the grid: tasks x runs ------------------------------------------------------------------------------


@dataclass
class Cell:
    state: str
    href: str
    title: str
    picked: bool = False  # the cell whose task instance the detail panel shows


@dataclass
class Column:
    run_id: int
    logical_date: Any
    state: str
    run_type: str
    replaced: list[tuple[int, str]]  # (overridden run id, its run type): the runs this one replaced


@dataclass
class Row:
    """A row of the grid: a task, or a task group (its cells: its tasks' most urgent state in each run)."""

    name: str  # the task id, or the group's id
    depth: int  # how many groups it is in
    cells: list[Cell | None]
    group: bool = False
    folded: bool = False  # a group shown as its one row, its tasks hidden
    toggle: str = ""  # a group's link that folds or unfolds it


def _groups_of(task_id: str, group: str | None) -> list[str]:
    """The groups a task is in, outermost first (`a`, `a.b` for a task of group `a.b`)."""
    if not group:
        return []
    parts = group.split(".")
    return [".".join(parts[:i + 1]) for i in range(len(parts))]


def grid(runs: list[Any], cells: list[tuple[int, str, int, str, int]], replaced: list[tuple[int, int, str]],
         task_order: list[str], *, groups: dict[str, str] | None = None, folded: frozenset[str] = frozenset(),
         detail: Callable[[int, str], str], toggle: Callable[[str], str] | None = None,
         picked: tuple[int, str] | None = None) -> tuple[list[Column], list[Row]]:
    """Columns (runs, oldest on the left) and rows (a task and its cell in each column): a cell links the detail
    panel of its task instance (`detail(run id, task id)`). `groups`: task id -> its task group; each group gets a
    row of its own before its tasks, which a group in `folded` hides (`toggle(group)`: the link that folds or
    unfolds it)."""
    groups = groups or {}
    columns = [Column(r.id, r.logical_date, r.state, r.run_type,
                      [(old, kind) for old, by, kind in replaced if by == r.id]) for r in reversed(runs)]
    by_key: dict[tuple[int, str], list[tuple[int, str, int]]] = {}
    for run_id, task_id, map_index, state, try_number in cells:
        by_key.setdefault((run_id, task_id), []).append((map_index, state, try_number))
    seen = {task_id for _, task_id in by_key}
    order = [t for t in task_order if t in seen or not by_key] + sorted(seen - set(task_order))
    order = _grouped(order, groups)

    def cell(c: Column, task_id: str) -> Cell | None:
        found = by_key.get((c.run_id, task_id))
        if not found:
            return None
        mapped = [f for f in found if f[0] >= 0]
        chosen, href = picked == (c.run_id, task_id), detail(c.run_id, task_id)
        if mapped:
            state = summary_state([f[1] for f in mapped])
            return Cell(state, href, f"{task_id}: {len(mapped)} mapped instance(s), {state}", chosen)
        _, state, try_number = found[0]
        tried = f", try {try_number}" if try_number else ""
        return Cell(state, href, f"{task_id} in run {c.run_id}: {state}{tried}", chosen)

    rows: list[Row] = []
    shown_groups: set[str] = set()
    for task_id in order:
        outer = _groups_of(task_id, groups.get(task_id))
        for depth, g in enumerate(outer):
            if g in shown_groups:
                continue
            shown_groups.add(g)
            if any(o in folded for o in outer[:depth]):
                continue  # inside a folded group
            members = [t for t in order if g in _groups_of(t, groups.get(t))]
            summary: list[Cell | None] = []
            for c in columns:
                states = [f[1] for t in members for f in by_key.get((c.run_id, t), [])]
                summary.append(Cell(summary_state(states), f"/runs/{c.run_id}",
                                    f"group {g} in run {c.run_id}: {summary_state(states)}") if states else None)
            rows.append(Row(g, depth, summary, group=True, folded=g in folded, toggle=toggle(g) if toggle else ""))
        if any(g in folded for g in outer):
            continue
        rows.append(Row(task_id, len(outer), [cell(c, task_id) for c in columns]))
    return columns, rows


def _grouped(order: list[str], groups: dict[str, str]) -> list[str]:
    """Tasks in `order`, those of one group (at every level) moved together at the place of the group's first
    task, so that a group's row stands over all of its tasks."""
    def key_path(task_id: str) -> list[str]:
        return [*_groups_of(task_id, groups.get(task_id)), task_id]

    first: dict[str, int] = {}
    for i, task_id in enumerate(order):
        for part in key_path(task_id):
            first.setdefault(part, i)
    return sorted(order, key=lambda t: [first[p] for p in key_path(t)])


@dataclass
class TryLine:
    try_number: int
    state: str
    version: str | None
    hostname: str | None
    started_at: str | None
    ended_at: str | None
    log: str


@dataclass
class Instance:
    """A task instance as the grid's detail panel shows it: its state, the version its next tries run, its tries."""

    label: str
    state: str
    version: str
    try_number: int
    max_tries: int
    tries: list[TryLine]
    reason: str | None = None  # why its last try failed (one line)


def instances(run_id: int, run_version: str, rows: list[tuple[Any, Any]], reasons: dict[str, Doc]) -> list[Instance]:
    """The detail panel's task instances from (task instance, try or None) rows ordered by map index and try."""
    out: dict[int, Instance] = {}
    for ti, t in rows:
        lbl = ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"
        if ti.id not in out:
            why = reasons.get(lbl)
            out[ti.id] = Instance(lbl, ti.state or "none", ti.dag_version or run_version, ti.try_number,
                                  ti.max_tries, [], why["reason"] if why else None)
        if t is not None:
            out[ti.id].tries.append(TryLine(
                t.try_number, t.state, t.dag_version, t.hostname, t.started_at.isoformat() if t.started_at else None,
                t.ended_at.isoformat() if t.ended_at else None,
                f"/runs/{run_id}/tasks/{quote(lbl, safe='')}/tries/{t.try_number}/log"))
    return list(out.values())


# -- the Gantt chart of a run ------------------------------------------------------------------------------


@dataclass
class Bar:
    label: str
    try_number: int
    state: str
    x: float
    width: float
    y: int
    title: str
    href: str


GANTT_LEFT, GANTT_WIDTH, GANTT_ROW = 220, 960, 22


def gantt(run: Doc, now: datetime) -> tuple[list[Bar], list[tuple[float, datetime]], int]:
    """Each try of a run as a bar from its start to its end (to `now` while it runs), one row per try in the
    order of the run's task instances; the time axis's ticks (x, time); the drawing's height."""
    tries = [(ti, t) for ti in run["task_instances"] for t in ti["tries"] if t["started_at"]]
    if not tries:
        return [], [], 0
    starts = [datetime.fromisoformat(t["started_at"]) for _, t in tries]
    ends = [datetime.fromisoformat(t["ended_at"]) if t["ended_at"] else now for _, t in tries]
    lo, hi = min(starts), max(max(ends), min(starts))
    span = max((hi - lo).total_seconds(), 0.001)
    bars = []
    for i, ((ti, t), s, e) in enumerate(zip(tries, starts, ends, strict=True)):
        x = GANTT_LEFT + (s - lo).total_seconds() / span * GANTT_WIDTH
        width = max((e - s).total_seconds() / span * GANTT_WIDTH, 2.0)
        seconds = (e - s).total_seconds()
        bars.append(Bar(ti["label"], t["try_number"], t["state"], round(x, 1), round(width, 1), 24 + i * GANTT_ROW,
                        f"{ti['label']} try {t['try_number']} {t['state']}: {seconds:.1f}s",
                        f"/runs/{run['run_id']}/tasks/{ti['label']}/tries/{t['try_number']}/log"))
    ticks = [(round(GANTT_LEFT + i / 4 * GANTT_WIDTH, 1), lo + (hi - lo) * i / 4) for i in range(5)]
    return bars, ticks, 24 + len(bars) * GANTT_ROW + 8


# -- the calendar of a DAG's runs ------------------------------------------------------------------------------


@dataclass
class Day:
    day: date
    state: str | None  # its live runs' most urgent state (None: no run that day)
    runs: int
    href: str


@dataclass
class Month:
    name: str
    weeks: list[list[Day | None]]  # Monday first; None: a day of another month


# the state a day shows for its runs: the first of this order that one of them is in
DAY_ORDER = ("failed", "running", "queued", "success")


def calendar(year: int, days: dict[date, list[tuple[str, int]]], dag_id: str) -> list[Month]:
    """The twelve months of `year` in weeks, each day with its live runs' most urgent state and how many there
    are; a day links its one run, or the timeline of that day."""
    months = []
    for month in range(1, 13):
        weeks: list[list[Day | None]] = []
        week: list[Day | None] = [None] * date(year, month, 1).weekday()
        for d in range(1, monthrange(year, month)[1] + 1):
            on = date(year, month, d)
            runs = days.get(on, [])
            states = {s for s, _ in runs}
            state = next((s for s in DAY_ORDER if s in states), next(iter(sorted(states)), None))
            href = f"/runs/{runs[0][1]}" if len(runs) == 1 else \
                f"/dags/{quote(dag_id, safe='')}?start={on.isoformat()}&end={on.isoformat()}"
            week.append(Day(on, state, len(runs), href))
            if len(week) == 7:
                weeks.append(week)
                week = []
        if week:
            weeks.append(week + [None] * (7 - len(week)))
        months.append(Month(date(year, month, 1).strftime("%B"), weeks))
    return months


# -- the task duration chart ---------------------------------------------------------------------------------------

CHART_BAR, CHART_GAP, CHART_HEIGHT = 14, 4, 60


@dataclass
class DurationBar:
    x: int
    height: float
    state: str
    title: str
    href: str


@dataclass
class Series:
    """One task's durations over the runs (oldest on the left): a bar per run, its height against the longest."""

    task_id: str
    bars: list[DurationBar]
    longest: float  # seconds
    median: float  # seconds


def durations(runs: list[Any], spans: list[tuple[int, str, str | None, Any, Any]], task_order: list[str],
              now: datetime) -> tuple[list[Series], int]:
    """The duration of each task's latest try in each run (a mapped task: its longest instance; a try running: until
    `now`), runs oldest on the left, tasks in `task_order` (the whole run first); and the chart's width."""
    ordered = list(reversed(runs))
    seconds: dict[tuple[int, str], tuple[float, str]] = {}
    for run_id, task_id, state, started, ended in spans:
        if started is None:
            continue
        took = max(((ended or now) - started).total_seconds(), 0.0)
        if took >= seconds.get((run_id, task_id), (-1.0, ""))[0]:
            seconds[(run_id, task_id)] = (took, state or "none")
    for r in ordered:
        if r.started_at is not None:
            seconds[(r.id, "")] = (max(((r.ended_at or now) - r.started_at).total_seconds(), 0.0), r.state)
    seen = {task for _, task in seconds if task}
    series = []
    for task_id in ["", *[t for t in task_order if t in seen], *sorted(seen - set(task_order))]:
        values = [seconds.get((r.id, task_id)) for r in ordered]
        known = sorted(v[0] for v in values if v is not None)
        if not known:
            continue
        top = max(known[-1], 0.001)
        bars = []
        for i, (r, v) in enumerate(zip(ordered, values, strict=True)):
            if v is None:
                continue
            name = task_id or "the whole run"
            bars.append(DurationBar(i * (CHART_BAR + CHART_GAP), round(max(v[0] / top * CHART_HEIGHT, 1.0), 1), v[1],
                                    f"{name} in run {r.id} ({r.logical_date:%Y-%m-%d %H:%M}): {seconds_text(v[0])}, "
                                    f"{v[1]}", f"/runs/{r.id}" + (f"#ti-{task_id}" if task_id else "")))
        series.append(Series(task_id or "the whole run", bars, known[-1], known[len(known) // 2]))
    return series, max(len(ordered), 1) * (CHART_BAR + CHART_GAP)


def seconds_text(seconds: float) -> str:
    """`0.8s`, `1m 05s`, `2h 03m`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


# -- versions by number ------------------------------------------------------------------------------------------


def version_names(versions: list[Any]) -> dict[str, str]:
    """version hash -> its name, `v3 · 2024-03-01` (its number among the DAG's versions, oldest first as
    `dag_store.versions` reads them, and the UTC date it was registered)."""
    return {v.version_hash: f"v{i} · {v.created_at:%Y-%m-%d}" for i, v in enumerate(versions, start=1)}


def version_by_name(versions: list[Any], ref: str) -> Any | None:
    """The version `ref` names as `vN` (N from 1), else None (then `ref` is a hash or a prefix of one)."""
    text = ref.strip().lower()
    if text.startswith("v") and text[1:].isdigit() and 1 <= int(text[1:]) <= len(versions):
        return versions[int(text[1:]) - 1]
    return None
