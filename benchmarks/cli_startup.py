"""How long a `ledger` command takes before it does anything, against the libraries it cannot avoid.

    python -m benchmarks.cli_startup --rounds 15

Each round runs, one after the other in a fresh interpreter: `python -c "import typer"`, `ledger --help`,
`ledger version`, `python -c "import sqlalchemy"` and `ledger runs show 1` (on a ledger with one run), and
takes each one's CPU time (user + system, from the child's rusage, so the machine's load moves it less than
wall time). Interleaving the five in every round spreads the load over all of them alike. One JSON line: the
median of each, and the ratios the targets are about (issue 39: `--help` and `version` within 2.5 times
`import typer`, `runs show` within 2.5 times `import sqlalchemy`).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import db_upgrade, ledger_command, ledger_env, load_average

DAG = '''
import pendulum
from ledger import DAG, BashTask

with DAG("d", schedule="@daily", start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False):
    BashTask("t", bash_command="true")
'''


def cpu_seconds(cmd: list[str], env: dict[str, str]) -> float:
    """The CPU time (user + system) of one run of `cmd`, a child of this process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=1, help="accepted for `python -m benchmarks`; rounds count")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds * max(1, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "dags").mkdir()
        (home / "dags" / "d.py").write_text(DAG)
        db_upgrade(home)
        env = ledger_env(home)
        ledger = ledger_command()
        subprocess.run([*ledger, "trigger", "d", "--logical-date", "2024-03-01"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        commands = {
            "import_typer": [sys.executable, "-c", "import typer"],
            "ledger_help": [*ledger, "--help"],
            "ledger_version": [*ledger, "version"],
            "import_sqlalchemy": [sys.executable, "-c", "import sqlalchemy"],
            "ledger_runs_show": [*ledger, "runs", "show", "1"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        load = [load_average()]
        for _ in range(rounds):
            for name, cmd in commands.items():
                times[name].append(cpu_seconds(cmd, env))
        load.append(load_average())
    medians = {name: round(statistics.median(values) * 1000, 1) for name, values in times.items()}
    result = {
        "benchmark": "cli_startup", "rounds": rounds, "load": [round(x, 2) for x in load],
        **{f"{name}_cpu_ms": value for name, value in medians.items()},
        "help_over_typer": round(medians["ledger_help"] / medians["import_typer"], 2),
        "version_over_typer": round(medians["ledger_version"] / medians["import_typer"], 2),
        "runs_show_over_sqlalchemy": round(medians["ledger_runs_show"] / medians["import_sqlalchemy"], 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
