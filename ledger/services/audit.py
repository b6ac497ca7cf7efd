"""`ledger audit`: verify the events' hash chains and the rows they report, export a range of a DAG's history as
one file a third party can check, and check such a file without a database (decisions 0260-0262).

A verification recomputes each chain from its events and compares it with its head, each run with what the last
event about it recorded, and the code's content-addressed rows with their keys: a DAG version's structure with its
hash, its snapshot key with its entry and bundle, a bundle's manifest with its hash, a blob's bytes with its
sha256. Each break is one line."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ledger.core.audit import (
    FACTS,
    GENESIS,
    Break,
    ChainedEvent,
    Head,
    TaskRow,
    chain_breaks,
    chain_of,
    fact_breaks,
    id_order_breaks,
    last_covers,
    recorded_facts,
    restart_notice,
    rows_digest,
    run_breaks,
    tries_digest,
)
from ledger.core.errors import DagNotFound, InvalidInput
from ledger.core.versions import hash_structure
from ledger.infra import settings
from ledger.infra.code import parse_bundle, sha256_bytes, snapshot_key
from ledger.store import audit as audit_store

FORMAT = "ledger-audit-export/1"
TRY_COLUMNS = ("task_id", "map_index", "try_number", "state", "dag_version")
"""An export's `try_rows` entries, in the order of a run cover's `try_rows` digest (ledger.core.audit.TryRow)."""
WRITE_COLUMNS = ("task_id", "try_number", "dataset", "partition", "dag_version", "try_state", "rows", "path")
"""An export's `writes` entries, in the order of a run cover's `writes` digest (ledger.core.audit.WriteRow)."""


@dataclass
class Report:
    chains: int = 0
    events: int = 0
    runs: int = 0
    blobs: int = 0
    breaks: list[Break] = field(default_factory=list)
    notices: list[Break] = field(default_factory=list)
    """What verifies but is worth saying (a chain whose verified history begins after unchecked events): not a
    break."""

    @property
    def ok(self) -> bool:
        return not self.breaks

    def summary(self) -> str:
        return (f"verified: {self.chains} chain(s), {self.events} event(s), {self.runs} run(s), "
                f"{self.blobs} code blob(s)")


# -- the database --------------------------------------------------------------------------------------------


def verify(session: Session, dag_ids: list[str] | None = None, *, since: int | None = None) -> Report:
    """Verify the chains of `dag_ids` (all chains when None) from event `since` on (from their start when None)."""
    names = audit_store.chain_names(session)
    for dag_id in dag_ids or []:
        if dag_id not in names and not audit_store.known_dag(session, dag_id):
            raise DagNotFound(dag_id)
    if since is not None and not audit_store.event_exists(session, since):
        raise InvalidInput(f"--since {since}: there is no event {since}")
    report = Report()
    turns = session.get_bind().dialect.name == "sqlite"  # writers take turns: ids grow with places (0359)
    for chain in sorted(dag_ids if dag_ids else names):
        events = list(audit_store.chain_events(session, chain, since=since))
        report.chains += 1
        report.events += len(events)
        linked = chain_breaks(chain, events, audit_store.head(session, chain), whole=since is None)
        report.breaks += linked or (id_order_breaks(chain, events) if turns else [])
        report.notices += _notice(chain, events)
        if chain == "":
            continue
        recorded = last_covers(events)
        now = audit_store.runs(session, chain)
        runs = now.covers
        if since is not None:  # the runs the events from `since` on report
            runs = {k: v for k, v in runs.items() if k in recorded}
        report.runs += len(runs)
        report.breaks += run_breaks(chain, recorded, runs)
        report.breaks += fact_breaks(chain, recorded_facts(events), now.facts)
    whole = dag_ids is None
    versions = audit_store.versions(session) if whole else [v for d in dag_ids or [] for v in
                                                            audit_store.versions(session, d)]
    rows = [_version_row(v) for v in versions]
    bundles = audit_store.bundles(session, None if whole else sorted({r["code_bundle"] for r in rows
                                                                      if r["code_bundle"]}))
    shas = None if whole else sorted(_files(rows, bundles).values())
    report.breaks += version_breaks(rows, bundles)
    blobs = 0
    for sha, data in audit_store.blobs(session, shas):
        blobs += 1
        try:
            content = zlib.decompress(data)
        except zlib.error:
            content = b""
        if sha256_bytes(content) != sha:
            report.breaks.append(_blob_changed(sha))
    report.blobs = blobs
    return report


def _notice(chain: str, events: list[ChainedEvent]) -> list[Break]:
    found = restart_notice(chain, events)
    return [] if found is None else [found]


def _blob_changed(sha: str) -> Break:
    return Break("code", f"code blob {sha[:12]} was changed: its bytes no longer give its sha256")


def _version_row(v: Any) -> dict[str, Any]:
    return {"dag_id": v.dag_id, "version_hash": v.version_hash, "structure": v.structure,
            "code_entry": v.code_entry, "code_entry_sha256": v.code_entry_sha256, "code_bundle": v.code_bundle,
            "code_snapshot": v.code_snapshot}


def _files(versions: Iterable[Mapping[str, Any]], bundles: Mapping[str, str]) -> dict[str, str]:
    """(relative path, version) -> sha256 of every file of these versions' code."""
    found: dict[str, str] = {}
    for v in versions:
        if v["code_entry_sha256"] is not None:
            found[f"{v['version_hash']}:{v['code_entry']}"] = v["code_entry_sha256"]
        if v["code_bundle"] in bundles:
            with_helpers = parse_bundle(bundles[v["code_bundle"]])
            found.update({f"{v['version_hash']}:{p}": s for p, s in with_helpers.items()})
    return found


