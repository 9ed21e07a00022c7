"""Reproducible benchmarks: ``python -m benchmarks <name> [options]``.

Each benchmark prints a table of medians (and ratios against a baseline measured in the same
run) and writes its figures as JSON under ``results/``.
"""
