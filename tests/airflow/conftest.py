"""Services the provider tests run against, started by the tests on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible server (moto's, from the test extra) on a private loopback port: its URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
