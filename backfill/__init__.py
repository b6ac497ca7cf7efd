"""BackfillJob: runs a backfill's runs with the DagRunJob loop (planning and creating a backfill are
ledger/core/backfill_plan.py and ledger/services/backfill_create.py).
"""
