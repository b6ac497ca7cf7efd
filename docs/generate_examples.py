"""Writes the command outputs shown in the docs from real runs of the real `ledger` command.

    python docs/generate_examples.py [DOC ...]          # run the scenarios, rewrite the generated blocks
    python docs/generate_examples.py --check [DOC ...]  # exit 1 when a generated block is out of date (tests)

DOC is `backfill`, `tutorial`, `operations`, `authoring`, `scheduler`, `from-airflow`, `web` (docs/DOC.md),
`signals`, `spark`, `datasets`, or `web-screenshots` (docs/web/*.png, taken by headless Chromium); default: all of them
(with --check: all but signals and web-screenshots).

Each block between `<!-- generated: NAME -->` and `<!-- end generated -->` is written by a run:
- docs/backfill.md: the output of the commands that SCENARIO lists under NAME, run in order on a fresh
  LEDGER_HOME with the example DAG examples/dags/daily_sales.py (COLUMNS=110);
- docs/tutorial.md: `make demo`'s output (examples/demo.py, with Spark), one block per command, NAME being
  the command (`ledger timeline sales_pipeline --all`); the demo runs in /tmp/ledger-docs-demo (with
  LEDGER_DOCS_KEEP_DEMO=DIR its LEDGER_HOME is moved to DIR afterwards, for tests/test_docs.py to look at);
- docs/operations.md, authoring.md, scheduler.md, from-airflow.md, web.md: likewise (run_scenario), the
  steps OPERATIONS, AUTHORING, ... list under NAME, on example DAGs of examples/dags (authoring.md: the DAG
  of its scenario test); web.md's on a `ledger webserver` asked by curl;
- docs/spark.md and signals.md: a session each, in run_spark and run_signals.
Values that change from one run to the next (the wall-clock time of a change, elapsed times, the user and
host name, process and session ids, ports, event ids, the demo's home) are masked before comparing, so
--check fails only when what the commands print has really changed.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LEDGER = str(Path(sys.executable).with_name("ledger"))

# a step of a scenario: a command line (see run_step), or a function of $LEDGER_HOME and the commands'
# environment that returns what it shows (None: nothing)
Step = str | Callable[[Path, dict[str, str]], str | None]


def add_notify_task(home: Path, _env: dict[str, str]) -> None:
    """A new version of daily_sales: one more task."""
    path = home / "dags" / "daily_sales.py"
    path.write_text(path.read_text() + '    load >> BashTask("notify", "echo done")\n')


# (block name, commands whose output it shows); commands with a leading "#" run but are not shown
SCENARIO: list[tuple[str, list[Step]]] = [
    ("setup", ["# db upgrade", "# dags list", "# scheduler --exit-when-idle"]),
    ("plan", ["backfill daily_sales --start 2024-03-02 --end 2024-03-04 --dry-run"]),
    ("plan-json", ["backfill daily_sales --start 2024-03-02 --end 2024-03-02 --dry-run --json"]),
    ("rerun", ["backfill daily_sales --start 2024-03-03 --end 2024-03-04 --reprocess completed --yes"]),
    ("new-version", [add_notify_task,
                     "# backfill daily_sales --start 2024-03-04 --end 2024-03-04 --reprocess completed --yes"]),
    ("timeline", ["timeline daily_sales --all --start 2024-03-02 --end 2024-03-05"]),
    ("events", ["events --dag daily_sales --kind backfill_created --kind run_overridden --json"]),
    ("list", ["backfill list"]),
    ("refusals", ["backfill daily_sales --start 2024-03-08 --end 2024-03-10",
                  "backfill daily_sales --start 2024-03-03 --end 2024-03-01"]),
]

VOLATILE = [
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),  # free ports
    (re.compile(r"20(2[5-9]|[3-9]\d)-\d\d-\d\d"), "<today>"),  # a table may wrap the time onto its own line
    (re.compile(r"\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"(elapsed|remaining) \d\d:\d\d:\d\d"), r"\1 <t>"),
    (re.compile(r"@[\w.-]+"), "@<host>"),
    (re.compile(r"\S*/\.venv/bin/ledger"), ".venv/bin/ledger"),  # where the virtualenv is
    (re.compile(r"^I\d{4} .*fork_posix.*\n", re.M), ""),  # gRPC's note when a Spark Connect client forks
    (re.compile(r"^.* waiting: .*\n", re.M), ""),  # whether a run had to wait for another depends on timing
    (re.compile(r"(│ \d+ +│ \w+ +│ [0-9a-f]{12} +│ )[^│]+│"), r"\1<host> │"),  # the host of a try
    (re.compile(r"\d+\.\d+ s\b"), "<n> s"),
    (re.compile(r"\d+(\.\d+)?s\b"), "<n>s"),
    (re.compile(r"pid \d+"), "pid <n>"),
    (re.compile(r"session [0-9a-f-]{36}"), "session <id>"),
    (re.compile(r'^( *"id": )\d+', re.M), r"\1<n>"),  # callback processes may record their events first
    (re.compile(r"\bcli:[\w.-]+@"), "cli:<user>@"),  # who ran a command
    (re.compile(r"(--(metrics-)?port) \d+"), r"\1 <port>"),
    (re.compile(r"^date: .*$", re.M), "date: <date>"),  # HTTP headers
    (re.compile(r"^content-length: \d+$", re.M), "content-length: <n>"),  # a time may end in 0 microseconds
    (re.compile(r"^(ledger_\w+_seconds_sum|ledger_loop_duration_seconds_count|ledger_dag_file_parse_seconds\S*) \S+$",
                re.M), r"\1 <n>"),  # durations, and how many loops a scheduler made
    (re.compile(r"[─━]+"), "─"),  # table widths follow the masked values
    (re.compile(r" +"), " "),
]


def mask(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def ledger_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a scenario's commands: no LEDGER_* setting of the caller's, this repository's code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_HOME=str(home), COLUMNS="110", NO_COLOR="1", LEDGER_POLL_INTERVAL="0.2", PYTHONPATH=str(REPO),
               PATH=os.pathsep.join([str(Path(LEDGER).parent), env.get("PATH", "/usr/bin:/bin")]))
    env.update(extra)
    return env


def run_step(home: Path, env: dict[str, str], step: Step) -> str | None:
    """Carry out one step of a scenario in `home`; return what it shows (None: a step that is not shown).

    A step is a `ledger` command line (its words as in a shell: `--reason 'two words'`); with a leading "# " it
    runs but is not shown; "VAR=value" words before it set them in its environment. "@cat GLOB" shows a file
    under $LEDGER_HOME, "@sh COMMAND" runs a shell command (curl, ...) in $LEDGER_HOME. A function changes
    $LEDGER_HOME (a new version of a DAG file) or starts something (a server) and returns what it shows."""
    if callable(step):
        return step(home, env)
    hidden = step.startswith("# ")
    step = step.removeprefix("# ")
    if step.startswith("@sh "):
        shell = step.removeprefix("@sh ")
        done = subprocess.run(["sh", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=env, cwd=home, timeout=300)  # one stream, in the order a terminal shows it
        shown = f"$ {shell}"
    else:
        words = shlex.split(step)
        extra = dict(w.split("=", 1) for w in words if re.match(r"[A-Z_]+=", w))
        words = [w for w in words if w.split("=", 1)[0] not in extra]
        if words[0] == "@cat":
            found = sorted(home.glob(words[1]))
            output = found[0].read_text() if found else f"cat: {words[1]}: No such file"
            return None if hidden else f"$ cat $LEDGER_HOME/{words[1]}\n{output.rstrip()}"
        done = run_ledger(words, env={**env, **extra}, cwd=home)
        shown = "$ " + " ".join([*(f"{k}={v}" for k, v in extra.items()), "ledger", shlex.join(words)])
    if hidden:
        return None
    output = (done.stdout + (done.stderr or "")).rstrip().replace(str(home), "$LEDGER_HOME")
    return "\n".join([shown, *(line.rstrip() for line in output.splitlines())])


def run_ledger(words: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`ledger WORDS`, its output captured, forked from the warm interpreter of tests/launcher.py (decision 0328:
    the console script run as such, in the command's own process) when its environment differs from the first
    command's in LEDGER_* variables alone, else the console script in a subprocess: most of a scenario's commands
    would otherwise spend a second each starting an interpreter and importing the CLI."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests import launcher

    return launcher.run([LEDGER, *words], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)


def example(name: str) -> str:
    """The source of examples/dags/NAME."""
    return (REPO / "examples" / "dags" / name).read_text()


def run_scenario(dags: dict[str, str], steps: list[tuple[str, list[Step]]], *, between: str = "\n\n",
                 **env: str) -> dict[str, str]:
    """Run `steps` (block name, its steps) on a fresh LEDGER_HOME whose DAGs folder holds `dags` (file name:
    its source); one ```text block per name that shows something."""
    home = Path(tempfile.mkdtemp(prefix="ledger-docs-"))
    try:
        (home / "dags").mkdir()
        for name, source in dags.items():
            (home / "dags" / name).write_text(source)
        environment = ledger_env(home, **env)
        blocks: dict[str, str] = {}
        for name, block_steps in steps:
            shown = [text for step in block_steps if (text := run_step(home, environment, step)) is not None]
            if shown:
                blocks[name] = "```text\n" + between.join(shown) + "\n```"
        return blocks
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run_backfill_scenario() -> dict[str, str]:
    return run_scenario({"daily_sales.py": example("daily_sales.py")}, SCENARIO, between="\n")


DEMO_HOME = Path("/tmp/ledger-docs-demo/.demo-home")


def run_demo() -> dict[str, str]:
    """`make demo`, split into one block per command (the first also shows the LEDGER_HOME line)."""
    home = DEMO_HOME  # one path wherever it runs: a longer one would wrap the tables differently
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env.update(LEDGER_DEMO_HOME=str(home), NO_COLOR="1", PYTHONPATH=str(REPO), COLUMNS="150")  # make demo's width
    keep = os.environ.get("LEDGER_DOCS_KEEP_DEMO")  # tests/test_docs.py then checks the demo's data and records
    try:
        done = subprocess.run([sys.executable, str(REPO / "examples" / "demo.py")], capture_output=True, text=True,
                              env=env, cwd=REPO, timeout=900)
        if keep and home.exists():
            shutil.move(home, keep)
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"examples/demo.py failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    preamble, *steps = done.stdout.split("\n$ ledger ")
    blocks: dict[str, str] = {}
    for step in steps:
        command, _, output = step.partition("\n")
        text = f"$ ledger {command}\n" + "\n".join(line.rstrip() for line in output.rstrip().splitlines())
        if not blocks:
            text = preamble.strip() + "\n\n" + text
        blocks[f"ledger {command}"] = "```\n" + text + "\n```"
    return blocks


def dag_source(source: str, shown_as: str) -> str:
    """A ```python block of a DAG file (the docstring of an example file left out), named as the guide puts it."""
    code = source.split('"""', 2)[2] if source.lstrip().startswith('"""') else source
    return f"```python\n# {shown_as}\n{code.strip()}\n```"


# docs/operations.md: (block name, steps), on examples/dags/orders_alerts.py. The scheduler's own log is not
# shown: its callback lines come when each callback process ends, interleaved with the task lines by timing;
# `ledger events` and `ledger callbacks` show the same, in the order things were requested.
OPERATIONS: list[tuple[str, list[Step]]] = [
    ("ops-show", ["# db upgrade", "dags show orders"]),
    ("ops-run", ["trigger orders --logical-date 2024-03-01",
                 "# LEDGER_SMTP_PORT=9 scheduler --exit-when-idle",
                 "events --run 1 --kind run_state_changed --kind deadline_missed --json",
                 "callbacks --run 1"]),
    ("ops-callback-log", ["@cat logs/orders/run_1/callbacks/*_deadline_missed.log"]),
    ("ops-controls", ["tasks mark orders 1 load --state success --reason 'loaded by hand, ticket OPS-12'",
                      "runs cancel 1",
                      "trigger orders --logical-date 2024-03-02",
                      "runs cancel 2 --reason 'upstream data not delivered'",
                      "trigger orders --logical-date 2024-03-01 --replace",
                      "runs mark-failed 1",
                      "events --dag orders --kind tasks_marked --kind run_cancelled --kind run_overridden --json"]),
    ("ops-dags-test", ["dags test orders --logical-date 2024-03-05"]),
]


def run_operations() -> dict[str, str]:
    """docs/operations.md: examples/dags/orders_alerts.py (the DAG the guide shows) run by the real commands on a
    fresh LEDGER_HOME; no SMTP server or webhook listens (port 9), so the notifiers' errors are recorded."""
    source = example("orders_alerts.py")
    return {"ops-dag": dag_source(source, "$LEDGER_HOME/dags/orders.py"),
            **run_scenario({"orders.py": source}, OPERATIONS, COLUMNS="150"), **run_metrics()}


