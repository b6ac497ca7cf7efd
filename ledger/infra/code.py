"""A DAG version's code: the DAG file and the files of the DAGs folder it imports, content-addressed.

What a version captures (see docs/decisions/, "What a version's code is"):

* the DAG file itself (the *entry*);
* every module of the DAGs folder that importing the DAG file imported, and, for a module inside a
  top-level folder of the DAGs folder (a package such as `common/`), that whole folder's code and
  configuration files (`CODE_SUFFIXES`), so that imports made later, inside task code, find their module
  too.

Each file is stored once per distinct content (sha256 of its bytes). The helper files of a DAG form a
*bundle*, a manifest of relative path -> sha256 that many DAGs share. The *snapshot* key names the whole
(entry + bundle); it is the name of the folder a worker materialises the code into.

The version hash covers the code through `version_digest`: the entry's syntax-tree digest (so a comment
or layout change to the DAG file makes no new version, as before) and, when there are helper files, one
digest over each helper's path and digest (syntax tree for Python, bytes for the rest).

Pure: no I/O here. Reading files is `ledger.scheduler.runtime.dagbag`'s job, storing them `ledger.store.code`'s.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

# besides Python, what a helper package carries that its code may read at run time
CODE_SUFFIXES = frozenset({".py", ".json", ".yaml", ".yml", ".toml", ".ini", ".cfg", ".sql", ".sh", ".j2", ".txt"})


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def python_digest(source: str) -> str:
    """sha256 of a Python file's syntax tree: edits to comments, blank lines or layout leave it unchanged,
    any change to the code (a function, a constant, an import) changes it."""
    try:
        tree = ast.dump(ast.parse(source))
    except SyntaxError:  # not Python we can parse: hash the text itself
        tree = source
    return hashlib.sha256(tree.encode("utf-8")).hexdigest()


def file_digest(relpath: str, data: bytes) -> str:
    """What the version hash covers of one file: its syntax tree for Python, its bytes otherwise."""
    if relpath.endswith(".py"):
        return python_digest(data.decode("utf-8", errors="replace"))
    return sha256_bytes(data)


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class CodeFile:
    relpath: str  # POSIX path relative to the DAGs folder
    sha256: str  # of the bytes: the blob's key
    digest: str  # what the version hash covers (file_digest)

    @staticmethod
    def of(relpath: str, data: bytes) -> CodeFile:
        return CodeFile(relpath, sha256_bytes(data), file_digest(relpath, data))


@dataclass(frozen=True, slots=True)
class CodeManifest:
    """The code of one DAG version: its entry (the DAG file) and its helper files (sorted by path)."""

    entry: CodeFile
    support: tuple[CodeFile, ...] = ()

    @staticmethod
    def build(entry: CodeFile, support: Iterable[CodeFile]) -> CodeManifest:
        unique = {f.relpath: f for f in support if f.relpath != entry.relpath}
        return CodeManifest(entry, tuple(unique[p] for p in sorted(unique)))

    @property
    def bundle_text(self) -> str | None:
        """Canonical JSON of the helper files (relative path -> sha256), or None without helpers."""
        if not self.support:
            return None
        return canonical({f.relpath: f.sha256 for f in self.support})

    @property
    def bundle_hash(self) -> str | None:
        text = self.bundle_text
        return None if text is None else sha256_bytes(text.encode("utf-8"))

    @property
    def snapshot(self) -> str:
        """The key of the whole snapshot (entry path and content, and the bundle)."""
        return snapshot_key(self.entry.relpath, self.entry.sha256, self.bundle_hash)

    def version_digest(self) -> dict[str, object]:
        """The part of a version's structure that covers its code: the entry's digest and, with helpers, one
        digest of every helper's path and digest (one value, not a map: the structure is stored per version,
        and the per-file digests are in the version's bundle already)."""
        found: dict[str, object] = {"code_sha256": self.entry.digest}
        if self.support:
            modules = canonical({f.relpath: f.digest for f in self.support})
            found["modules_sha256"] = sha256_bytes(modules.encode("utf-8"))
        return found

    def files(self) -> dict[str, str]:
        """relative path -> sha256 of every file, the entry included."""
        return {self.entry.relpath: self.entry.sha256, **{f.relpath: f.sha256 for f in self.support}}


def snapshot_key(entry: str, entry_sha256: str, bundle_hash: str | None) -> str:
    return sha256_bytes(canonical({"entry": entry, "sha256": entry_sha256, "bundle": bundle_hash}).encode("utf-8"))


def parse_bundle(text: str) -> dict[str, str]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a code bundle's manifest must be a JSON object")
    return {str(k): str(v) for k, v in value.items()}


def helper_paths(imported: Iterable[str], candidates_of: Mapping[str, Iterable[str]]) -> set[str]:
    """Which files of the DAGs folder a DAG's code needs, given the relative paths of the modules importing
    it imported: a module at the top of the folder is itself; a module inside a top-level folder brings
    every file of that folder listed in `candidates_of[top folder]`."""
    needed: set[str] = set()
    for rel in imported:
        parts = PurePosixPath(rel).parts
        if len(parts) == 1:
            needed.add(rel)
        else:
            needed.add(rel)
            needed.update(candidates_of.get(parts[0], ()))
    return needed


def wanted_file(relpath: str) -> bool:
    """A file of a helper package that goes into the snapshot: code or configuration, not hidden, not
    compiled."""
    parts = PurePosixPath(relpath).parts
    if any(p.startswith(".") or p == "__pycache__" for p in parts):
        return False
    return PurePosixPath(relpath).suffix in CODE_SUFFIXES
