"""What the CLI, the web view and the API call: operations that read and write the ledger through the store, one
transaction each.
"""
