"""The ledger: events, the LMDB persistence module for ``eventsourcing`` and its mapper.

Nothing here imports the other packages of memory-ledger.
"""
