"""DAG file processing: the pool of processes that parse DAG files and the sync of what they found into the ledger.
"""
