"""Keyed digests: the ids a store derives from names and statements (issue 36, item 2).

A stream id, a ``namespace:``/``key:`` tag or a key store record is derived from names (a
namespace's parts, a session id, a normalized statement, a subject and predicate). Derived
with a public function (uuid5), anyone holding a store's files could hash a guessed
statement or person's name and find the matching id, even after the namespace was erased.
The store's **id format** (recorded in its key store, :class:`~memory_ledger.ledger.
key_store.KeyStoreState` ``id_format``) says how they are derived:

- format 1 (:data:`ID_FORMAT_UNKEYED`): uuid5 of the natural key (:mod:`memory_ledger.
  ledger.ids`), every store written before keyed digests. Such a store keeps format 1 for
  ever: its ids are inside its hash-chained records, so they cannot change.
- format 2 (:data:`ID_FORMAT_KEYED`, new stores): HMAC-SHA256 (RFC 2104) of the same
  natural key, its first 16 bytes made a version-8 UUID (RFC 9562, section 5.8), under

  - the **store key** for the ids of a namespace, tenant and principal (the key store's
    records and the ``namespace:`` tag: an erasure by tenant or principal must find them
    from the names): 32 random bytes in the key store, wrapped by the master key once the
    store encrypts, in clear in a store without a master key;
  - the **namespace key** for everything inside a namespace (session, memory and
    ``forget_all`` stream ids, ``key:`` tags, command ids): in an encrypted store,
    HMAC-SHA256 of the namespace's data key, so it is destroyed with that key by an
    erasure; in a store without a master key (or one that held events in clear before it
    encrypted, ``clear_until > 0``), HMAC-SHA256 of the store key and the namespace.

Ids stay deterministic for whoever holds the keys (a retried command, a replay); verifying
the chain or a receipt never needs a key, since ids are stored in the records.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from uuid import UUID, SafeUUID, uuid5

from memory_ledger.ledger import ids
from memory_ledger.ledger.ids import ID_ROOT, Namespace, normalize_statement

__all__ = [
    "CURRENT_ID_FORMAT",
    "ID_FORMAT_KEYED",
    "ID_FORMAT_UNKEYED",
    "UNKEYED",
    "CallDigests",
    "IdDigests",
    "keyed_uuid",
]

ID_FORMAT_UNKEYED = 1
"""Ids are uuid5 of natural keys (stores written before keyed digests)."""
ID_FORMAT_KEYED = 2
"""Ids are keyed digests (HMAC-SHA256 truncated to a version-8 UUID)."""
CURRENT_ID_FORMAT = ID_FORMAT_KEYED
"""The id format of a store created now."""

_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_SET = (0x8000 << 48) | (8 << 76)
_new_uuid = object.__new__
_set = object.__setattr__
_UNKNOWN_SAFETY = SafeUUID.unknown  # an enum member read once, not per derived id


def keyed_uuid(key: bytes, name: str) -> UUID:
    """The version-8 UUID of ``name`` under ``key``: the first 16 bytes of
    HMAC-SHA256(key, UTF-8 of name), with the version (8) and variant bits of RFC 9562 set.

    :raises UnicodeEncodeError: ``name`` holds a lone surrogate.
    """
    number = int.from_bytes(hmac.digest(key, name.encode("utf-8"), hashlib.sha256)[:16])
    derived = _new_uuid(UUID)
    _set(derived, "int", (number & _CLEAR) | _SET)
    _set(derived, "is_safe", _UNKNOWN_SAFETY)
    return derived


def _unkeyed_namespace_key(namespace: Namespace) -> bytes:
    return b""


class IdDigests:
    """How one store derives ids from names (see the module doc).

    :param id_format: :data:`ID_FORMAT_UNKEYED` or :data:`ID_FORMAT_KEYED`.
    :param store_key: returns the store key (32 bytes; asked only by format 2).
    :param namespace_key: returns a namespace's key (32 bytes; asked only by format 2).
    """

    def __init__(
        self,
        id_format: int,
        store_key: Callable[[], bytes] = bytes,
        namespace_key: Callable[[Namespace], bytes] = _unkeyed_namespace_key,
    ) -> None:
        self.id_format = id_format
        self.keyed = id_format >= ID_FORMAT_KEYED
        self._store_key = store_key
        self._namespace_key = namespace_key

    def adopt(self, id_format: int) -> None:
        """Derive as ``id_format`` from now on: the format the key store records, written
        by another process (or a migration) after this one read it."""
        self.id_format = id_format
        self.keyed = id_format >= ID_FORMAT_KEYED

    def for_call(self) -> IdDigests:
        """The same derivation, remembering each id it derives for the life of the returned
        object (:class:`CallDigests`): one command derives a memory id in its decision, its
        reconciliation and its outcome, and its namespace tag for every event."""
        return CallDigests(self)

    def _key(self, namespace: Namespace) -> str:
        """``namespace.key()``, the namespace part of every name derived here."""
        return namespace.key()

    # Ids under the store key ---------------------------------------------------------------

    def namespace_id(self, namespace: Namespace) -> UUID:
        """Id of ``namespace`` (its key store record, its ``namespace:`` tag, the ids an
        erasure record names)."""
        name = "namespace\x1f" + self._key(namespace)
        return keyed_uuid(self._store_key(), name) if self.keyed else uuid5(ID_ROOT, name)

    def tenant_id(self, tenant: str) -> UUID:
        """Id of a tenant name (what the key store keeps instead of the name)."""
        name = "tenant\x1f" + tenant
        return keyed_uuid(self._store_key(), name) if self.keyed else uuid5(ID_ROOT, name)

    def principal_id(self, tenant: str, principal: str) -> UUID:
        """Id of a (tenant, principal) pair."""
        name = "principal\x1f" + tenant + "\x1f" + principal
        return keyed_uuid(self._store_key(), name) if self.keyed else uuid5(ID_ROOT, name)

    def namespace_ids(self, namespace: Namespace) -> tuple[UUID, UUID, UUID]:
        """``(namespace id, tenant id, principal id)`` of ``namespace``."""
        return (
            self.namespace_id(namespace),
            self.tenant_id(namespace.tenant),
            self.principal_id(namespace.tenant, namespace.principal),
        )

    def namespace_tag(self, namespace: Namespace) -> str:
        """Tag of every memory-stream event of ``namespace`` (``namespace:<namespace id>``)."""
        return f"namespace:{self.namespace_id(namespace)}"

    # Ids under the namespace key -----------------------------------------------------------

    def _inside(self, namespace: Namespace, name: str) -> UUID:
        return keyed_uuid(self._namespace_key(namespace), name)

    def key_tag(self, namespace: Namespace, key: tuple[str, str]) -> str:
        """Tag of every activation under the match key ``key``
        (:func:`~memory_ledger.ledger.ids.subject_predicate_key`)."""
        name = "key\x1f" + self._key(namespace) + "\x1f" + key[0] + "\x1f" + key[1]
        return f"key:{self._inside(namespace, name) if self.keyed else uuid5(ID_ROOT, name)}"

    def session_stream_id(self, namespace: Namespace, session_id: str) -> UUID:
        """Stream id of a session of ``namespace``."""
        if not self.keyed:
            return ids.session_stream_id(namespace, session_id)
        return self._inside(namespace, "session\x1f" + self._key(namespace) + "\x1f" + session_id)

    def memory_id(self, namespace: Namespace, normalized_statement: str) -> UUID:
        """Stream id of the canonical memory of a normalized statement of ``namespace``."""
        if not self.keyed:
            return ids.memory_id(namespace, normalized_statement)
        return self._inside(
            namespace, "memory\x1f" + self._key(namespace) + "\x1f" + normalized_statement
        )

    def command_id(
        self, namespace: Namespace, session_stream: UUID, turn_id: int, intent: str, statement: str
    ) -> UUID:
        """Id of an explicit command of a session of ``namespace`` (a retried identical
        command is the same command; :func:`~memory_ledger.ledger.ids.command_id`)."""
        if not self.keyed:
            return ids.command_id(session_stream, turn_id, intent, statement)
        name = f"command\x1f{session_stream}\x1f{turn_id}\x1f{intent}\x1f"
        return self._inside(namespace, name + normalize_statement(statement))

    def bulk_forget_command_id(self, namespace: Namespace, after: int) -> UUID:
        """Command id of the ``forget_all`` of ``namespace`` decided at position ``after``."""
        name = f"forget-all\x1f{namespace.key()}\x1f{after}"
        return self._inside(namespace, name) if self.keyed else uuid5(ID_ROOT, name)

    def bulk_forget_stream_id(self, namespace: Namespace, command: UUID) -> UUID:
        """Stream id of one ``forget_all`` command over ``namespace``."""
        if not self.keyed:
            return ids.bulk_forget_stream_id(namespace, command)
        return self._inside(namespace, f"forget-all\x1f{namespace.key()}\x1f{command}")


UNKEYED = IdDigests(ID_FORMAT_UNKEYED)
"""The derivation of id format 1 (uuid5 of natural keys; no key)."""


class CallDigests(IdDigests):
    """:class:`IdDigests` that remember the namespace ids and the ids under a namespace key
    they derived (a plain dict, dropped with the object). Made by
    :meth:`IdDigests.for_call` for ONE command or append and never kept beyond it, so no
    name (a statement) outlives the call and an erased key is asked again by the next one.
    """

    def __init__(self, base: IdDigests) -> None:
        super().__init__(base.id_format, base._store_key, base._namespace_key)
        self._inside_ids: dict[tuple[Namespace, str], UUID] = {}
        self._namespace_ids: dict[Namespace, UUID] = {}
        self._namespace_tags: dict[Namespace, str] = {}
        self._key_tags: dict[tuple[Namespace, tuple[str, str]], str] = {}
        self._last: tuple[Namespace | None, str] = (None, "")
        self.generation: int | None = None
        """The keyring generation these digests were made at (``Keyring.call_digests``;
        None: unknown). While the keyring has not reloaded since, what they derive is what
        fresh digests would derive (``Keyring.still_current``)."""

    def _key(self, namespace: Namespace) -> str:
        """:meth:`IdDigests._key`, formatted once for the namespace a call derives under."""
        last, key = self._last
        if namespace is not last:
            key = namespace.key()
            self._last = (namespace, key)
        return key

    def for_call(self) -> IdDigests:
        """This object (already one call's)."""
        return self

    def namespace_id(self, namespace: Namespace) -> UUID:
        """:meth:`IdDigests.namespace_id`, derived once per call."""
        found = self._namespace_ids.get(namespace)
        if found is None:
            found = self._namespace_ids[namespace] = super().namespace_id(namespace)
        return found

    def namespace_tag(self, namespace: Namespace) -> str:
        """:meth:`IdDigests.namespace_tag`, formatted once per call (every event of a batch
        carries it)."""
        found = self._namespace_tags.get(namespace)
        if found is None:
            found = self._namespace_tags[namespace] = super().namespace_tag(namespace)
        return found

    def key_tag(self, namespace: Namespace, key: tuple[str, str]) -> str:
        """:meth:`IdDigests.key_tag`, derived and formatted once per call (a batch's
        decision reads under it, its activation is tagged with it)."""
        found = self._key_tags.get((namespace, key))
        if found is None:
            found = self._key_tags[(namespace, key)] = super().key_tag(namespace, key)
        return found

    def _inside(self, namespace: Namespace, name: str) -> UUID:
        found = self._inside_ids.get((namespace, name))
        if found is None:
            found = self._inside_ids[(namespace, name)] = super()._inside(namespace, name)
        return found