def run_metrics() -> dict[str, str]:
    """docs/operations.md's metrics: a scheduler with --metrics-port over the DAG tests/operations/test_metrics.py
    runs (its second task fails after one retry, for three dates), scraped by curl once its tries have ended."""
    sys.path.insert(0, str(REPO))
    from tests.operations.test_metrics import METRICS_DAG

    def settled(text: str) -> bool:
        return all(line in text.splitlines() for line in (
            'ledger_task_instances_finished_total{state="failed"} 3.0', "ledger_running_tries 0.0",
            "ledger_queue_depth 0.0"))

    scheduler = Background("scheduler", "--metrics-port", "{port}", path="/metrics", ready=settled, first_line=False)
    try:
        return run_scenario({"m.py": METRICS_DAG}, [("ops-metrics", [
            "# db upgrade", scheduler.start,
            f"@sh curl -s {scheduler.url}/metrics | grep '^ledger_' | grep -Ev '_bucket|_created[{{ ]'",
            scheduler.stop])], between="\n")
    finally:
        scheduler.stop()


# docs/authoring.md, on the DAG tests/authoring/test_values_templates_params.py checks (FLOW_DAG). The scheduler's
# log is not shown (which run's line comes first depends on timing); the timeline and the tries' records show
# what it did.
AUTHORING: list[tuple[str, list[Step]]] = [
    ("authoring-secrets", ["# db upgrade",
                           "variables set api_token tok-SECRET-123 --description 'token of the orders API'",
                           "connections add warehouse --uri 'postgresql://etl:pa%40ss-SECRET@db.internal:5432/dw'",
                           "connections list"]),
    ("authoring-run", ["trigger flow --logical-date 2024-03-02 --conf '{\"days\": \"seven\"}'",
                       "trigger flow --logical-date 2024-03-01",
                       "trigger flow --logical-date 2024-03-02 --conf '{\"mode\": \"delta\"}'",
                       "# scheduler --exit-when-idle",
                       "timeline flow",
                       "tasks xcom flow 2 extract",
                       "tasks xcom flow 2 load",
                       "tasks rendered flow 2 report",
                       "@sh ledger tasks logs flow 2 too_big | cut -c -300"]),
]


