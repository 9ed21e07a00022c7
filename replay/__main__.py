"""``python -m replay`` runs the memory-ledger CLI."""

from replay.cli import main

main()
