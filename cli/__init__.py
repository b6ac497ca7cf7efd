"""The `ledger` command line (typer): parses arguments, calls ledger/services and the jobs, prints. Each command
module loads only when its command runs.
"""