# docs/authoring.md's mapping section, on the DAG tests/authoring/test_mapping.py runs (FAN_DAG): one instance of
# `load` fails once and is retried on its own. COLUMNS=200: the table's times are whole, then masked.
MAPPING: list[tuple[str, list[Step]]] = [
    ("authoring-mapping-run", ["# db upgrade",
                               "trigger fan --logical-date 2024-03-01",
                               "# scheduler --exit-when-idle",
                               "COLUMNS=200 runs show 1",
                               "tasks xcom fan 1 report",
                               "tasks rendered fan 1 echo --map-index 1",
                               "tasks logs fan 1 load"]),
]


# docs/authoring.md's timetables and mapping extras sections, on Airflow DAG files of tests/airflow_corpus (loaded
# unchanged; tests/airflow runs them too).
CORPUS = REPO / "tests" / "airflow_corpus"
TIMETABLES: list[tuple[str, list[Step]]] = [
    ("authoring-timetable-run", ["# db upgrade",
                                 "dags next-runs af2_timetable_cron_trigger -n 5",
                                 "# scheduler --exit-when-idle",
                                 "timeline af2_timetable_cron_trigger"]),
]
MAPPING_EXTRAS: list[tuple[str, list[Step]]] = [
    ("authoring-mapping-extras-run", ["dags test af3_mapping_extras --logical-date 2024-03-05"]),
]


