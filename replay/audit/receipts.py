"""Verify an erasure receipt (issue 36 item 1; the format: ``commands/engine/receipt.py``).

:func:`verify_receipt` checks, in order, stopping at the first failure (a
:class:`ReceiptVerificationError` whose ``reason_code`` names it):

1. ``receipt_malformed``: not a canonical JSON receipt of a known format;
   ``wrong_public_key``: signed by another key (``signer``); ``bad_signature``: any byte
   changed since it was signed.
2. With the store (its folder, and the PostgreSQL ledger URL when the ledger is there),
   opened read-only without a master key and without the engine (which would repair what
   is checked here): ``store_mismatch``: another store id; ``chain_broken``: the hash
   chain does not verify through the receipt's positions (``replay.audit.verify.check_chain``);
   ``erasure_record_missing``: the ledger ends before the erasure's position (a store
   restored from before the erasure); ``erasure_record_mismatch``: the record there has
   another hash, or is not that erasure (command id, destroyed keys);
   ``chain_head_mismatch``: the record at the receipt's chain head has another hash;
   ``data_key_remains``: the key store (``keys/`` or the ``<events>_keys`` table) holds a
   live key of an erased namespace (a key file copied aside and put back).
3. Given the names of one erased namespace (by the data subject, who knows them):
   ``namespace_not_in_receipt``: their digest is not the receipt's ``match``;
   ``plaintext_found``: a name the erasure took (less those a remaining namespace shares,
   per the receipt's ``shared`` digests) is in clear in a file of the store folder or a
   table of its PostgreSQL ledger.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from memory_ledger.commands.engine.receipt import (
    FORMAT,
    canonical_json,
    match_text,
    name_digest,
    scan_store,
    signer_id,
    store_id_of,
)
from memory_ledger.ledger.errors import LedgerTamperedError, MemoryLedgerError
from memory_ledger.ledger.events import NamespaceErased
from memory_ledger.ledger.ids import erasure_stream_id
from memory_ledger.ledger.key_store import FileKeyStore, KeyStoreState
from memory_ledger.ledger.records import LedgerLog
from memory_ledger.replay.audit.verify import check_chain

__all__ = [
    "ReceiptCheck",
    "ReceiptVerificationError",
    "load_public_key",
    "verify_receipt",
    "write_receipt",
]


class ReceiptVerificationError(MemoryLedgerError):
    """An erasure receipt did not verify; ``reason_code`` names the check that failed (the
    module doc lists them) and the message says what was found, never an erased name."""

    reason_code = "receipt_invalid"


class ReceiptCheck(msgspec.Struct, frozen=True, kw_only=True):
    """What a verification checked (each True when done and passed): the signature always;
    ``store`` the chain, the erasure record and the key store; ``names`` the namespace's
    names against the receipt and the store's bytes. ``receipt`` is the decoded document."""

    signature: bool
    store: bool
    names: bool
    receipt: dict[str, Any]


def _fail(reason: str, message: str) -> ReceiptVerificationError:
    return ReceiptVerificationError(message, reason_code=reason)


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """The Ed25519 public key in the PEM file ``path`` (``keys new --signing`` writes it
    beside the private key, as ``FILE.pub``).

    :raises ReceiptVerificationError: unreadable or not an Ed25519 public key
        (``reason_code`` ``public_key_invalid``).
    """
    try:
        key = serialization.load_pem_public_key(Path(path).read_bytes())
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PublicKey):
        msg = f"{str(path)!r} holds no Ed25519 public key (keys new --signing writes FILE.pub)"
        raise _fail("public_key_invalid", msg)
    return key


def write_receipt(path: str | os.PathLike[str], receipt: bytes) -> None:
    """Write ``receipt`` (digests, positions and key ids only) to the NEW file ``path``.

    :raises ReceiptVerificationError: never; an ``OSError`` (exists, no folder) propagates
        as :class:`~memory_ledger.replay.audit.errors.OutputExistsError` for an existing file.
    """
    from memory_ledger.replay.audit.errors import OutputExistsError

    try:
        with open(path, "xb") as handle:
            handle.write(receipt)
    except FileExistsError:
        msg = f"{str(path)!r} exists; a receipt is never overwritten"
        raise OutputExistsError(msg, path=str(path)) from None