def version_breaks(versions: Iterable[Mapping[str, Any]], bundles: Mapping[str, str]) -> list[Break]:
    """Each version whose structure no longer gives its hash, whose snapshot key no longer follows from its entry
    and bundle, or whose bundle's manifest no longer gives its hash (or is gone)."""
    out = []
    for v in versions:
        chain, name = chain_of(v["dag_id"]), f"version {v['version_hash'][:12]}"
        if hash_structure(v["structure"]) != v["version_hash"]:
            out.append(Break(chain, f"{name} was changed: its structure no longer gives its hash"))
        if v["code_snapshot"] is not None and \
                snapshot_key(v["code_entry"], v["code_entry_sha256"], v["code_bundle"]) != v["code_snapshot"]:
            out.append(Break(chain, f"{name} was changed: its code entry or bundle no longer gives its snapshot key"))
        bundle = v["code_bundle"]
        if bundle is not None:
            if bundle not in bundles:
                out.append(Break(chain, f"{name}'s code bundle {bundle[:12]} is gone"))
            elif sha256_bytes(bundles[bundle].encode("utf-8")) != bundle:
                out.append(Break(chain, f"code bundle {bundle[:12]} was changed: its manifest no longer gives its "
                                        "hash"))
    return out


# -- exports -------------------------------------------------------------------------------------------------