def run_authoring() -> dict[str, str]:
    """docs/authoring.md: variables and connections (under a Fernet key made for the run), then the values,
    templates and params of the DAG the authoring scenario test runs (tests/authoring)."""
    from cryptography.fernet import Fernet

    sys.path.insert(0, str(REPO))
    from tests.authoring.test_mapping import FAN_DAG
    from tests.authoring.test_values_templates_params import FLOW_DAG

    key = Fernet.generate_key().decode()
    return {"authoring-dag": dag_source(FLOW_DAG, "$LEDGER_HOME/dags/flow.py"),
            **run_scenario({"flow.py": FLOW_DAG}, AUTHORING, LEDGER_FERNET_KEY=key),
            "authoring-mapping-dag": dag_source(FAN_DAG, "$LEDGER_HOME/dags/fan.py"),
            **run_scenario({"fan.py": FAN_DAG}, MAPPING),
            **corpus_scenario("af2_timetable_cron_trigger.py", "authoring-timetable-dag", TIMETABLES),
            **corpus_scenario("af3_mapping_extras.py", "authoring-mapping-extras-dag", MAPPING_EXTRAS)}


def corpus_scenario(name: str, block: str, steps: list[tuple[str, list[Step]]]) -> dict[str, str]:
    """A DAG file of tests/airflow_corpus (its source as block `block`) and `steps` run on it."""
    source = (CORPUS / name).read_text()
    return {block: dag_source(source, f"$LEDGER_HOME/dags/{name}"), **run_scenario({name: source}, steps)}


def run_scheduler_log() -> dict[str, str]:
    """docs/scheduler.md: the log of a scheduler catching up the example daily_sales (whose depends_on_past makes
    the runs end in order, so the log's lines come in the same order on every run)."""
    return run_scenario({"daily_sales.py": example("daily_sales.py")},
                        [("scheduler-log", ["# db upgrade", "scheduler --exit-when-idle"])])


def run_from_airflow() -> dict[str, str]:
    """docs/from-airflow.md: the table of Airflow's modules (from ledger/airflow_compat), and the Airflow example
    (examples/airflow/orders_daily.py, unchanged) in the local test loop."""
    from ledger.airflow_compat import import_table

    table = "| Airflow module | in ledger |\n|---|---|\n" + "\n".join(
        f"| `{module}` | {status} |" for module, status in import_table())
    airflow_dag = (REPO / "examples" / "airflow" / "orders_daily.py").read_text()
    return {"airflow-imports": table,
            **run_scenario({"orders_daily.py": airflow_dag},
                           [("airflow-dags-test", ["dags test orders_daily --logical-date 2024-03-05T06:00"])])}


