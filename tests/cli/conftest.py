"""The launcher's own tests run both ways in the one suite run: as every scenario runs (commands forked from a warm
interpreter, tests/launcher.py) and under LEDGER_TEST_CLI=subprocess (every command the console script in a
process started afresh), so that what the warm path saves is checked against the path users take, on the same
xdist workers as the rest of the suite (decision 0343)."""

from __future__ import annotations

import pytest

BOTH_WAYS = ("tests/cli/test_launcher.py", "tests/cli/test_cli_harness.py")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.nodeid.startswith(BOTH_WAYS):
        metafunc.fixturenames.append("cli_mode")
        metafunc.parametrize("cli_mode", ["warm", "subprocess"])


@pytest.fixture(autouse=True)
def _cli_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test given cli_mode "subprocess" runs every command as the console script in a new process; "warm": as
    the environment says (forked from a warm interpreter unless LEDGER_TEST_CLI says otherwise)."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("cli_mode") == "subprocess":
        monkeypatch.setenv("LEDGER_TEST_CLI", "subprocess")
