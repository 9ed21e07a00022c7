"""Re-running recorded things: session scripts, the LoCoMo converter, and the CLI."""
