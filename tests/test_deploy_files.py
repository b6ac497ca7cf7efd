"""The deployment files refer only to what exists: the compose stack builds the repository's Dockerfile, every
service has a health check and waits for what it needs to be healthy, and the image installs with the script
tests/test_wheel.py runs (docs/install.md; no container engine runs here to build them)."""

from __future__ import annotations

import re

import yaml

from tests.conftest import REPO

COMPOSE = REPO / "examples" / "deploy" / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"


def test_the_compose_stack_builds_an_existing_dockerfile_and_every_service_waits_for_healthy_needs() -> None:
    stack = yaml.safe_load(COMPOSE.read_text())
    services = stack["services"]
    assert {"postgres", "redis", "scheduler", "webserver"} <= set(services)
    assert len([name for name in services if name.startswith("worker")]) == 2
    for name, service in services.items():
        if "build" in service:
            assert (COMPOSE.parent / service["build"] / "Dockerfile").resolve() == DOCKERFILE, name
        assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"
        needs = service.get("depends_on", {})
        assert isinstance(needs, dict), f"{name}: depends_on without conditions"
        for need, how in needs.items():
            assert need in services and how == {"condition": "service_healthy"}, (name, need, how)
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_the_dockerfile_copies_only_what_exists_and_installs_with_the_tested_script() -> None:
    text = DOCKERFILE.read_text()
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.MULTILINE):
        for source in sources.split():
            assert (REPO / source).exists(), source
    assert "COPY deploy/install.sh" in text and re.search(r"^RUN install-ledger ", text, re.MULTILINE)
    assert (REPO / "deploy" / "install.sh").stat().st_mode & 0o111
