"""A `--downstream` plan names the re-runs of a paused consumer too: the scheduler makes them once the DAG is
unpaused, so a plan that left them out said less than what would happen."""

from __future__ import annotations

from tests.backfill.test_backfill_cli import schedule
from tests.cli.test_truthful_cli import dump
from tests.conftest import Cli
from tests.datasets.test_dataset_chain import CHAIN


def test_the_downstream_plan_names_a_paused_consumers_reruns_as_waiting_for_its_unpause(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("chain.py", CHAIN)
    schedule(cli)
    cli.ok("dags", "pause", "report")
    before = dump(cli)
    args = ("backfill", "ingest", "--start", "2024-03-02", "--end", "2024-03-02", "--reprocess", "completed",
            "--downstream", "--dry-run")
    plan = cli.json(*args, "--json")
    assert [(p["dag_id"], p["logical_date"][:10], p["paused"]) for p in plan["downstream"]] == [
        ("clean", "2024-03-02", False), ("report", "2024-03-02", True)]
    text = cli.ok(*args)
    assert "override once unpaused" in text
    assert "2 downstream run(s) in 2 DAG(s), 1 of them in paused DAGs: made once the DAG is unpaused" in text
    assert dump(cli) == before


def test_a_backfill_of_a_dataset_scheduled_dag_says_how_its_runs_are_made_again(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("chain.py", CHAIN)
    cli.ok("dags", "list")
    before = dump(cli)
    said = cli.fails("backfill", "report", "--start", "2024-03-02", "--end", "2024-03-02", "--dry-run").stderr
    assert "DAG 'report' is scheduled on datasets (sales_clean), not on a time schedule" in said, said
    assert "`ledger backfill <producer> ... --downstream`" in said and "ledger trigger report" in said
    assert dump(cli) == before
