"""A worker fetches a version's code from the webserver (decision 0113). A reply the webserver's restart cuts short is
the fleet's fault: asked again within the fetch patience, as a refused connection is, not a raised task (which
ended the try lost, and late). A real HTTP exchange on loopback, the server's replies chosen by the test."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.scheduler.executors.celery_app import CeleryConfig
from ledger.scheduler.executors.fleet_faults import FaultNotes
from ledger.scheduler.runtime import celery_worker
from ledger.scheduler.runtime.celery_worker import CodeFetchError, WorkerSettings, fetch_code, fetch_code_patiently

SOURCE = b"print('the DAG file')\n"
WHOLE = json.dumps({"files": {"d.py": base64.b64encode(SOURCE).decode()},
                    "sha256": {"d.py": hashlib.sha256(SOURCE).hexdigest()},
                    "key": "k1", "entry": "d.py", "captured": False}).encode()


@pytest.fixture
def webserver() -> Iterator[tuple[str, list[bytes]]]:
    """A server on loopback that answers each request with the next of its replies (the list the test fills): a
    whole JSON reply, or one whose body stops short of its Content-Length before the connection closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    replies: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                body = replies.pop(0) if replies else WHOLE
                if body.startswith(b"HTTP/"):  # a whole reply of the test's
                    conn.sendall(body)
                    continue
                length = len(WHOLE) if body != WHOLE else len(body)  # (short: less than it says)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(length).encode() + b"\r\nConnection: close\r\n\r\n" + body)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", replies
    finally:
        listener.close()


def settings(home: Path, url: str, patience: float) -> WorkerSettings:
    return WorkerSettings(name="w1", queues=("default",), concurrency=1, home=home, api_url=url, token=None,
                          celery=CeleryConfig("redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0"),
                          fetch_patience=patience)


@pytest.fixture(autouse=True)
def said(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the pool process says of its faults (its notes, made here as a pool process makes them)."""
    lines: list[str] = []
    monkeypatch.setattr(celery_worker, "_pool_faults", FaultNotes("worker", lines.append, None))
    return lines


def test_a_reply_cut_short_is_the_fleets_fault(tmp_path: Path, webserver: tuple[str, list[bytes]]) -> None:
    url, replies = webserver
    replies.append(WHOLE[:20])
    with pytest.raises(CodeFetchError) as raised:
        fetch_code(settings(tmp_path, url, 0.0), "d", "v1")
    assert raised.value.transient and "cannot fetch the code of d version v1" in str(raised.value)


def test_a_reply_cut_short_is_asked_again_within_the_patience(tmp_path: Path, webserver: tuple[str, list[bytes]],
                                                              said: list[str]) -> None:
    url, replies = webserver
    replies.append(WHOLE[:20])  # (then whole)
    root, fileloc, captured = fetch_code_patiently(settings(tmp_path, url, 30.0), "d", "v1")
    assert Path(fileloc).read_bytes() == SOURCE and Path(fileloc).parent == Path(root) and not captured
    assert replies == []
    assert [line.split(": ")[0] for line in said] == ["ledger worker w1", "ledger worker w1"]  # asked again; works
    assert "asking again with back-off" in said[0] and "gives code again" in said[1]


def test_a_refusal_is_not_asked_again_and_is_the_fleets_fault_too(tmp_path: Path, webserver: tuple[str, list[bytes]],
                                                                  said: list[str]) -> None:
    url, replies = webserver
    refusal = b'{"message": "a worker\'s token is needed"}'
    replies.append(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: "
                   + str(len(refusal)).encode() + b"\r\nConnection: close\r\n\r\n" + refusal)
    with pytest.raises(CodeFetchError) as raised:
        fetch_code_patiently(settings(tmp_path, url, 30.0), "d", "v1")
    assert not raised.value.transient and "HTTP 401" in str(raised.value) and "token is needed" in str(raised.value)
    assert said == []  # not asked again: the same answer would come
