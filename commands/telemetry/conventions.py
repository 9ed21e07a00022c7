"""The names the engine's spans and metrics carry: OpenTelemetry's GenAI memory conventions,
and this engine's extras under its own prefix.

Source of the ``gen_ai.*`` names: the GenAI memory operation conventions merged into
``open-telemetry/semantic-conventions-genai`` (pull request 140, 2026-05, "Add GenAI memory
operation conventions", carried over from ``open-telemetry/semantic-conventions`` pull
request 3250): the operation names ``create_memory``, ``search_memory``, ``update_memory``
(add or update, upsert semantics), ``delete_memory`` (without a record id: every record of
the store), and the attributes ``gen_ai.memory.store.id`` ("what this maps to is
implementation-specific ... and SHOULD be documented per integration"),
``gen_ai.memory.record.id``, ``gen_ai.memory.query.text`` (opt-in: "instrumentations SHOULD
NOT capture this by default") and ``gen_ai.memory.records`` (opt-in; a JSON list of records,
each with its ``content`` and optional ``id`` and ``score``). ``error.type`` is the general
convention (the error's class or code; here the typed error's ``reason_code``). The
conventions are in development: a renamed attribute is changed here, in one place.

This engine's mapping (documented in docs/observability.md):

- ``gen_ai.memory.store.id``: the ledger's random store id (``ledger/store_identity.py``),
  or the name the host gives
  (:attr:`Telemetry.store_id <memory_ledger.commands.telemetry.options.Telemetry.store_id>`);
  never a path.
- a namespace (tenant, principal, scope) is never an attribute: its keyed digest is
  (:data:`NAMESPACE_DIGEST`).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "CONTENT_WITHHELD",
    "ERROR_TYPE",
    "GEN_AI_OPERATION_NAME",
    "INSTRUMENTATION_NAME",
    "LEDGER_POSITION",
    "MEMORY_QUERY_TEXT",
    "MEMORY_RECORDS",
    "MEMORY_RECORD_ID",
    "MEMORY_STORE_ID",
    "NAMESPACE_DIGEST",
    "OPERATION",
    "OPERATIONS",
    "OPERATION_DURATION",
    "PROJECTION_LAG",
    "PROJECTION_LAG_SECONDS",
    "CATCH_UP_DURATION",
    "ENGINE_INSTANCE",
    "VECTOR_BACKLOG",
    "REASON_CODE",
    "RECORDS_ADMITTED",
    "RECORDS_RETURNED",
    "RECORDS_WRITTEN",
    "GenAIOperation",
    "Operation",
]

INSTRUMENTATION_NAME: Final = "memory_ledger"
"""The tracer's and the meter's instrumentation scope name."""

# OpenTelemetry GenAI memory conventions (semantic-conventions-genai, pull request 140).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
MEMORY_STORE_ID: Final = "gen_ai.memory.store.id"
MEMORY_RECORD_ID: Final = "gen_ai.memory.record.id"
MEMORY_QUERY_TEXT: Final = "gen_ai.memory.query.text"
MEMORY_RECORDS: Final = "gen_ai.memory.records"
ERROR_TYPE: Final = "error.type"

# This engine's extras.
OPERATION: Final = "memory_ledger.operation"
"""The engine's own name of the operation (``remember``, ``pin``, ``session.finish``...):
several of them share one ``gen_ai.operation.name``."""
NAMESPACE_DIGEST: Final = "memory_ledger.namespace.digest"
"""HMAC-SHA-256 of the namespace under the telemetry key, 32 hex digits
(:meth:`~memory_ledger.commands.telemetry.options.Telemetry.namespace_digest`)."""
LEDGER_POSITION: Final = "memory_ledger.ledger.position"
"""The ledger position of the operation's last event written, or the position a recall's
answer reflects (from the operation's result; for ``forget_all``, which returns a count,
the position of its last event, none when it forgot nothing and wrote nothing)."""
REASON_CODE: Final = "memory_ledger.reason_code"
"""The ``reason_code`` of the typed error that refused the operation."""
RECORDS_ADMITTED: Final = "memory_ledger.records.admitted"
"""Memories a write admitted (a batch's operations, a turn's candidates)."""
RECORDS_RETURNED: Final = "memory_ledger.records.returned"
"""Memories a recall returned."""
CONTENT_WITHHELD: Final = "memory_ledger.content.withheld"
"""With content on: why a text was left out (``secret_detected``)."""
ENGINE_INSTANCE: Final = "memory_ledger.engine.instance"
"""On the observable metrics, beside ``gen_ai.memory.store.id``: the engine object's number
in its process (1, 2, ...), so two engines sharing a meter provider (two stores, a store
opened twice, a reopen) each report their own observations."""

# Metrics (this engine's prefix: the GenAI client metrics describe model calls).
OPERATION_DURATION: Final = "memory_ledger.operation.duration"
"""Histogram, seconds, per ``gen_ai.operation.name``, ``memory_ledger.operation`` and
``error.type``."""
RECORDS_WRITTEN: Final = "memory_ledger.records.written"
"""Observable counter, ledger events appended by the engine (``{event}``;
``MemoryEngine.appended``, read when the host's metric reader collects)."""

PROJECTION_LAG: Final = "memory_ledger.projection.lag"
"""Observable gauge, ledger positions the engine's read models are behind the ledger head
(``{position}``; 0 when caught up)."""

PROJECTION_LAG_SECONDS: Final = "memory_ledger.projection.lag.seconds"
"""Observable gauge, seconds the engine's read models have been behind the ledger head: 0
when caught up, else the time since this engine last caught them up to the head (or since
the engine's telemetry was created, when it never did)."""

CATCH_UP_DURATION: Final = "memory_ledger.projection.catch_up.duration"
"""Histogram, seconds, of each ``MemoryEngine.catch_up`` (lock wait included), with
``error.type`` on failure."""

VECTOR_BACKLOG: Final = "memory_ledger.vectors.pending"
"""Observable gauge, retrievable memories still lacking a vector (``{memory}``;
``MemoryEngine.pending_vectors``; 0 without a semantic channel)."""

GenAIOperation = Literal["create_memory", "search_memory", "update_memory", "delete_memory"]

Operation = Literal[
    "remember",
    "remember_many",
    "apply_batch",
    "correct",
    "pin",
    "forget",
    "forget_all",
    "erase",
    "recall",
    "session.turn",
    "session.recall",
    "session.finish",
    "langgraph.search",
    "langgraph.get",
    "langgraph.list_namespaces",
    "memory_map",
    "explain",
    "rotate_master_key",
    "session.activate_candidate",
    "session.prune",
    "session.remember_success",
    "session.remember_failure",
]

OPERATIONS: Final[dict[Operation, GenAIOperation]] = {
    "remember": "create_memory",
    "remember_many": "create_memory",
    "apply_batch": "update_memory",
    "correct": "update_memory",
    "pin": "update_memory",
    "forget": "delete_memory",
    "forget_all": "delete_memory",
    "erase": "delete_memory",
    "recall": "search_memory",
    "session.turn": "create_memory",
    "session.recall": "search_memory",
    "session.finish": "update_memory",
    "langgraph.search": "search_memory",
    "langgraph.get": "search_memory",
    "langgraph.list_namespaces": "search_memory",
    "memory_map": "search_memory",
    "explain": "search_memory",
    "rotate_master_key": "update_memory",
    "session.activate_candidate": "update_memory",
    "session.prune": "delete_memory",
    "session.remember_success": "create_memory",
    "session.remember_failure": "create_memory",
}
"""Each engine operation's GenAI operation name: a remember creates a memory, a correction,
a pin, a batch of remembers and forgets and a session's reconciliation update memories
(the conventions' upsert), a forget, a bulk forget and an erasure delete them (the last two
without a record id: every record of the namespace), a recall searches. A session turn
records evidence and extracts candidate memories: a ``create_memory``. The LangGraph
store's ``search`` ranks canonical memories itself (``langgraph.search``); its puts and
deletes are batches (``apply_batch``), its ``get`` and namespace listing read memories
(``search_memory``, as the engine's ``memory_map`` and ``explain`` do). A session's
``remember_success`` and ``remember_failure`` create a procedural memory, its
``activate_candidate`` updates (a candidate becomes canonical), its ``prune`` deletes.
``rotate_master_key`` re-wraps every data key (records unchanged): an ``update_memory``
without a record id."""
