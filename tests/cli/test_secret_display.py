"""Secrets a DAG file passes as task arguments, and secrets a task passes on as a value: tries get the real values;
`dags show`, `dags diff`, the web API and `tasks xcom` show ***."""

from __future__ import annotations

import json

from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from ledger.infra.config import load_settings
from ledger.web.app import create_app
from tests.conftest import Cli

CREDS_DAG = """
import pendulum
from ledger import DAG, BashTask, PythonTask
from ledger.services.secrets import Variable

def fetch(context):
    return {"token": Variable.get("api_token"), "rows": 3}

def use(got, context):
    assert got["token"] == Variable.get("api_token"), "the downstream task did not get the real value"
    print("downstream got the real token of", len(got["token"]), "characters")

with DAG("creds", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
    BashTask("check", 'test ${#DB_PASSWORD} -eq 14 && echo "password ok: $DB_PASSWORD"',  # the real one's length
             env={"DB_PASSWORD": "@PW@", "DB_HOST": "db.internal"})
    got = PythonTask("fetch", fetch)
    PythonTask("use", use, op_kwargs={"got": got.output})
"""


def creds_dag(password: str) -> str:
    return CREDS_DAG.replace("@PW@", password)


def test_secret_task_arguments_reach_the_try_and_are_shown_as_stars(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("creds.py", creds_dag("hunter2-SECRET"))
    shown = cli.json("dags", "show", "creds")
    check = {t["task_id"]: t for t in shown["structure"]["tasks"]}["check"]
    assert check["definition"]["env"] == {"DB_PASSWORD": "***", "DB_HOST": "db.internal"}
    assert "SECRET" not in json.dumps(shown) and "SECRET" not in cli.ok("dags", "show", "creds")
    first = shown["version"]

    cli.write_dag("creds.py", creds_dag("hunter3-SECRET"))  # a new secret: a new version, marked changed
    versions = cli.json("dags", "versions", "creds")
    assert len(versions) == 2
    diff = cli.ok("dags", "diff", "creds", first)
    structure = diff[diff.index("(structure)"):]  # the code's diff is the DAG file's text, literals included
    assert '-          "DB_PASSWORD": "***"' in structure and '+          "DB_PASSWORD": "*** (changed)"' in structure
    assert "SECRET" not in structure
    settings = load_settings({"LEDGER_HOME": str(cli.home)})
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        api = [client.get(f"/api/v1/dags/creds/versions/{v['version']}").text for v in versions]
        api_diff = client.get(f"/api/v1/dags/creds/versions/{versions[1]['version']}/diff").json()["diff"]
        page = client.get(f"/dags/creds/versions/{versions[1]['version']}").text
    assert all("SECRET" not in text for text in api) and "***" in api[0]
    assert api_diff == diff
    structure_on_page = page[page.index("(structure)"):]  # the version page's diff: the file's text, then this
    assert "&#34;DB_PASSWORD&#34;: &#34;*** (changed)&#34;" in structure_on_page
    assert "SECRET" not in structure_on_page

    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("variables", "set", "api_token", "tok-SECRET-123")
    cli.ok("trigger", "creds")
    cli.ok("scheduler", "--exit-when-idle")
    assert {t["state"] for t in cli.json("runs", "show", "1")["task_instances"]} == {"success"}
    assert "password ok: ***" in cli.ok("tasks", "logs", "creds", "1", "check")
    assert "downstream got the real token of 14 characters" in cli.ok("tasks", "logs", "creds", "1", "use")

    (value,) = cli.json("tasks", "xcom", "creds", "1", "fetch")
    assert value["value"] == {"token": "***", "rows": 3}
    table = cli.ok("tasks", "xcom", "creds", "1", "fetch")
    assert "***" in table and "SECRET" not in table


def test_xcom_values_that_hold_a_known_secret_are_masked_also_from_the_environment(ready_cli: Cli) -> None:
    cli = ready_cli
    cli.write_dag("passes.py", """
        import pendulum
        from ledger import DAG, PythonTask

        def passes(context):
            context.xcom_push("dsn", "postgresql://etl:pw-SECRET@db/dw")
            return ["plain", "conn-SECRET", 12345]

        with DAG("passes", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC")) as dag:
            PythonTask("passes", passes)
    """)
    cli.ok("trigger", "passes")
    cli.ok("scheduler", "--exit-when-idle")
    # the values it passed on are in the database; the file its try left them in beside its log is gone
    logs = list((cli.home / "logs" / "passes").rglob("try_1.log*"))
    assert [p.name for p in logs] == ["try_1.log"], logs
    cli.env["LEDGER_FERNET_KEY"] = Fernet.generate_key().decode()
    cli.ok("connections", "add", "warehouse", "--uri", "postgresql://etl:pw-SECRET@db/dw")
    cli.env["LEDGER_VAR_SERVICE_TOKEN"] = "conn-SECRET"
    cli.env["LEDGER_CONN_PAGER"] = "https://pager:12345@pager.example"
    values = {v["key"]: v["value"] for v in cli.json("tasks", "xcom", "passes", "1", "passes")}
    assert values == {"dsn": "postgresql://etl:***@db/dw", "return_value": ["plain", "***", "***"]}