def export(session: Session, dag_id: str, start: datetime, end: datetime, *, key: str | None = None
           ) -> dict[str, Any]:
    """A range of a DAG's history as one document (decision 0261): its runs with a logical date in [start, end],
    their tries, their versions' code, and the DAG's chain from the first event about them to its head (the
    events about other runs by their hashes only); signed with `key` (LEDGER_AUDIT_KEY) when given."""
    if not audit_store.known_dag(session, dag_id):
        raise DagNotFound(dag_id)
    if start > end:
        raise InvalidInput(f"--start {start.isoformat()} is after --end {end.isoformat()}")
    head = audit_store.head(session, dag_id)
    if head is None:
        raise InvalidInput(f"DAG {dag_id!r} has no events to export")
    runs = audit_store.runs_in_range(session, dag_id, start, end)
    ids = {r["id"] for r in runs}
    first = audit_store.first_place(session, dag_id, sorted(ids))
    if not ids:  # a range with no runs: the head's own event, so that the file still ends at the head it pins
        first = head.length
    events: list[dict[str, Any]] = []
    for e in audit_store.chain_events(session, dag_id):
        if e.kind == GENESIS and isinstance(e.covers, dict) and ids & {int(k) for k in e.covers.get("runs", {})}:
            first = e.seq if first is None or (e.seq is not None and e.seq < first) else first
        if first is None or e.seq is None or e.seq < first:
            continue
        full = e.run_id is None or e.run_id in ids
        events.append(e.as_json() if full else {"id": e.id, "seq": e.seq, "prev_hash": e.prev_hash, "hash": e.hash})
    hashes = sorted({r["version"] for r in runs})
    versions = [_version_row(v) for v in audit_store.versions(session, dag_id, hashes)]
    bundles = audit_store.bundles(session, sorted({v["code_bundle"] for v in versions if v["code_bundle"]}))
    blobs = {sha: base64.b64encode(zlib.decompress(data)).decode("ascii")
             for sha, data in audit_store.blobs(session, sorted(set(_files(versions, bundles).values())))}
    doc: dict[str, Any] = {
        "format": FORMAT, "dag_id": dag_id, "start": start.isoformat(), "end": end.isoformat(),
        "head": {"hash": head.hash, "id": head.id, "length": head.length},
        "events": events, "runs": runs, "tries": audit_store.tries(session, sorted(ids)),
        "try_rows": audit_store.try_rows(session, sorted(ids)), "writes": audit_store.writes(session, sorted(ids)),
        "versions": versions, "bundles": bundles, "blobs": blobs}
    if key is not None:
        doc["signature"] = sign(doc, key)
    return doc


def signed_text(doc: Mapping[str, Any]) -> bytes:
    """What an export's signature signs: its format, DAG and chain head."""
    head = doc["head"]
    return f"{FORMAT}\n{doc['dag_id']}\n{head['id']}\n{head['length']}\n{head['hash']}".encode()


