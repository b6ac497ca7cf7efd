"""README.md's "A short tour" runs as written: every command of its bash block, in order, with the real `ledger`
command, exits 0."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, _clean_env

SKIPPED = ("source ", "ledger webserver")  # the test's environment is the venv already; the server never ends


def tour_commands(readme: str) -> list[str]:
    """The commands of the bash block under "## A short tour", one per line, comments and continuation comments
    left out, the ones the test cannot run (SKIPPED) too."""
    section = readme.split("## A short tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None, "README.md's tour has no bash block"
    lines = [line.strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#") and not line.startswith(SKIPPED)]


def test_the_tour_s_commands_are_read_from_the_readme() -> None:
    commands = tour_commands((REPO / "README.md").read_text())
    assert commands[0].startswith("export LEDGER_HOME=") and commands[1].startswith("ledger db upgrade")
    assert not any(c.startswith(SKIPPED) for c in commands) and len(commands) > 10


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 20 s of CPU on a quiet machine
def test_the_readme_tour_runs_verbatim_top_to_bottom(tmp_path: Path) -> None:
    """Each command runs as written in one bash session, in a folder that holds the repository's examples/
    (the tour copies a DAG from there) and where `$PWD/.tour` is a fresh LEDGER_HOME; the first command that
    exits non-zero fails the test with its output."""
    (tmp_path / "examples").symlink_to(REPO / "examples")
    commands = tour_commands((REPO / "README.md").read_text())
    status = tmp_path / "status"
    script = ["exec < /dev/null"]  # no terminal: `ledger backfill` does not ask for confirmation
    for i, command in enumerate(commands):
        script += [f"echo '>>> step {i}' >&2", command,
                   f"rc=$?; echo {i} $rc >> {shlex.quote(str(status))}; [ $rc -eq 0 ] || exit $rc"]
    env = _clean_env(tmp_path / ".tour")
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"  # what `source` would do
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=840)
    ran = [line.split() for line in status.read_text().splitlines()] if status.exists() else []
    failed = [(commands[int(i)], rc) for i, rc in ran if rc != "0"]
    assert not failed and len(ran) == len(commands), (
        f"tour step failed: {failed or 'a step did not report'}\n--- stdout (tail)\n{done.stdout[-3000:]}\n"
        f"--- stderr (tail)\n{done.stderr[-3000:]}")
    assert (tmp_path / ".tour" / "ledger.db").exists()  # the tour's own LEDGER_HOME, not the repository's
