"""Loading DAG files: import a file, collect its DAGs, turn any failure into a readable error."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from ledger import dag as dag_module
from ledger.dag import DAG, DAG_MODULE_PREFIX
from ledger.errors import DagDefinitionError


@dataclass
class FileResult:
    fileloc: str
    dags: list[DAG] = field(default_factory=list)
    error: str | None = None


def list_dag_files(folder: Path) -> list[str]:
    """Python files under the folder, skipping hidden and private (`_name`) files and folders."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).parts
        if any(part.startswith((".", "_")) for part in rel):
            continue
        found.append(str(path))
    return found


def content_hash(fileloc: str) -> str:
    return hashlib.sha256(Path(fileloc).read_bytes()).hexdigest()


def _module_name(fileloc: str) -> str:
    return DAG_MODULE_PREFIX + hashlib.sha1(fileloc.encode()).hexdigest()[:16]


def _describe(exc: BaseException, fileloc: str) -> str:
    if isinstance(exc, DagDefinitionError):
        return f"{fileloc}: {exc}"
    if isinstance(exc, SyntaxError):
        return f"{fileloc}:{exc.lineno}: SyntaxError: {exc.msg}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == fileloc]
    where = f"{fileloc}:{frames[-1].lineno}" if frames else fileloc
    return f"{where}: {type(exc).__name__}: {exc}"


def load_file(fileloc: str) -> FileResult:
    """Import one DAG file and return the DAGs it defines (module-level DAG objects), or its error."""
    result = FileResult(fileloc)
    name = _module_name(fileloc)
    dag_module.created.clear()
    try:
        spec = importlib.util.spec_from_file_location(name, fileloc)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {fileloc}")
        source_code = Path(fileloc).read_text(encoding="utf-8", errors="replace")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        seen: set[int] = set()
        # DAGs bound to module names, and DAGs made in a `with DAG(...):` block without a name
        for value in [*vars(module).values(), *dag_module.created]:
            if isinstance(value, DAG) and id(value) not in seen:
                seen.add(id(value))
                value.validate()
                value.fileloc = fileloc
                value.source_code = source_code
                result.dags.append(value)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        result.dags = []
        result.error = _describe(exc, fileloc)
    finally:
        dag_module.created.clear()
    return result
