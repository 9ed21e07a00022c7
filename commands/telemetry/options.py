"""What a host decides about the engine's telemetry: on or off, content or not, the key of
namespace digests, the store's name, and (optionally) its own providers.

Each engine holds one :class:`Telemetry` (``engine.telemetry``); the host changes its
attributes (``engine.telemetry.content = True``). Nothing here imports OpenTelemetry: the
engine looks for it only when an operation runs, and then only in ``sys.modules`` unless the
host switched telemetry on explicitly (:attr:`Telemetry.enabled`).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import os
import sys
from collections.abc import Callable
from time import monotonic
from types import ModuleType
from typing import TYPE_CHECKING, Any

from memory_ledger.ledger.errors import InvalidArgumentTypeError, MemoryLedgerError
from memory_ledger.ledger.ids import Namespace

if TYPE_CHECKING:
    from memory_ledger.commands.telemetry.instruments import SharedInstruments

__all__ = ["DIGESTS_KEPT", "MIN_KEY_BYTES", "Telemetry", "TelemetryUnavailableError"]

MIN_KEY_BYTES = 16
"""The shortest namespace key accepted (bytes)."""

DIGESTS_KEPT = 4096
"""Namespace digests remembered per engine (then forgotten all at once)."""


class TelemetryUnavailableError(MemoryLedgerError, ImportError):
    """Telemetry was switched on (``engine.telemetry.enabled = True``) but the OpenTelemetry
    API is not installed: ``pip install 'memory-ledger[otel]'``. Nothing else changed."""

    reason_code = "telemetry_unavailable"


class Telemetry:
    """One engine's telemetry settings (``engine.telemetry``).

    :param enabled: ``None`` (default, "auto"): spans and metrics are emitted when the host
        process has loaded OpenTelemetry's API (``opentelemetry.trace`` is in
        ``sys.modules``: a host that configured an SDK has); the engine never imports it
        itself, so a host without OpenTelemetry pays one dictionary look-up per operation.
        ``True``: import the API now (:class:`TelemetryUnavailableError` when it is not
        installed). ``False``: nothing, whatever the process loaded.
    :param content: record statements and queries (``gen_ai.memory.query.text``,
        ``gen_ai.memory.records``; the conventions' opt-in attributes). Off by default. When
        on, each text first passes the secret door
        (:func:`~memory_ledger.commands.telemetry.content.door_text`): secret-shaped spans
        are redacted, and a text still secret-shaped is left out
        (``memory_ledger.content.withheld``).
    :param namespace_key: the HMAC key of namespace digests, at least
        :data:`MIN_KEY_BYTES` bytes. Default: a random key drawn for this engine object
        (digests then correlate spans of one engine's lifetime only); give a key to compare
        digests across processes and hosts, and keep it like a password (whoever holds it
        can test a guessed namespace against a digest).
    :param store_id: ``gen_ai.memory.store.id``: a name or a callable returning it. The
        engine gives the ledger's random store id; a host may name the store instead.
    :param tracer_provider: a ``TracerProvider`` to use instead of the global one.
    :param meter_provider: a ``MeterProvider`` to use instead of the global one.
    :raises InvalidArgumentTypeError: ``namespace_key`` is not bytes of at least 16.
    :raises TelemetryUnavailableError: ``enabled=True`` without the OpenTelemetry API.
    """

    def __init__(
        self,
        *,
        enabled: bool | None = None,
        content: bool = False,
        namespace_key: bytes | None = None,
        store_id: str | Callable[[], str] | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        self._enabled: bool | None = None
        self._key: bytes | None = None
        self._digests: dict[Namespace, str] = {}
        self.enabled = enabled
        self.content = content
        """Record statements and queries (after the secret door); off by default."""
        self.namespace_key = namespace_key
        self.store_id = store_id
        """``gen_ai.memory.store.id`` (a name, or a callable returning it)."""
        self.tracer_provider = tracer_provider
        """A ``TracerProvider`` instead of the global one (None: the global one)."""
        self.meter_provider = meter_provider
        """A ``MeterProvider`` instead of the global one (None: the global one)."""
        self._tracer: tuple[Any, Any] | None = None
        self._instruments: tuple[Any, SharedInstruments] | None = None
        self._store_name: str | None = None
        self._caught_up_at = monotonic()

    @property
    def enabled(self) -> bool | None:
        """``None`` (auto), ``True`` or ``False``; see the class."""
        return self._enabled

    @enabled.setter
    def enabled(self, value: bool | None) -> None:
        if value is not None and not isinstance(value, bool):
            msg = f"enabled must be True, False or None, got {type(value).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="enabled")
        if value:
            try:
                importlib.import_module("opentelemetry.trace")
            except ImportError as e:
                msg = "telemetry needs the OpenTelemetry API: pip install 'memory-ledger[otel]'"
                raise TelemetryUnavailableError(msg) from e
        self._enabled = value

    @property
    def namespace_key(self) -> bytes:
        """The HMAC key of namespace digests (set it to compare digests across hosts)."""
        if self._key is None:
            self._key = os.urandom(32)
        return self._key

    @namespace_key.setter
    def namespace_key(self, key: bytes | None) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES):
            msg = f"namespace_key must be bytes, at least {MIN_KEY_BYTES} of them"
            raise InvalidArgumentTypeError(msg, parameter="namespace_key")
        self._key = key
        self._digests = {}

    def namespace_digest(self, namespace: Namespace) -> str:
        """HMAC-SHA-256 of ``namespace`` (tenant, principal and scope, each length-prefixed)
        under :attr:`namespace_key`, the first 32 hex digits: the same namespace gives the
        same digest under one key; the name cannot be read back, nor tested without the
        key. Remembered for the last :data:`DIGESTS_KEPT` namespaces."""
        known = self._digests.get(namespace)
        if known is not None:
            return known
        message = b"".join(
            len(part).to_bytes(4, "big") + part
            for part in (
                p.encode("utf-8", "surrogatepass")
                for p in (namespace.tenant, namespace.principal, namespace.scope_id)
            )
        )
        digest = hmac.new(self.namespace_key, message, hashlib.sha256).hexdigest()[:32]
        if len(self._digests) >= DIGESTS_KEPT:
            self._digests.clear()
        self._digests[namespace] = digest
        return digest

    def store_name(self) -> str:
        """``gen_ai.memory.store.id`` ("" when none is known), resolved once."""
        if self._store_name is None:
            known = self.store_id() if callable(self.store_id) else self.store_id
            self._store_name = known or ""
        return self._store_name

    def api(self) -> ModuleType | None:
        """``opentelemetry.trace`` when telemetry is on for this operation, else None (no
        import unless :attr:`enabled` is True)."""
        if self._enabled is False:
            return None
        module = sys.modules.get("opentelemetry.trace")
        if module is None or getattr(module.__spec__, "_initializing", False):
            return None  # absent, or being imported by another thread right now
        return module

    def tracer(self, trace: ModuleType) -> Any:
        """The tracer of :attr:`tracer_provider` (or the global provider), cached."""
        cached = self._tracer
        if cached is None or cached[0] is not self.tracer_provider:
            from memory_ledger.commands.telemetry.version import version

            tracer = trace.get_tracer(
                "memory_ledger", version(), tracer_provider=self.tracer_provider
            )
            cached = self._tracer = (self.tracer_provider, tracer)
        return cached[1]

    def caught_up(self) -> None:
        """Mark the read models caught up to the ledger head now (``PROJECTION_LAG_SECONDS``)."""
        self._caught_up_at = monotonic()

    def catch_up_histogram(self, engine: object) -> Any:
        """The catch-up-duration histogram (``CATCH_UP_DURATION``) of :attr:`meter_provider`
        (None when the provider could not make it), registering ``engine`` as
        :meth:`instruments` does."""
        self.instruments(engine)
        cached = self._instruments
        return cached[1].catch_up if cached is not None else None

    def lag_seconds(self, engine: Any) -> float:
        """Seconds ``engine``'s read models have been behind the ledger head (0 when caught
        up; see ``PROJECTION_LAG_SECONDS``)."""
        if engine.head - engine.projection_position <= 0:
            return 0.0
        return max(0.0, monotonic() - self._caught_up_at)

    def instruments(self, engine: object) -> Any:
        """The operation-duration histogram of :attr:`meter_provider` (or the global
        provider; None when the provider could not make it). The instruments are made once
        per provider and shared by the engines using it
        (:func:`~memory_ledger.commands.telemetry.instruments.shared_instruments`);
        ``engine`` is registered with them, so its records-written counter and projection
        gauges are read, with its own attributes, when the host's reader collects (nothing
        is counted per operation). Never raises."""
        cached = self._instruments
        if cached is None or cached[0] is not self.meter_provider:
            from memory_ledger.commands.telemetry.instruments import shared_instruments

            shared = shared_instruments(self.meter_provider)
            if cached is not None:
                cached[1].unregister(engine)
            try:
                store = self.store_name()
            except Exception:  # noqa: BLE001 - the ledger's store id unreadable: no name
                store = ""
            shared.register(engine, store)
            cached = self._instruments = (self.meter_provider, shared)
        return cached[1].duration
