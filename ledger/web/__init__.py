"""`ledger webserver`: where a team operates the ledger, pages and a JSON API (FastAPI, Jinja2, no Node).

Reads go through read-only sessions; actions through ledger/services, as the CLI's do. It never imports DAG
files."""
