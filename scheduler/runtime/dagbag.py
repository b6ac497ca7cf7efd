"""Loading DAG files: import a file with its DAGs folder on `sys.path`, collect its DAGs and the code it
needs (ledger/infra/code.py), turn any failure into a readable error.

The same loader imports a DAG file from the live DAGs folder (parsing) and from a version's materialised
snapshot (a try: scheduler/loop/code_cache.py). Either way the file's folder (the *code root*) is first on
`sys.path` while it is imported, and the modules imported earlier from any other code root are forgotten
first, so that a helper module is always the one beside the file being imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from ledger import airflow_compat
from ledger.core.errors import DagDefinitionError
from ledger.infra.code import CodeFile, CodeManifest, file_digest, helper_paths, sha256_bytes, wanted_file
from ledger.sdk import dag as dag_module
from ledger.sdk.dag import DAG, DAG_MODULE_PREFIX
from ledger.sdk.templates import included_files
from ledger.sdk.timetables import home_problem


@dataclass
class FileResult:
    fileloc: str
    dags: list[DAG] = field(default_factory=list)
    error: str | None = None
    root: str | None = None  # the code root the file was imported from
    code: CodeManifest | None = None  # the file and the helper files it needs
    modules: dict[str, ModuleType] = field(default_factory=dict)  # modules it imported from its root


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


def is_text_path(path: str) -> bool:
    """Whether a path (as os.listdir gives it) is valid UTF-8: only then can it be stored (the database's
    file columns are text), printed and encoded. A name that is not has undecodable bytes, which Python
    holds as lone surrogates (surrogateescape)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: str) -> str:
    """A path as text that can be stored and printed: itself when it is valid UTF-8; else with its bytes
    that are not UTF-8 as backslash escapes (`caf\\xe9.py` for the bytes `caf\xe9.py`)."""
    if is_text_path(path):
        return path
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def name_error(path: str) -> str:
    """The import error of a DAG file whose name is not valid UTF-8 (it is not imported)."""
    return f"{shown_path(path)}: the file name is not valid UTF-8, so ledger cannot record it; rename the file"


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
    if isinstance(exc, airflow_compat.AirflowImportRefused):
        return f"{where}: {exc}"
    return f"{where}: {type(exc).__name__}: {exc}"


# -- code roots -------------------------------------------------------------------------------------

_roots: set[str] = set()  # every code root this process imported from
# The load whose modules are the only code-root modules in sys.modules (None: unknown). Lets activate()
# skip its walk of sys.modules when a forked try runs the file its worker loaded last, the common case.
_active: FileResult | None = None
_activated_path: list[str] | None = None  # sys.path as activate() last left it


def _inside(path: str, root: str) -> bool:
    return path.startswith(root + os.sep)


def _module_paths(module: ModuleType) -> list[str]:
    found = getattr(module, "__file__", None)
    if found:
        return [found]
    return [str(p) for p in getattr(module, "__path__", None) or ()]  # a namespace package


def forget_modules(roots: Iterable[str]) -> None:
    """Drop from sys.modules every module loaded from one of `roots`."""
    roots = tuple(roots)
    if not roots:
        return
    for name, module in list(sys.modules.items()):
        if module is None or name.startswith(DAG_MODULE_PREFIX):
            continue
        paths = _module_paths(module)
        if paths and any(_inside(p, r) or p == r for p in paths for r in roots):
            del sys.modules[name]


@contextlib.contextmanager
def code_root(root: str | None, *, keep: bool = False) -> Iterator[None]:
    """While the block runs, `root` is first on sys.path (other code roots are off it) and every module
    imported earlier from any code root, this one included, is forgotten: what the block imports is read
    afresh. With `keep`, sys.path stays that way after the block (a try's process, whose task code may
    import later)."""
    global _active
    if root is None:
        yield
        return
    root = os.path.abspath(root)
    _roots.add(root)
    forget_modules(_roots)
    _active = None
    saved = list(sys.path)
    sys.path[:] = [root, *(p for p in sys.path if os.path.abspath(p or ".") not in _roots)]
    try:
        yield
    finally:
        if not keep:
            sys.path[:] = saved


def activate(result: FileResult) -> None:
    """Make the process import as the loaded file did: its root first on sys.path, the modules it imported
    (and no others from any code root) in sys.modules. For a try's process, before task code runs."""
    global _active, _activated_path
    if result.root is None:
        return
    airflow_compat.install()  # task code may import `airflow...` when it runs
    if _active is result and sys.path == _activated_path:  # as the last activation left it: a worker's next try of
        return  # the same file finds it so (and each path of sys.path made absolute again costs a fork's pages)
    root = os.path.abspath(result.root)
    _roots.add(root)
    sys.path[:] = [root, *(p for p in sys.path if os.path.abspath(p or ".") not in _roots)]
    if _active is not result:
        forget_modules(_roots)
        sys.modules.update(result.modules)
        _active = result
    _activated_path = list(sys.path)