DATASETS: list[tuple[str, list[Step]]] = [
    ("datasets-setup", ["# db upgrade", "# scheduler --exit-when-idle"]),
    ("datasets-timeline", ["timeline report"]),
    ("datasets-list", ["datasets list"]),
    ("datasets-rewrite", ["# backfill ingest --start 2024-03-02 --end 2024-03-02 --reprocess completed --yes",
                          "lineage --stale", "timeline clean"]),
    ("datasets-matrix", ["datasets show sales_raw --limit 4"]),
    ("datasets-plan", ["backfill ingest --start 2024-03-02 --end 2024-03-03 --reprocess completed --downstream "
                       "--dry-run"]),
    ("datasets-downstream", ["# backfill ingest --start 2024-03-02 --end 2024-03-02 --reprocess completed "
                             "--downstream --yes", "# scheduler --exit-when-idle", "timeline report --all",
                             "lineage --stale"]),
    ("datasets-why", ["@sh ledger events --dag report --kind dataset_rerun --json | jq '.[0].details.cause'"]),
    ("datasets-inlets", ["@sh RUN=$(ledger timeline report --json | jq -r '.[] | select(.state == \"success\") "
                         "| select(.logical_date | startswith(\"2024-03-02\")) | .run_id'); "
                         "ledger runs show $RUN --json | jq '.inlets_read'; ledger tasks logs report $RUN report "
                         "| grep reading"]),
    ("datasets-clear", ["@sh ledger tasks clear clean $(ledger timeline clean --json | jq -r '.[] "
                        "| select(.state == \"success\") | select(.logical_date | startswith(\"2024-03-03\")) "
                        "| .run_id')", "# scheduler --exit-when-idle", "lineage --stale"]),
    ("datasets-current", ["@sh ledger tasks clear report $(ledger timeline report --json | jq -r '.[] "
                          "| select(.state == \"success\") | select(.logical_date | startswith(\"2024-03-03\")) "
                          "| .run_id')", "# scheduler --exit-when-idle", "lineage --stale",
                          "datasets show sales_clean --limit 2"]),
    ("datasets-lineage", ["lineage sales_clean --partition 2024-03-03"]),
    ("datasets-manual", ["trigger report --logical-date 2024-03-01 --replace", "# scheduler --exit-when-idle",
                         "@sh ledger timeline report --json | jq -r '.[] | select(.run_type == \"manual\") "
                         "| .run_id' | xargs ledger runs show --json | jq '.consumed[] | {dataset, partition, "
                         "event_id, cause}'"]),
]


def run_datasets() -> dict[str, str]:
    """docs/datasets.md: the chain of examples/dags/sales_chain.py caught up, a partition rewritten upstream, the
    stale runs, a --downstream backfill and why its re-runs happened."""
    return run_scenario({"sales_chain.py": example("sales_chain.py")}, DATASETS)


