"""The master key: what wraps (encrypts) the per-namespace data keys of a store.

The host supplies it; memory-ledger never stores it beside the ledger. Three ways:

- a key file of 32 bytes (raw, or as 64 hex digits, or as base64 text), named by the host:
  ``master_key_file`` in ``[memory]`` of ``memory-ledger.toml``, the
  ``MEMORY_LEDGER_MASTER_KEY_FILE`` environment variable (read by the CLI and by
  :func:`memory_ledger.open`), or ``master_key=Path(...)`` in the Python API;
- 32 bytes, or a callable returning them (e.g. fetched from a secrets manager);
- a :class:`KeyWrapper` of the host's own, for a KMS that wraps and unwraps keys itself
  (the master key then never enters this process).

A local master key wraps data keys with AES key wrap (RFC 3394, ``cryptography``'s
``aes_key_wrap``), whose integrity check also detects a wrong master key on unwrapping. Its
``key_id`` is a fingerprint (HMAC-SHA256 of a fixed label, 16 hex digits), recorded in the key
store so that a wrong key is refused before anything is written, even by an empty store.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from memory_ledger.ledger.key_errors import MasterKeyError

__all__ = [
    "ENV_MASTER_KEY_FILE",
    "KEY_SIZE",
    "KeyWrapper",
    "LocalMasterKey",
    "MasterKeySpec",
    "master_key_from",
    "read_master_key_file",
]

KEY_SIZE = 32
"""Bytes of a master key and of a data key (AES-256)."""

ENV_MASTER_KEY_FILE = "MEMORY_LEDGER_MASTER_KEY_FILE"
"""The environment variable naming the master key file (read, never written)."""

_FINGERPRINT_LABEL = b"memory-ledger master key fingerprint v1"


@runtime_checkable
class KeyWrapper(Protocol):
    """Wraps and unwraps data keys (a local master key, or a host's KMS client).

    ``key_id`` names the wrapping key (stored with the wrapped keys; never secret).
    ``unwrap`` raises :class:`MasterKeyError` (``master_key_mismatch``) when ``wrapped`` was
    not wrapped by this key.
    """

    @property
    def key_id(self) -> str: ...

    def wrap(self, data_key: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes) -> bytes: ...


class LocalMasterKey:
    """A 32-byte master key held in this process; wraps with AES key wrap (RFC 3394).

    :raises MasterKeyError: ``key`` is not 32 bytes (``master_key_invalid``).
    """

    __slots__ = ("_key", "key_id")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes | bytearray) or len(key) != KEY_SIZE:
            size = len(key) if isinstance(key, bytes | bytearray) else type(key).__name__
            msg = f"a master key is {KEY_SIZE} bytes, got {size}"
            raise MasterKeyError(msg, reason_code="master_key_invalid")
        self._key = bytes(key)
        digest = hmac.new(self._key, _FINGERPRINT_LABEL, hashlib.sha256).hexdigest()
        self.key_id = f"local:{digest[:16]}"

    def wrap(self, data_key: bytes) -> bytes:
        """``data_key`` (32 bytes) wrapped: 40 bytes."""
        return aes_key_wrap(self._key, data_key)

    def unwrap(self, wrapped: bytes) -> bytes:
        """The data key inside ``wrapped``.

        :raises MasterKeyError: ``wrapped`` was wrapped by another key (``master_key_mismatch``).
        """
        try:
            return aes_key_unwrap(self._key, wrapped)
        except (InvalidUnwrap, ValueError):
            msg = f"the master key {self.key_id} did not wrap this data key"
            raise MasterKeyError(msg, reason_code="master_key_mismatch") from None

    def __repr__(self) -> str:
        return f"LocalMasterKey({self.key_id!r})"


def _parse_key_text(data: bytes) -> bytes | None:
    """32 bytes from a key file's content: raw, 64 hex digits or base64 text; else None."""
    if len(data) == KEY_SIZE:
        return data
    text = data.strip()
    if len(text) == 2 * KEY_SIZE:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            pass
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return decoded if len(decoded) == KEY_SIZE else None


def read_master_key_file(path: str | os.PathLike[str]) -> LocalMasterKey:
    """The master key in the file at ``path`` (32 raw bytes, 64 hex digits or base64).

    :raises MasterKeyError: the file cannot be read (``master_key_unreadable``) or does not
        hold 32 bytes (``master_key_invalid``); the message names the file, never its content.
    """
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        if _parse_key_text(os.fsencode(name)) is not None:
            # A key written as text (hex or base64, as read from an environment variable or
            # a secret manager) passed where a path goes: never echoed.
            msg = (
                f"cannot read the master key file: the path given is {len(name)} characters "
                f"that read as a {KEY_SIZE}-byte key in hex or base64, not a file's path (not "
                "shown); pass the key as bytes (bytes.fromhex(...) or base64.b64decode(...)) "
                "or write it to a file and pass that file's path"
            )
        else:
            msg = f"cannot read the master key file {name!r}: {e.strerror or type(e).__name__}"
        raise MasterKeyError(msg, reason_code="master_key_unreadable") from None
    key = _parse_key_text(data)
    if key is None:
        msg = (
            f"the master key file {name!r} does not hold a {KEY_SIZE}-byte key "
            f"({KEY_SIZE} raw bytes, {2 * KEY_SIZE} hex digits or base64)"
        )
        raise MasterKeyError(msg, reason_code="master_key_invalid")
    return LocalMasterKey(key)


MasterKeySpec = KeyWrapper | bytes | str | os.PathLike[str] | Callable[[], bytes]
"""What a host may pass as ``master_key``: a :class:`KeyWrapper`, 32 bytes, a key file path,
or a callable returning 32 bytes."""


def master_key_from(spec: MasterKeySpec | None) -> KeyWrapper | None:
    """The :class:`KeyWrapper` for ``spec`` (None: no master key, payloads stay in clear).

    :raises MasterKeyError: the file cannot be read or the key is not 32 bytes; a callable
        that raises is reported as ``master_key_unreadable`` (its message is not repeated:
        it may hold a secret).
    """
    if spec is None or isinstance(spec, KeyWrapper):
        return spec
    if isinstance(spec, bytes | bytearray):
        return LocalMasterKey(bytes(spec))
    if isinstance(spec, str | os.PathLike):
        if not str(spec).strip():
            msg = "master_key is an empty path (pass None for no encryption)"
            raise MasterKeyError(msg, reason_code="master_key_invalid")
        return read_master_key_file(spec)
    if callable(spec):
        try:
            key = spec()
        except Exception as e:
            msg = f"the master key callable failed ({type(e).__name__})"
            raise MasterKeyError(msg, reason_code="master_key_unreadable") from None
        return LocalMasterKey(key)
    msg = (
        "master_key must be a key file path, 32 bytes, a callable or a KeyWrapper, "
        f"got {type(spec).__name__}"
    )
    raise MasterKeyError(msg, reason_code="master_key_invalid")