def _signed(receipt: bytes, public: Ed25519PublicKey) -> dict[str, Any]:
    try:
        document = json.loads(receipt)
        signature = base64.b64decode(document.pop("signature"), validate=True)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, RecursionError):
        msg = "not an erasure receipt (JSON with a base64 signature)"
        raise _fail("receipt_malformed", msg) from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise _fail("receipt_malformed", f"not an erasure receipt of format {FORMAT!r}")
    if document.get("signer") != signer_id(public):
        msg = "the receipt was signed by another key than the public key given"
        raise _fail("wrong_public_key", msg)
    body = canonical_json(document)
    try:
        public.verify(signature, body)
    except InvalidSignature:
        msg = "the receipt's signature does not verify: it was changed after it was signed"
        raise _fail("bad_signature", msg) from None
    document["signature"] = base64.b64encode(signature).decode("ascii")
    if canonical_json(document) != receipt.strip():
        msg = "the receipt is not in canonical form: it was changed after it was signed"
        raise _fail("bad_signature", msg)
    document.pop("signature")
    return document


_FIELDS: dict[str, type | tuple[type, ...]] = {
    "store_id": str,
    "level": str,
    "command_id": str,
    "namespaces": int,
    "salt": str,
    "match": str,
    "erasure": dict,
    "chain_head": dict,
    "key_ids": list,
    "scan": dict,
}


