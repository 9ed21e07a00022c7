"""The LoCoMo benchmarks and what they share: retrieval quality (``retrieval``, ``python -m
benchmarks locomo``), the limit of fusion (``limits``, ``locomo-limits``), the end-to-end run
(``run``, ``python -m benchmarks run``), and their parts: where the data is read from
(``source``), the conversations and scripts (``data``), the direct path (``direct``), channel
scores (``channels``), turn-level recall (``turns``), peer metrics (``peers`` and ``paths``)
and the embedding cache (``cache``)."""
