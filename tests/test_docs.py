"""The docs show the real commands: the CLI reference must match every command's --help."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_cli_reference_covers_every_command_and_is_up_to_date() -> None:
    result = subprocess.run([sys.executable, "docs/generate_cli_reference.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr + result.stdout


def test_the_readme_gives_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
