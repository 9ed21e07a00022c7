"""Serving read models: what recall, get, search and list read on every call, kept in the
process by the writer (an inline projection) and by a tail of the ledger.

:class:`~memory_ledger.projections.serving.state.ServingState` applies events with the row
functions of :mod:`memory_ledger.projections.fold` (the DuckDB fold's own), so an
incremental state, a rebuild and the DuckDB read models agree row for row
(:func:`~memory_ledger.projections.serving.state.rows_digest`). Import from
:mod:`memory_ledger.projections.serving.state`.
"""