def _files_under(root: str, top: str) -> list[str]:
    """Relative paths of the code and configuration files of `root/top` (a folder)."""
    base = Path(root) / top
    if not base.is_dir():
        return []
    found = []
    for path in base.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and wanted_file(rel):
            if not is_text_path(rel):  # it could not be stored with the version: the try would miss it
                raise DagDefinitionError(f"the helper file {shown_path(rel)} (in {root}) has a name that is "
                                         "not valid UTF-8, so it cannot be stored with the DAG's code; "
                                         "rename it")
            found.append(rel)
    return sorted(found)


_digests: dict[tuple[str, str], str] = {}  # (relative path, sha256 of its bytes) -> file_digest


def _code_file(root: str, rel: str) -> CodeFile:
    """The CodeFile of root/rel. The bytes are read and hashed every time (what is captured is what is on
    disk now); the digest, a syntax tree for Python, is cached by content, so a processor that parses many
    DAG files importing one large package parses each of its files once."""
    data = Path(root, rel).read_bytes()
    sha = sha256_bytes(data)
    digest = _digests.get((rel, sha))
    if digest is None:
        digest = _digests[(rel, sha)] = file_digest(rel, data)
    return CodeFile(rel, sha, digest)


def capture_code(fileloc: str, root: str, imported: Iterable[str], kept: Iterable[str] = ()) -> CodeManifest:
    """The manifest of a DAG file's code: the file, and the files of `root` its import needed
    (`imported`: the files of modules it imported from `root`, and those it read); `kept`: files of them kept
    whatever their suffix (template files its templates include: a try renders them)."""
    entry_rel = Path(fileloc).relative_to(root).as_posix()
    rels = [Path(p).relative_to(root).as_posix() for p in imported]
    kept_rels = {Path(p).relative_to(root).as_posix() for p in kept}
    tops = {Path(r).parts[0] for r in rels if len(Path(r).parts) > 1}
    needed = helper_paths(rels, {top: _files_under(root, top) for top in tops})
    support = [_code_file(root, rel) for rel in sorted(needed)
               if rel != entry_rel and (wanted_file(rel) or rel in kept_rels) and (Path(root) / rel).is_file()]
    return CodeManifest.build(CodeFile.of(entry_rel, Path(fileloc).read_bytes()), support)


def load_file(fileloc: str, root: str | None = None) -> FileResult:
    """Import one DAG file and return the DAGs it defines (module-level DAG objects) and its code, or its
    error. `root`: the folder imports are resolved from (the DAGs folder, or a version's snapshot); default:
    the file's own folder."""
    global _active
    fileloc = os.path.abspath(fileloc)
    if not is_text_path(fileloc):
        return FileResult(shown_path(fileloc), error=name_error(fileloc))
    root = os.path.abspath(root) if root is not None else os.path.dirname(fileloc)
    if not _inside(fileloc, root):
        root = os.path.dirname(fileloc)
    result = FileResult(fileloc, root=root)
    name = _module_name(fileloc)
    airflow_compat.install()  # Airflow DAG files import `airflow...` (unless Apache Airflow is installed)
    dag_module.created.clear()
    dag_module.read_files.clear()
    try:
        with code_root(root):
            spec = importlib.util.spec_from_file_location(name, fileloc)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {fileloc}")
            source_code = Path(fileloc).read_text(encoding="utf-8", errors="replace")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            # other DAG files this process imported (ledger_dag_*) are not modules this file imports
            result.modules = {n: m for n, m in sys.modules.items() if m is not None and n != name
                              and not n.startswith(DAG_MODULE_PREFIX)
                              and any(_inside(p, root) for p in _module_paths(m))}
        imported = {f for m in result.modules.values() if (f := getattr(m, "__file__", None))}
        imported |= {os.path.abspath(f) for f in dag_module.read_files if _inside(os.path.abspath(f), root)}
        # the template files its templates include (a version keeps them with its code, as it keeps template files,
        # whatever their suffix)
        includes = {os.path.abspath(f) for value in [*vars(module).values(), *dag_module.created]
                    if isinstance(value, DAG) for f in included_files(value, fileloc)
                    if _inside(os.path.abspath(f), root)}
        result.code = capture_code(fileloc, root, imported | includes, kept=includes)
        _active = result  # code_root() forgot every other code root's modules
        seen: set[int] = set()
        # DAGs bound to module names, and DAGs made in a `with DAG(...):` block without a name
        for value in [*vars(module).values(), *dag_module.created]:
            if isinstance(value, DAG) and id(value) not in seen:
                seen.add(id(value))
                value.validate()
                problem = home_problem(value.schedule, root, DAG_MODULE_PREFIX)
                if problem is not None:
                    raise DagDefinitionError(f"DAG {value.dag_id!r}: {problem}")
                value.fileloc = fileloc
                value.source_code = source_code
                value.code = result.code
                result.dags.append(value)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # a file that raises KeyboardInterrupt is broken
        # (the processes that import DAG files ignore SIGINT: a real Ctrl-C does not arrive here)
        sys.modules.pop(name, None)
        _active = None
        result.dags = []
        result.modules = {}
        result.code = None
        result.error = _describe(exc, fileloc)
    finally:
        dag_module.created.clear()
        dag_module.read_files.clear()
    return result
