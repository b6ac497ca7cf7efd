"""The scheduler: the DagRunJob loop and what it drives (parsing, executors, the try side, callbacks,
signals). Built on ledger/; nothing in ledger/ imports it.
"""
