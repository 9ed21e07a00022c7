"""Errors of encryption at rest: master key, key store, data keys, erased namespaces.

Every class derives from :class:`~memory_ledger.ledger.errors.MemoryLedgerError` and carries
a stable ``reason_code``. Messages name files and key ids, never key bytes.
"""

from __future__ import annotations

from memory_ledger.ledger.errors import MemoryLedgerError

__all__ = [
    "DataKeyMissingError",
    "EncryptionError",
    "EncryptionNotConfiguredError",
    "KeyStoreError",
    "MasterKeyError",
    "NamespaceErasedError",
]


class EncryptionError(MemoryLedgerError):
    """Base of the errors of encryption at rest."""

    reason_code = "encryption_error"


class MasterKeyError(EncryptionError, ValueError):
    """The master key is missing, unreadable, malformed, or not the one that wrapped the
    store's data keys. Nothing was written.

    ``reason_code``: ``master_key_missing`` (the store's data keys are wrapped and no master
    key is configured), ``master_key_unreadable`` (the key file cannot be read),
    ``master_key_invalid`` (not 32 bytes, or not raw/hex/base64 text of 32 bytes),
    ``master_key_mismatch`` (another key wrapped the data keys).
    """

    reason_code = "master_key_mismatch"


class KeyStoreError(EncryptionError, OSError):
    """The key store cannot be read or written (damaged file, disk error); names the file."""

    reason_code = "key_store_unavailable"


class DataKeyMissingError(EncryptionError, LookupError):
    """A sealed payload names a data key the key store has never held (a store restored
    without its ``keys`` folder, or a foreign payload). An erased key is not missing: its
    payloads read as erased."""

    reason_code = "data_key_missing"


class NamespaceErasedError(EncryptionError, ValueError):
    """The namespace was erased (its data key destroyed); nothing more can be written to it.
    Use another principal or scope id for new memories."""

    reason_code = "namespace_erased"


class EncryptionNotConfiguredError(EncryptionError, ValueError):
    """Erasure or key rotation was asked of a store that keeps payloads in clear (no master
    key configured): destroying keys cannot erase clear text."""

    reason_code = "encryption_off"