def run_signals() -> dict[str, str]:
    """The signals guide's session: a scheduler in the background, a stream started and stopped by signals.
    Its numbers (batches, signal ids) depend on timing, so it is generated on request, not checked."""
    import json as _json
    import time as _time

    home = Path(tempfile.mkdtemp(prefix="ledger-signals-")) / "home"
    try:
        (home / "dags").mkdir(parents=True)
        shutil.copy(REPO / "examples" / "dags" / "clickstream.py", home / "dags" / "clickstream.py")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(LEDGER_HOME=str(home), COLUMNS="130", NO_COLOR="1", PYTHONPATH=str(REPO),
                   LEDGER_PARALLELISM="2")
        shown: list[str] = []

        def ledger(command: str, *, show: str | None = None, pipe: str | None = None) -> str:
            argv = [LEDGER, *command.split()]
            done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=home, timeout=120)
            output = done.stdout + done.stderr
            if pipe is not None:
                output = subprocess.run(["sh", "-c", pipe], input=done.stdout, capture_output=True, text=True).stdout
            shown.append(f"$ ledger {show or command}\n" + "\n".join(x.rstrip() for x in output.rstrip().splitlines()))
            return done.stdout

        def wait_for(check: Callable[[], bool], seconds: float = 60) -> None:
            until = _time.monotonic() + seconds
            while not check():
                if _time.monotonic() > until:
                    raise SystemExit("the signals session did not get where it should")
                _time.sleep(0.3)

        def quiet_json(command: str) -> Any:
            done = subprocess.run([LEDGER, *command.split(), "--json"], capture_output=True, text=True, env=env,
                                  cwd=home, timeout=120)
            return _json.loads(done.stdout or "[]")

        ledger("db upgrade")
        ledger("dags show clickstream")
        log = open(home / "scheduler.log", "w")  # noqa: SIM115 - closed below
        scheduler = subprocess.Popen([LEDGER, "scheduler"], env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT)
        shown.append("$ ledger scheduler &      # in another terminal")
        try:
            _time.sleep(3)
            ledger("signal send clickstream.control start")
            wait_for(lambda: len(quiet_json("signal list clickstream.batch")) >= 4)
            ledger("signal list clickstream.batch")
            ledger("signal send clickstream.control stop")
            wait_for(lambda: [r["state"] for r in quiet_json("timeline clickstream")] == ["success"])
            ledger("timeline clickstream")
            ledger("runs show 1")
            jq = "jq -c '.[].details | {signal_id, key, version, task_id, action, outcome}'"
            ledger("events --dag clickstream --kind signal_action --json",
                   show=f"events --dag clickstream --kind signal_action --json | {jq}", pipe=jq)
            ledger("signal list ledger.task.clickstream.stream")
        finally:
            scheduler.terminate()
            scheduler.wait(timeout=60)
            log.close()
        scheduler_log = (home / "scheduler.log").read_text().rstrip()
        text = "\n\n".join(shown) + "\n\n# the scheduler's log:\n" + scheduler_log
        return {"signals-session": "```\n" + text.replace(str(home), "/tmp/sigdemo/home") + "\n```"}
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def run_spark() -> dict[str, str]:
    """The Spark guide's session: the example pipeline on a throwaway PostgreSQL server, its Spark work going
    through a Spark Connect server on loopback. Needs PostgreSQL's server binaries and Java; generated on
    request (ports and timings differ from run to run)."""
    import signal as _signal
    import socket
    import time as _time

    import pyspark

    sys.path.insert(0, str(REPO))
    from tests.pgserver import PostgresServer

    base = Path(tempfile.mkdtemp(prefix="ledger-spark-"))
    home = base / "home"
    (home / "dags").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "dags" / "sales_pipeline.py", home / "dags" / "sales_pipeline.py")
    server = PostgresServer().start()
    connect = None
    try:
        url = server.create_database("ledger")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        spark_home = Path(pyspark.__path__[0])
        logs = base / "connect-server"
        logs.mkdir()
        spark_env = {**os.environ, "SPARK_HOME": str(spark_home), "SPARK_LOG_DIR": str(logs),
                     "SPARK_PID_DIR": str(logs), "SPARK_LOCAL_IP": "127.0.0.1"}
        with open(logs / "server.log", "wb") as out:
            connect = subprocess.Popen(
                ["bash", str(spark_home / "sbin" / "start-connect-server.sh"), "--wait", "--master", "local[2]",
                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                 "--conf", f"spark.connect.grpc.binding.port={port}", "--conf", "spark.ui.enabled=false",
                 "--conf", "spark.sql.shuffle.partitions=4",
                 "--conf", "spark.sql.sources.partitionOverwriteMode=dynamic", "--conf", "spark.driver.memory=1g"],
                env=spark_env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        until = _time.monotonic() + 180
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if _time.monotonic() > until or connect.poll() is not None:
                    raise SystemExit("the Spark Connect server did not start") from None
                _time.sleep(0.5)
        remote = f"sc://127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
        env.update(LEDGER_HOME=str(home), LEDGER_DATABASE_URL=url, LEDGER_SPARK_REMOTE=remote, COLUMNS="130",
                   NO_COLOR="1", PYTHONPATH=str(REPO))
        shown = [f"LEDGER_DATABASE_URL={url}\nLEDGER_SPARK_REMOTE={remote}"]
        for command in ("db upgrade", "scheduler --exit-when-idle --parallelism 2", "timeline sales_pipeline",
                        "lineage daily_sales --partition 2024-03-05", "tasks logs sales_pipeline 5 clean"):
            done = run_ledger(command.split(), env=env, cwd=home)
            output = (done.stdout + done.stderr).rstrip()
            shown.append(f"$ ledger {command}\n" + "\n".join(x.rstrip() for x in output.splitlines()))
        text = "\n\n".join(shown).replace(str(home), "/tmp/pgdemo/home")
        return {"spark-postgres-connect": "```\n" + text + "\n```"}
    finally:
        if connect is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(connect.pid, _signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                connect.wait(timeout=30)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(connect.pid, _signal.SIGKILL)
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


class Background:
    """A `ledger` command serving HTTP in the background of a scenario, on a free port: step `start` runs
    `ledger WORDS` ("{port}" in them: the port) and waits until `url + path` answers with a text `ready` accepts,
    then shows the command (`shown`: followed by its first line of output, or with " &"); step `stop` ends it."""

    def __init__(self, *words: str, path: str, ready: Callable[[str], bool] = lambda _text: True,
                 first_line: bool = True) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.words = [word.format(port=self.port) for word in words]
        self.path, self.ready, self.first_line = path, ready, first_line
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, home: Path, env: dict[str, str]) -> str:
        import time as _time
        import urllib.request

        log = home / f"{self.words[0]}.log"
        with open(log, "wb") as out:
            self.process = subprocess.Popen([LEDGER, *self.words], env=env, cwd=home, stdout=out,
                                            stderr=subprocess.STDOUT)
        until = _time.monotonic() + 180
        while True:
            text = ""
            with contextlib.suppress(OSError), urllib.request.urlopen(self.url + self.path, timeout=5) as answer:
                text = answer.read().decode()
            if text and self.ready(text):
                break
            if self.process.poll() is not None or _time.monotonic() > until:
                raise SystemExit(f"ledger {shlex.join(self.words)} did not get ready:\n{log.read_text()}")
            _time.sleep(0.1)
        command = f"$ ledger {shlex.join(self.words)}"
        if not self.first_line:
            return command + " &"
        return command + "\n" + log.read_text().splitlines()[0].rstrip()

    def stop(self, _home: Path | None = None, _env: dict[str, str] | None = None) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)


