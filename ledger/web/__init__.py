"""`ledger webserver`: a read-only web view of the ledger and a JSON API (FastAPI, Jinja2, no Node).

It reads the database only, through read-only sessions, and never imports DAG files."""
