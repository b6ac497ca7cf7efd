"""A version's code: what is captured, what the version hash covers, and that the stored snapshot, once
materialised, is exactly the code the version hash describes."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.infra.code import CodeFile, CodeManifest, helper_paths, python_digest
from ledger.scheduler.loop.code_cache import CodeCache, materialise
from ledger.scheduler.runtime.dagbag import load_file
from ledger.sdk.describe import version_of
from ledger.store import code as code_store
from ledger.store import dags as dag_store
from tests.conftest import copy_migrated, examples, sessions_on

DAG_FILE = """
import pendulum
from ledger import DAG, PythonTask
from common.values import VALUE
{extra_import}

def work():
    return VALUE


with DAG("coded", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    PythonTask("t", work)
"""


def write_folder(root: Path, value: int, comment: str, loose: bool) -> Path:
    (root / "common").mkdir(parents=True, exist_ok=True)
    (root / "common" / "__init__.py").write_text("")
    (root / "common" / "values.py").write_text(f"# {comment}\nVALUE = {value}\n")
    (root / "common" / "queries.sql").write_text(f"select {value}\n")
    (root / "common" / "unused.py").write_text("UNUSED = 1\n")
    (root / "loose.py").write_text("LOOSE = 1\n")
    (root / "untouched.py").write_text("NOBODY_IMPORTS_ME = 1\n")
    dag = root / "coded.py"
    dag.write_text(textwrap.dedent(DAG_FILE.format(extra_import="import loose" if loose else "")))
    return dag


def test_a_comment_changes_no_digest_and_code_does() -> None:
    assert python_digest("x = 1\n") == python_digest("# note\nx  =  1\n")
    assert python_digest("x = 1\n") != python_digest("x = 2\n")


def test_a_module_in_a_package_brings_the_whole_package_and_a_top_level_module_only_itself() -> None:
    candidates = {"common": ["common/__init__.py", "common/a.py", "common/b.sql"]}
    assert helper_paths(["common/a.py", "loose.py"], candidates) == {
        "common/__init__.py", "common/a.py", "common/b.sql", "loose.py"}


def test_the_loader_captures_what_the_file_imported_from_its_folder(tmp_path: Path) -> None:
    dag = write_folder(tmp_path, 1, "c", loose=True)
    loaded = load_file(str(dag), str(tmp_path))
    assert loaded.error is None and loaded.code is not None
    assert loaded.code.entry.relpath == "coded.py"
    assert [f.relpath for f in loaded.code.support] == [
        "common/__init__.py", "common/queries.sql", "common/unused.py", "common/values.py", "loose.py"]


def test_dags_importing_the_same_helpers_share_one_bundle() -> None:
    helpers = [CodeFile.of("common/a.py", b"A = 1\n")]
    one = CodeManifest.build(CodeFile.of("one.py", b"x = 1\n"), helpers)
    two = CodeManifest.build(CodeFile.of("two.py", b"x = 2\n"), helpers)
    assert one.bundle_hash == two.bundle_hash and one.snapshot != two.snapshot
    assert CodeManifest.build(CodeFile.of("one.py", b"x = 1\n"), []).bundle_hash is None


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]), st.booleans()), min_size=1,
                      max_size=4))
def test_every_stored_version_materialises_to_code_that_hashes_to_it(tmp_path_factory: Any, migrated_sqlite: Path,
                                                                     steps: list[tuple[int, str, bool]]) -> None:
    """Register a sequence of edits of a DAG folder (helper values, comments, an extra import); then every
    version's stored snapshot, materialised and imported, hashes to its version hash and holds the files the
    DAG ran with."""
    base = tmp_path_factory.mktemp("code")
    folder = base / "dags"
    engine, sessions = sessions_on(f"sqlite:///{copy_migrated(migrated_sqlite, base / 'ledger.db')}")
    registered: dict[str, tuple[int, bool]] = {}
    import pendulum
    now = pendulum.datetime(2024, 3, 1, tz="UTC")
    for value, comment, loose in steps:
        dag_file = write_folder(folder, value, comment, loose)
        loaded = load_file(str(dag_file), str(folder))
        assert loaded.error is None and loaded.code is not None
        (dag,) = loaded.dags
        version_hash, text = version_of(dag)
        contents = {f.sha256: (folder / f.relpath).read_bytes() for f in (loaded.code.entry, *loaded.code.support)}
        with sessions.begin() as session:
            code_store.add_blobs(session, contents)
            dag_store.register(session, dag_id="coded", fileloc=str(dag_file), version_hash=version_hash,
                               structure=text, schedule="None", timezone="UTC", now=now, actor="t",
                               code=loaded.code)
        registered.setdefault(version_hash, (value, loose))
    cache = CodeCache(base / "home" / "code")
    with sessions.begin() as session:
        versions = dag_store.versions(session, "coded")
        assert {v.version_hash for v in versions} == set(registered)
        for v in versions:
            where = cache.locate(session, "coded", v.version_hash)
            assert where is not None and where.captured
            again = load_file(where.fileloc, where.root)
            assert again.error is None, again.error
            assert version_of(again.dags[0])[0] == v.version_hash
            value, loose = registered[v.version_hash]
            assert again.dags[0].tasks["t"].python_callable() == value  # type: ignore[attr-defined]
            assert (Path(where.root) / "loose.py").exists() == loose
            assert not (Path(where.root) / "untouched.py").exists()
            snap = code_store.snapshot(session, v)
            assert snap is not None and materialise(base / "again", snap).name == v.code_snapshot
    engine.dispose()
