"""The throwaway PostgreSQL server used by the suite (tests/pgserver.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, make_url, text

from tests.pgserver import PostgresServer, postgres_available

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parent.parent
_seen_urls: list[str] = []


def _user_tables(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return inspect(conn).get_table_names()
    finally:
        engine.dispose()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket in LISTEN state on ``port`` (Linux /proc/net)."""
    found: set[str] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            if name == "tcp":
                found.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(addr_hex)[::-1]))
            else:
                raw = b"".join(bytes.fromhex(addr_hex[i : i + 8])[::-1] for i in range(0, 32, 8))
                found.add(socket.inet_ntop(socket.AF_INET6, raw))
    return found


def _non_loopback_ipv4() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1; UDP connect sends nothing
            addr = str(s.getsockname()[0])
    except OSError:
        return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_available_here() -> None:
    assert postgres_available() is None


def test_database_works(postgres_url: str) -> None:
    url = make_url(postgres_url)
    assert url.drivername == "postgresql+psycopg"
    assert url.host == "127.0.0.1"
    assert url.database is not None and url.database.startswith("t_")
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE run (id serial PRIMARY KEY, note text NOT NULL)"))
            conn.execute(text("INSERT INTO run (note) VALUES (:a), (:b)"), [{"a": "x", "b": "é"}])
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, note FROM run ORDER BY id")).all()
            assert [tuple(r) for r in rows] == [(1, "x"), (2, "é")]
            assert conn.execute(text("SHOW server_encoding")).scalar() == "UTF8"
            assert conn.execute(text("SELECT current_user")).scalar() == "ledger"
            version = int(str(conn.execute(text("SHOW server_version_num")).scalar()))
            assert version >= 130000  # DROP DATABASE ... WITH (FORCE)
    finally:
        engine.dispose()


@pytest.mark.parametrize("nth", [1, 2])
def test_each_test_gets_a_fresh_empty_database(nth: int, postgres_url: str) -> None:
    assert _user_tables(postgres_url) == []
    assert postgres_url not in _seen_urls
    _seen_urls.append(postgres_url)
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE leftover (n int)"))
    finally:
        engine.dispose()


def test_created_databases_are_separate(postgres_server: PostgresServer, postgres_url: str) -> None:
    other = postgres_server.create_database("t_other_" + os.urandom(6).hex())
    try:
        assert make_url(other).database != make_url(postgres_url).database
        engine = create_engine(postgres_url)
        try:
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE only_here (n int)"))
        finally:
            engine.dispose()
        assert _user_tables(postgres_url) == ["only_here"]
        assert _user_tables(other) == []
    finally:
        postgres_server.drop_database(make_url(other).database or "")


def test_enough_connections(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW max_connections")).scalar() == "200"
            assert conn.execute(text("SHOW fsync")).scalar() == "off"
    finally:
        engine.dispose()


def test_listens_only_on_loopback(postgres_server: PostgresServer) -> None:
    port = postgres_server.port
    assert port is not None
    with postgres_server.connect() as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
    if Path("/proc/net/tcp").exists():
        assert _listening_addresses(port) == {"127.0.0.1"}
    other = _non_loopback_ipv4()
    if other is not None:
        with pytest.raises(OSError), socket.create_connection((other, port), timeout=2):
            pass


def test_stop_removes_everything() -> None:
    server = PostgresServer().start()
    basedir, port, proc = server.basedir, server.port, server.proc
    assert basedir is not None and port is not None and proc is not None
    with server.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    server.stop()
    server.stop()  # idempotent
    assert proc.poll() is not None
    assert not Path(basedir).exists()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        pass


@pytest.mark.parametrize(("ci", "outcome"), [("true", "errors"), ("", "skipped")])
def test_unavailable_fails_under_ci_and_skips_otherwise(tmp_path: Path, ci: str, outcome: str) -> None:
    (tmp_path / "test_probe.py").write_text(
        textwrap.dedent(
            """
            import tests.pgserver as pgserver
            from tests.pgserver import postgres_server  # noqa: F401

            pgserver.postgres_available = lambda: "no binaries in this probe"

            def test_needs_postgres(postgres_server):
                pass
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(CI=ci, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--noconftest",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert "no binaries in this probe" in proc.stdout, proc.stdout + proc.stderr
    if outcome == "errors":
        assert proc.returncode != 0 and "1 error" in proc.stdout, proc.stdout
    else:
        assert proc.returncode == 0 and "1 skipped" in proc.stdout, proc.stdout