def _well_formed(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` when it has every field a store check reads, of the right type."""
    try:
        ok = all(isinstance(document[k], t) for k, t in _FIELDS.items())
        ok = ok and all(
            isinstance(document[part][field], (int, str))
            for part, field in (
                ("erasure", "position"),
                ("erasure", "record_hash"),
                ("chain_head", "position"),
                ("chain_head", "hash"),
            )
        )
        ok = ok and isinstance(document["scan"]["shared"], list)
        UUID(document["command_id"])
        base64.b64decode(document["salt"], validate=True)
    except (KeyError, TypeError, ValueError, binascii.Error):
        ok = False
    if not ok:
        raise _fail("receipt_malformed", "the receipt lacks a field its checks need")
    return document


def _hash_at(log: LedgerLog, position: int) -> bytes | None:
    for at, value in log.iter_log(position, 1):
        return value[:32] if at == position else None
    return None


def _check_ledger(document: dict[str, Any], log: LedgerLog, recorder: Any, where: str) -> None:
    erasure, head = document["erasure"], document["chain_head"]
    if store_id_of(recorder) != document["store_id"]:
        raise _fail("store_mismatch", f"{where} is another store than the receipt's")
    last = log.max_notification_id() or 0
    if last < erasure["position"] or last < head["position"]:
        msg = (
            f"the ledger of {where} ends at position {last}, before the erasure's record "
            f"(position {erasure['position']}): a store restored from before the erasure?"
        )
        raise _fail("erasure_record_missing", msg)
    try:
        check_chain(log, max(erasure["position"], head["position"]), where=where)
    except LedgerTamperedError as e:
        raise _fail("chain_broken", f"the hash chain of {where} does not verify: {e}") from None
    if (_hash_at(log, erasure["position"]) or b"").hex() != erasure["record_hash"]:
        msg = (
            f"the record at position {erasure['position']} of {where} is not the erasure "
            "the receipt names (another hash): a store restored from before the erasure?"
        )
        raise _fail("erasure_record_mismatch", msg)
    if (_hash_at(log, head["position"]) or b"").hex() != head["hash"]:
        msg = f"the record at position {head['position']} of {where} has another hash"
        raise _fail("chain_head_mismatch", msg)


def _erasure_event(document: dict[str, Any], log: LedgerLog, mapper: Any) -> NamespaceErased:
    command = UUID(document["command_id"])
    for record in log.stream_records(erasure_stream_id(command)):
        if record.notification_id != document["erasure"]["position"]:
            continue
        event = mapper.decode(
            record.topic, record.state, record.originator_id, record.originator_version
        )
        if isinstance(event, NamespaceErased) and event.command_id == command:
            if sorted(str(k) for k in event.key_ids) == document["key_ids"]:
                return event
    msg = "the record at the receipt's position is not that erasure (command or keys differ)"
    raise _fail("erasure_record_mismatch", msg)


def _check_keys(event: NamespaceErased, state: KeyStoreState, where: str) -> None:
    keys, namespaces = set(event.key_ids), set(event.namespace_ids)
    live = [
        r for r in state.keys if not r.erased and (r.key_id in keys or r.namespace_id in namespaces)
    ]
    if live:
        msg = (
            f"the key store of {where} holds {len(live)} live data key(s) of the erased "
            "namespaces: a key file kept aside and put back?"
        )
        raise _fail("data_key_remains", msg)


def _scan_names(
    document: dict[str, Any], names: Sequence[str], root: Path, tables: dict[str, Any]
) -> None:
    salt = base64.b64decode(document["salt"])
    level = document["level"]
    if name_digest(salt, match_text(level, names)) != document["match"]:
        msg = f"these names are not those the receipt's erasure named (at {level} level)"
        raise _fail("namespace_not_in_receipt", msg)
    shared = set(document["scan"]["shared"])
    count = {"tenant": 1, "principal": 2}.get(level, 3)
    terms = [n for n in names[:count] if name_digest(salt, "name\x1f" + n) not in shared]
    _, _, found = scan_store(root, terms, tables)
    if found:
        msg = f"an erased name is in clear in: {', '.join(found)}"
        raise _fail("plaintext_found", msg)


def verify_receipt(
    receipt: bytes,
    public_key: Ed25519PublicKey,
    *,
    store: str | os.PathLike[str] | None = None,
    ledger: str | None = None,
    namespace: Sequence[str] | None = None,
) -> ReceiptCheck:
    """Verify ``receipt`` (see the module doc for the checks and their reason codes): its
    signature; with ``store`` (and ``ledger``, a PostgreSQL URL) the store; with
    ``namespace`` (tenant, principal, scope id: the names of one erased namespace) the
    names. Opens the store read-only, with no master key and without the engine.

    :raises ReceiptVerificationError: a check failed (``reason_code`` names it).
    :raises StoreUnavailableError: no store at ``store``.
    :raises LedgerUnavailableError: the PostgreSQL ledger cannot be reached.
    """
    document = _signed(receipt, public_key)
    if store is None:
        return ReceiptCheck(signature=True, store=False, names=False, receipt=document)
    from memory_ledger.commands.engine.ledger_url import open_ledger

    _well_formed(document)
    root = Path(store).absolute()
    opened = open_ledger(root, ledger or None, create=False, read_only=ledger is None or None)
    try:
        recorder: Any = opened.recorder
        if not isinstance(recorder, LedgerLog):  # pragma: no cover (both backends keep one)
            raise _fail("store_mismatch", f"{opened.name} keeps no hash-chained log")
        _check_ledger(document, recorder, recorder, opened.name)
        event = _erasure_event(document, recorder, opened.factory.mapper())
        tables: dict[str, Iterable[bytes]] = {}
        if ledger:
            from memory_ledger.ledger.postgres_keys import PostgresKeyStore

            state = PostgresKeyStore(opened.recorder, read_only=True).read()  # type: ignore[arg-type]
            events = str(getattr(recorder, "events_table_name", "events"))
            tables = {
                events: (value for _, value in recorder.iter_log()),
                f"{events}_keys": [msgspec.msgpack.encode(state)],
            }
        else:
            state = FileKeyStore(root / "keys", read_only=True).read()
        _check_keys(event, state, opened.name)
        if namespace is not None:
            _scan_names(document, list(namespace), root, tables)
    finally:
        with contextlib.suppress(Exception):
            opened.factory.close()
    return ReceiptCheck(signature=True, store=True, names=namespace is not None, receipt=document)