def _private_key(key: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        raw = bytes.fromhex(key.strip())
        if len(raw) != 32:
            raise ValueError
    except ValueError:
        raise InvalidInput("LEDGER_AUDIT_KEY must be an Ed25519 private key: 64 hex digits") from None
    return Ed25519PrivateKey.from_private_bytes(raw)


def audit_key() -> str | None:
    found = settings.value("LEDGER_AUDIT_KEY")
    return None if found is None else str(found)


def public_key(key: str) -> str:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return bytes(_private_key(key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)).hex()


def sign(doc: Mapping[str, Any], key: str) -> dict[str, str]:
    private = _private_key(key)
    return {"algorithm": "ed25519", "public_key": public_key(key), "value": private.sign(signed_text(doc)).hex()}


def signature_break(doc: Mapping[str, Any], trusted: str | None) -> Break | None:
    """None when the export is signed and its signature holds (by `trusted`, when given), or unsigned and no key is
    required."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    chain, found = str(doc.get("dag_id")), doc.get("signature")
    if found is None:
        return None if trusted is None else Break(chain, "the export is not signed")
    try:
        public = bytes.fromhex(str(found["public_key"]))
        Ed25519PublicKey.from_public_bytes(public).verify(bytes.fromhex(str(found["value"])), signed_text(doc))
    except (InvalidSignature, ValueError, KeyError, TypeError):
        return Break(chain, "the signature of the export's head does not hold: the head was changed")
    if trusted is not None and public.hex() != trusted.strip().lower():
        return Break(chain, f"the export is signed by key {public.hex()[:16]}..., not the trusted one")
    return None


def read_bundle(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"no file {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path} is not an audit export: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InvalidInput(f"{path} is not an audit export (format {FORMAT})")
    return doc


def verify_bundle(doc: Mapping[str, Any], *, trusted_key: str | None = None) -> Report:
    """Check an export with no database (the procedure docs/concepts.md gives): its chain segment links up and ends
    at its head, each full event gives its hash, each run is what the last event about it recorded, each version's
    code gives its hashes; the signature, when there is one, holds."""
    try:
        return _verify_bundle(doc, trusted_key)
    except KeyError as exc:
        raise InvalidInput(f"the export is corrupted: it has no {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput(f"the export is corrupted: {exc}") from None


def _verify_bundle(doc: Mapping[str, Any], trusted_key: str | None) -> Report:
    chain = str(doc["dag_id"])
    events, stubs = [], set()
    for row in doc["events"]:
        if "kind" not in row:
            stubs.add(int(row["id"]))
            row = {"at": "", "kind": "", "actor": "", **row}
        events.append(ChainedEvent.from_json(row))
    h = doc["head"]
    report = Report(chains=1, events=len(events), runs=len(doc["runs"]), blobs=len(doc["blobs"]))
    report.breaks += chain_breaks(chain, events, Head(h["hash"], h["id"], h["length"]), whole=False,
                                  stubs=frozenset(stubs))
    report.notices += _notice(chain, events)
    runs = _bundle_covers(doc)
    reported = {e.run_id: e for e in events if e.id not in stubs and e.run_id is not None}
    report.breaks += [Break(chain, f"run {run_id} is not in the export, but event {reported[run_id].id} "
                                   f"({reported[run_id].kind}) reports it: it was removed")
                      for run_id in sorted(set(reported) - set(runs))]
    # (the genesis event's snapshot holds the DAG's runs outside the range too: only those in the export count)
    recorded = {k: v for k, v in last_covers(events).items() if k in runs}
    report.breaks += run_breaks(chain, recorded, runs)
    report.breaks += fact_breaks(chain, recorded_facts(events),
                                 {int(r["id"]): {k: r[k] for k in FACTS if k in r} for r in doc["runs"]})
    versions, bundles = doc["versions"], dict(doc["bundles"])
    report.breaks += version_breaks(versions, bundles)
    for sha, text in doc["blobs"].items():
        if sha256_bytes(base64.b64decode(text)) != sha:
            report.breaks.append(_blob_changed(sha))
    missing = sorted(set(_files(versions, bundles).values()) - set(doc["blobs"]))
    report.breaks += [Break("code", f"code blob {sha[:12]} is missing from the export") for sha in missing]
    known = {v["version_hash"] for v in versions}
    report.breaks += [Break(chain, f"run {r['id']}'s version {r['version'][:12]} is missing from the export")
                      for r in doc["runs"] if r["version"] not in known]
    signature = signature_break(doc, trusted_key)
    if signature is not None:
        report.breaks.append(signature)
    return report


def _bundle_covers(doc: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """Each run of an export as an event would record it, its digests from the export's task instances, tries and
    lineage writes (an export written before it held tries and writes gives no digest of them)."""
    tasks: dict[int, list[TaskRow]] = {}
    for t in doc.get("tries") or []:
        tasks.setdefault(int(t["run_id"]), []).append((t["task_id"], t["map_index"], t["try_number"], t["state"]))
    held: dict[str, dict[int, list[list[Any]]]] = {}
    for key, columns in (("try_rows", TRY_COLUMNS), ("writes", WRITE_COLUMNS)):
        if key in doc:
            held[key] = {}
            for row in doc[key]:
                held[key].setdefault(int(row["run_id"]), []).append([row[c] for c in columns])
    return {int(r["id"]): {**{k: r[k] for k in ("id", "state", "previous", "version", "code")},
                           "tries": tries_digest(tasks.get(int(r["id"]), []), only_finished=False),
                           **{key: rows_digest(by_run.get(int(r["id"]), [])) for key, by_run in held.items()}}
            for r in doc["runs"]}


def write_bundle(doc: Mapping[str, Any], path: Path) -> None:
    text = json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