def run_web_commands() -> dict[str, str]:
    """docs/web.md's command outputs: a `ledger webserver` over the example daily_sales after its catch-up and a
    manual --replace (run 8 overrides run 2), asked by curl; and the refusal to serve another address."""
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            raise SystemExit(f"docs/web.md's examples need {tool}")
    server = Background("webserver", "--port", "{port}", path="/api/v1/dags")
    timeline = f"{server.url}/api/v1/dags/daily_sales/timeline"
    try:
        return run_scenario({"daily_sales.py": example("daily_sales.py")}, [
            ("web-start", ["# db upgrade", "# scheduler --exit-when-idle",
                           "# trigger daily_sales --logical-date 2024-03-02 --replace", server.start]),
            ("web-refuse", ["@sh ledger webserver --host 0.0.0.0; echo $?"]),
            ("web-cursor", [f"@sh curl -s -D - -o /dev/null '{timeline}?limit=2'",
                            f"@sh curl -s '{timeline}?limit=2' | jq -c '.[] | {{run_id, logical_date, state, "
                            "overridden_by}'"]),
            ("web-errors", [f"@sh curl -si {server.url}/api/v1/runs/999",
                            f"@sh curl -s '{timeline}?start=bad'",
                            f"@sh curl -si -X PUT {server.url}/api/v1/runs/4 | head -1"]),
            ("web-users", ["@sh echo 'a long secret' | ledger users create ada --role operator",
                           "@sh echo 'another secret' | ledger users create vic --role viewer",
                           "@sh ledger users token ada --name script > ada.token; cut -c1-4 ada.token",
                           "# @sh ledger users token vic --name script > vic.token",
                           "@sh ledger users list --json | jq -c '.[]|{username, role, tokens}'",
                           f"@sh curl -s {server.url}/api/v1/dags"]),
            ("web-actions", [f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" "
                             f"-d '{{\"tasks\": [\"load\"]}}' "
                             f"-H 'Content-Type: application/json' {server.url}/api/v1/runs/3/clear",
                             f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                             f"application/json' -d '{{\"state\": \"failed\", \"reason\": \"bad input file\"}}' "
                             f"{server.url}/api/v1/runs/5/mark",
                             "@sh ledger events --kind tasks_cleared --kind run_marked --json | jq -c "
                             "'.[]|{kind, run_id, actor}'"]),
            ("web-mark", [f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                          f"application/json' -d '{{\"tasks\": [\"transform\"], \"state\": \"failed\", "
                          f"\"downstream\": true, \"dry_run\": true}}' {server.url}/api/v1/runs/4/tasks/mark",
                          f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                          f"application/json' -d '{{\"tasks\": [\"transform\"], \"state\": \"failed\", "
                          f"\"downstream\": true, \"reason\": \"late file\"}}' "
                          f"{server.url}/api/v1/runs/4/tasks/mark",
                          "tasks mark daily_sales 4 load --state success --upstream"]),
            ("web-refusals", [f"@sh curl -s -H \"Authorization: Bearer $(cat vic.token)\" -X POST "
                              f"{server.url}/api/v1/dags/daily_sales/pause",
                              f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                              f"application/json' -d '{{\"logical_date\": \"2025-01-01\"}}' "
                              f"{server.url}/api/v1/dags/daily_sales/runs",
                              "@sh ledger trigger daily_sales --logical-date 2025-01-01"]),
            ("web-backfill", [f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                              f"application/json' -d '{{\"dag_id\": \"daily_sales\", \"start\": \"2024-03-05\", "
                              f"\"end\": \"2024-03-06\", \"reprocess\": \"failed\", \"dry_run\": true}}' "
                              f"{server.url}/api/v1/backfills | jq -c '.plan[]|{{logical_date, action, reason}}'",
                              f"@sh curl -s -H \"Authorization: Bearer $(cat ada.token)\" -H 'Content-Type: "
                              f"application/json' -d '{{\"dag_id\": \"daily_sales\", \"start\": \"2024-03-05\", "
                              f"\"end\": \"2024-03-06\", \"reprocess\": \"failed\"}}' "
                              f"{server.url}/api/v1/backfills | jq -c '{{backfill_id, state}}'"]),
            ("web-guard", [f"@sh curl -si -H 'Host: attacker.example' {server.url}/api/v1/dags | sed -n '1p;$p'",
                           f"@sh curl -sI -H \"Authorization: Bearer $(cat vic.token)\" {server.url}/runs/1 | "
                           "grep -iv '^date\\|^server\\|^set-cookie'"]),
            ("web-stop", [server.stop]),
        ], between="\n")
    finally:
        server.stop()


