"""Session scripts and the LoCoMo converter: recorded conversations re-run through a session.

- :mod:`~memory_ledger.replay.scripts.script`: parse and run a JSON Lines session script
  (``memory-ledger run``): :func:`~memory_ledger.replay.scripts.script.parse_script`,
  :func:`~memory_ledger.replay.scripts.script.run_script`.
- :mod:`~memory_ledger.replay.scripts.locomo`: convert a LoCoMo sample to a session script
  (``memory-ledger convert-locomo``).

Above the engine's ``commands`` wing, below the surfaces (``cli``, ``mcp``, ...).
"""
