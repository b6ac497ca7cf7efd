"""The dataset graph of the web view (one page for what were the Datasets and Lineage pages): each dataset with its
producers (the DAG and task whose outlet it is, or that recorded a write of it), its consumers (the DAGs scheduled on
it, the tasks with it as an inlet) and the partitions written (how many, the newest), drawn as SVG by the server.

The DAGs' current versions say who produces and consumes (their specs are cached per process, ledger/store/dags.py);
what was written from the datasets' tallies (ledger/store/dataset_graph.py, decision 0300)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from sqlalchemy.orm import Session

from ledger.core.dataset_rules import leaf_keys, partitioning_of
from ledger.core.versions import DagSpec
from ledger.infra.settings import value as setting
from ledger.services import dataset_docs, documents
from ledger.store import dags as dag_store
from ledger.store import dataset_graph as graph_store
from ledger.store import datasets as dataset_store
from ledger.web.views import GAP_X, GAP_Y, MARGIN, NODE_H, graph_layers

NODE_W = 230  # wider than a task's box: a dataset's key and what was written of it


@dataclass
class Dataset:
    key: str
    producers: list[tuple[str, str]] = field(default_factory=list)  # (DAG, task)
    scheduled: list[str] = field(default_factory=list)  # DAGs scheduled on it
    inlets: list[tuple[str, str]] = field(default_factory=list)  # (DAG, task) reading it as an inlet
    written: graph_store.Written | None = None
    partitions: dict[str, Any] | None = None  # how a producer's outlet or a consumer's schedule partitions it


@dataclass
class GraphNode:
    key: str  # "dag:ID" or "dataset:KEY"
    kind: str  # dag | dataset
    label: str
    note: str
    href: str
    x: int = 0
    y: int = 0


@dataclass
class GraphEdge:
    path: str
    label: str
    x: int
    y: int


@dataclass
class Drawing:
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    width: int
    height: int
    node_width: int = NODE_W


def dag_href(dag_id: str) -> str:
    return f"/dags/{quote(dag_id, safe='')}"


def dataset_href(key: str) -> str:
    return f"/datasets/{quote(key, safe='/')}"


def _specs(session: Session) -> list[DagSpec]:
    return [dag_store.spec(session, d.dag_id, d.current_version) for d in dag_store.listing(session)
            if d.current_version is not None]


def _dataset_of(leaf: Any) -> str | None:
    return str(leaf["dataset"]) if isinstance(leaf, dict) and "dataset" in leaf else None


def datasets(session: Session, only: str | None = None) -> list[Dataset]:
    """Every dataset a DAG's current version writes, is scheduled on or reads as an inlet, or that has an event or
    a recorded write (or only the dataset `only`), by key."""
    found: dict[str, Dataset] = {}

    def entry(key: str) -> Dataset | None:
        if only is not None and key != only:
            return None
        return found.setdefault(key, Dataset(key))

    for spec in _specs(session):
        if spec.datasets is not None:
            for leaf in leaf_keys(spec.datasets["condition"]):
                if leaf.startswith("dataset:") and (e := entry(leaf.split(":", 1)[1])) is not None:
                    e.scheduled.append(spec.dag_id)
                    parts = partitioning_of(spec.datasets["condition"])
                    e.partitions = e.partitions or (parts.describe() if parts else None)
        for task in spec.tasks.values():
            for out in task.outlets:
                if (key := _dataset_of(out)) is not None and (e := entry(key)) is not None:
                    e.producers.append((spec.dag_id, task.task_id))
                    e.partitions = e.partitions or out.get("partitions")
            for inlet in task.inlets:
                if (key := _dataset_of(inlet)) is not None and (e := entry(key)) is not None:
                    e.inlets.append((spec.dag_id, task.task_id))
    verify = setting("LEDGER_VERIFY_MEMORY") is True  # (the test suite's: each read checks the tallies)
    for key, w in graph_store.written(session, None if only is None else [only], verify=verify).items():
        e = entry(key)
        if e is None:
            continue
        e.written = w
        if w.newest is not None and (w.newest.dag_id, w.newest.task_id) not in e.producers:
            e.producers.append((w.newest.dag_id, w.newest.task_id))  # a write recorded by a task without the outlet
    for e in found.values():
        e.producers, e.inlets = sorted(set(e.producers)), sorted(set(e.inlets))
        e.scheduled = sorted(set(e.scheduled))
    return [found[k] for k in sorted(found)]


def _written_note(w: graph_store.Written | None) -> str:
    if w is None or (w.events == 0 and w.writes == 0):
        return "nothing written yet"
    if w.partitions == 0:
        return f"{w.events + w.writes} write(s), not partitioned"
    newest = f" · newest {w.newest.partition}" if w.newest is not None and w.newest.partition else ""
    return f"{w.partitions} partition(s){newest}"


def drawing(found: list[Dataset]) -> Drawing:
    """The datasets and the DAGs around them in layers, left to right: a producer DAG, its datasets, the DAGs that
    consume them, what those write... An edge from a DAG to a dataset names the producing tasks; one from a
    dataset to a DAG says `schedule` (the DAG is scheduled on it) and names the tasks that read it as an inlet."""
    nodes: dict[str, GraphNode] = {}
    upstream: dict[str, list[str]] = {}
    labels: dict[tuple[str, str], list[str]] = {}

    def dag_node(dag_id: str) -> str:
        key = f"dag:{dag_id}"
        nodes.setdefault(key, GraphNode(key, "dag", dag_id, "DAG", dag_href(dag_id)))
        upstream.setdefault(key, [])
        return key

    for d in found:
        key = f"dataset:{d.key}"
        nodes[key] = GraphNode(key, "dataset", d.key, _written_note(d.written), dataset_href(d.key))
        upstream.setdefault(key, [])
        for dag_id, task_id in d.producers:
            source = dag_node(dag_id)
            if source not in upstream[key]:
                upstream[key].append(source)
            labels.setdefault((source, key), []).append(task_id)
        for dag_id in d.scheduled:
            target = dag_node(dag_id)
            upstream[target].append(key)
            labels.setdefault((key, target), []).append("schedule")
        writers = {dag_id for dag_id, _task in d.producers}
        for dag_id, task_id in d.inlets:
            target = dag_node(dag_id)
            if key not in upstream[target] and dag_id not in writers:  # a DAG reading what it writes: not a layer
                upstream[target].append(key)
            labels.setdefault((key, target), []).append(f"inlet {task_id}")
    layers = graph_layers([{"task_id": k, "upstream": upstream[k]} for k in sorted(nodes, key=_order)])
    for col, layer in enumerate(layers):
        for row, t in enumerate(layer):
            n = nodes[t["task_id"]]
            n.x, n.y = MARGIN + col * (NODE_W + GAP_X), MARGIN + row * (NODE_H + GAP_Y)
    edges = []
    for (a, b), names in sorted(labels.items()):
        s, e = nodes[a], nodes[b]
        sx, sy, ex, ey = s.x + NODE_W, s.y + NODE_H // 2, e.x - 4, e.y + NODE_H // 2
        if ex <= sx:  # a cycle, or a DAG that consumes what it writes: around below
            low = max(s.y, e.y) + NODE_H + GAP_Y // 2
            path = f"M{s.x + NODE_W // 2},{s.y + NODE_H} C{s.x + NODE_W // 2},{low} {e.x + NODE_W // 2},{low} " \
                   f"{e.x + NODE_W // 2},{e.y + NODE_H + 4}"
            mid_x, mid_y = (s.x + e.x + NODE_W) // 2, low - 4
        else:
            mid_x = (sx + ex) // 2
            path = f"M{sx},{sy} C{mid_x},{sy} {mid_x},{ey} {ex},{ey}"
            mid_y = (sy + ey) // 2 - 4
        edges.append(GraphEdge(path, _label(names), mid_x, mid_y))
    tallest = max((len(la) for la in layers), default=1)
    width = MARGIN * 2 + max(len(layers), 1) * (NODE_W + GAP_X) - GAP_X
    height = MARGIN * 2 + tallest * (NODE_H + GAP_Y) - GAP_Y + GAP_Y // 2
    return Drawing(sorted(nodes.values(), key=lambda n: (n.x, n.y)), edges, width, height)


def _order(key: str) -> tuple[int, str]:
    return (0 if key.startswith("dag:") else 1, key)


def _label(names: list[str]) -> str:
    names = sorted(set(names), key=lambda n: (n != "schedule", n))
    text = ", ".join(names)
    return text if len(text) <= 28 else text[:27] + "…"


def partitions_written(rows: list[Any], order: list[str]) -> list[dict[str, Any]]:
    """Per partition (in `order`): its writes (ledger/store/dataset_graph.py `writes_of` rows, oldest first) and
    the current one, the newest successful write, as `ledger lineage` says."""
    parts: dict[str, list[dict[str, Any]]] = {p: [] for p in order}
    for row in rows:
        parts.setdefault(row[0].partition, []).append(documents.write_json(row))
    result = []
    for name, history in parts.items():
        ok = [w for w in history if w["try_state"] == "success"]
        if history:
            result.append({"partition": name, "current": ok[-1] if ok else None, "history": history})
    return result


def partition_matrix(session: Session, d: Dataset, *, limit: int) -> list[dict[str, Any]]:
    """Per partition of a partitioned dataset, its `limit` greatest (the newest) first: its newest event, and per DAG
    scheduled on it whether that DAG's live run of the partition read that event (current), an older one (stale),
    or none (missing): the matrix of `ledger datasets show`, for the partitions a page shows."""
    events = graph_store.newest_partition_events(session, d.key, limit=limit)
    read: dict[str, dict[str, int]] = {}
    for dag_id in d.scheduled:
        seen = read.setdefault(dag_id, {})
        for c in dataset_store.read_by_live_runs(session, dag_id):
            if c.event.dataset == d.key and c.event.partition is not None:
                seen[c.event.partition] = min(seen.get(c.event.partition, c.event.id), c.event.id)
    rows = []
    for e in events:
        cells = {}
        for dag_id in d.scheduled:
            had = read[dag_id].get(e.partition or "")
            cells[dag_id] = "missing" if had is None else "current" if had >= e.id else "stale"
        rows.append({"partition": e.partition, "event_id": str(e.id), "consumers": cells})
    return rows


def latest_events(session: Session, key: str, *, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` events of a dataset, as `ledger datasets show` lists them."""
    recent = dataset_store.events_of(session, dataset=key, limit=limit)
    writers = dataset_store.writers_of(session, [e.id for e in recent])
    return [dataset_docs.event_json(e, writers) for e in recent]