# docs/web/NAME.png: the page at PATH ({current}: the DAG's current version), HEIGHT pixels tall
WEB_SHOTS = [("dags", "/", 760), ("timeline", "/dags/web", 760), ("run", "/runs/4", 760),
             ("version", "/dags/web/versions/{current}", 1100), ("lineage", "/lineage/sales_clean", 760),
             ("backfills", "/backfills", 760)]


def run_web() -> dict[str, str]:
    """docs/web.md's screenshots (docs/web/*.png) of the real pages: the ledger tests/web builds (a catch-up, a
    new version, a backfill, a manual --replace) served by a real `ledger webserver` and shot by headless
    Chromium. The pages show wall-clock times, so they are written on request, not compared; no text block."""
    import json as _json
    import time as _time

    sys.path.insert(0, str(REPO))
    from tests.web.conftest import build
    from tests.web.test_browser import chromium, fetch, free_port

    binary = chromium()
    if binary is None:
        raise SystemExit("the web screenshots need Chromium: apt-get install chromium")
    home = Path(tempfile.mkdtemp(prefix="ledger-web-")) / "home"
    home.mkdir()
    try:
        cli = build(home)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([LEDGER, "webserver", "--port", str(port)], env=cli.env, cwd=home,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = _time.monotonic() + 60
            while True:
                with contextlib.suppress(OSError):
                    if fetch(url + "/api/v1/dags")[0] == 200:
                        break
                if server.poll() is not None or _time.monotonic() > deadline:
                    raise SystemExit("ledger webserver did not answer")
                _time.sleep(0.2)
            current = _json.loads(fetch(url + "/api/v1/dags")[1])[0]["version"]
            for name, path, height in WEB_SHOTS:
                shot = REPO / "docs" / "web" / f"{name}.png"
                subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                f"--window-size=1200,{height}", f"--screenshot={shot}",
                                url + path.format(current=current)],
                               check=True, capture_output=True, timeout=120)
        finally:
            server.terminate()
            server.wait(timeout=30)
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
    return {}


DOCS: dict[str, tuple[Path | None, Callable[[], dict[str, str]]]] = {
    "backfill": (REPO / "docs" / "backfill.md", run_backfill_scenario),
    "tutorial": (REPO / "docs" / "tutorial.md", run_demo),
    "signals": (REPO / "docs" / "signals.md", run_signals),  # timing-dependent: written on request only
    "spark": (REPO / "docs" / "spark.md", run_spark),  # needs PostgreSQL and Java
    "operations": (REPO / "docs" / "operations.md", run_operations),
    "authoring": (REPO / "docs" / "authoring.md", run_authoring),
    "scheduler": (REPO / "docs" / "scheduler.md", run_scheduler_log),
    "from-airflow": (REPO / "docs" / "from-airflow.md", run_from_airflow),
    "web": (REPO / "docs" / "web.md", run_web_commands),  # needs curl and jq
    "datasets": (REPO / "docs" / "datasets.md", run_datasets),  # needs jq
    "web-screenshots": (None, run_web),  # docs/web/*.png, no text block; needs Chromium
}
CHECKED = ("backfill", "tutorial", "spark", "operations", "authoring", "scheduler", "from-airflow", "web")
# not checked: signals (how many batches a stream sends before STOP varies), web-screenshots (wall-clock times),
# datasets (consumer runs are created as their inputs' events arrive: their run ids vary with timing)
BLOCK = re.compile(r"<!-- generated: (?P<name>[^>]+?) -->\n(?P<body>.*?)<!-- end generated -->", re.S)


def rewrite(doc: Path, blocks: dict[str, str]) -> str:
    def put(match: re.Match[str]) -> str:
        name = match.group("name")  # a command, or the start of one whose arguments come from the run
        found = [name] if name in blocks else [key for key in blocks if key.startswith(name + " ")]
        if len(found) != 1:
            raise SystemExit(f"{doc.name} names a block {name!r} that its run does not make once; it made: "
                             f"{', '.join(blocks)}")
        return f"<!-- generated: {name} -->\n{blocks[found[0]]}\n<!-- end generated -->"

    return BLOCK.sub(put, doc.read_text())


def main(argv: list[str]) -> int:
    check = "--check" in argv
    names = [a for a in argv if not a.startswith("--")] or (list(CHECKED) if check else list(DOCS))
    stale = []
    for name in names:
        path, run = DOCS[name]
        if path is None:  # files of their own (screenshots), not compared
            run()
            continue
        fresh = rewrite(path, run())
        if not check:
            path.write_text(fresh)
        elif mask(fresh) != mask(path.read_text()):
            stale.append(name)
            shown = difflib.unified_diff(mask(path.read_text()).splitlines(), mask(fresh).splitlines(),
                                         "in the doc", "printed now", lineterm="", n=1)
            sys.stderr.write("\n".join(list(shown)[:40]) + "\n")
    for name in stale:
        sys.stderr.write(f"{DOCS[name][0]} is out of date: run "
                         f"`python docs/generate_examples.py {name}`\n")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
