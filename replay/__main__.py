"""``python -m replay`` runs the memory-ledger CLI."""

from memory_ledger.replay.cli.app import main

main()
