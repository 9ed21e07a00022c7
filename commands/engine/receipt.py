"""Erasure receipts (issue 36 item 1): the signed document an erasure writes when given a
signing key, stating what was erased and how to check it, holding nothing of what was.

The format (``FORMAT``), shared by :mod:`memory_ledger.replay.audit.receipts` (which verifies it):
a JSON object, canonical (keys sorted, no whitespace, UTF-8), with

- ``format``, ``store_id`` (the ledger's random id, ``ledger/store_identity.py``),
  ``ledger`` (``lmdb`` or ``postgresql``), ``level`` (``tenant``, ``principal`` or
  ``namespace``), ``command_id``, ``namespaces`` (how many were erased);
- ``salt`` (16 random bytes, base64) and keyed digests, HMAC-SHA256 keyed by the salt
  (:func:`name_digest`): ``match`` of what the erasure named (``tenant\\x1fT``,
  ``principal\\x1fT\\x1fP`` or ``namespace\\x1fT\\x1fP\\x1fS``), ``namespace_digests`` of
  each erased namespace the engine could name (from its read models, before the erasure).
  Whoever knows the names and holds the receipt recomputes them; whoever has only the
  receipt learns nothing but can confirm a guess (that is what a receipt is for); a fresh
  salt per receipt keeps receipts and stores from being linked by digest;
- ``erasure``: ``position`` and ``record_hash`` (hex) of the ``NamespaceErased`` record,
  ``chain_head``: ``position`` and ``hash`` of the ledger's last record when the receipt was
  made; ``key_ids``: the destroyed data keys; ``erased_at`` (ISO 8601) and ``requested_by``;
- ``scan``: the plaintext scan run in process with the names in memory, before the receipt
  is written: ``files`` (paths relative to the store folder), ``tables`` (PostgreSQL),
  ``terms`` (how many names were looked for), ``shared`` (digests of the erased names a
  remaining namespace still uses, which were not looked for), ``hits`` (always 0 in a
  receipt: an erasure that finds a hit raises instead);
- ``signer`` (sha256 hex of the raw Ed25519 public key) and ``signature``: base64 of the
  Ed25519 signature of the canonical JSON of every other field.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from memory_ledger.commands.store import MemoryStore
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import NamespaceMatch

if TYPE_CHECKING:
    from memory_ledger.commands.engine.encryption import ErasureReport
    from memory_ledger.ledger.records import LedgerLog

__all__ = [
    "FORMAT",
    "ErasingEngine",
    "ReceiptScanError",
    "SigningKeyError",
    "SigningKeySpec",
    "canonical_json",
    "load_signing_key",
    "make_receipt",
    "match_text",
    "name_digest",
    "scan_store",
    "scan_terms",
    "signer_id",
    "store_id_of",
]

FORMAT = "memory-ledger-erasure-receipt/1"
"""The ``format`` field of every receipt this release writes."""

SigningKeySpec = str | os.PathLike[str] | Ed25519PrivateKey
"""A signing key: a PEM (PKCS#8) private key file, or the key itself."""


class ErasingEngine(MemoryStore, Protocol):
    """What a receipt reads of the engine that erased: the store (:class:`MemoryStore`)
    and its ledger's hash-chained log."""

    def ledger_log(self) -> LedgerLog: ...


class SigningKeyError(MemoryLedgerError, ValueError):
    """The signing key given to ``erase`` cannot be read or is not an Ed25519 private key
    (nothing was erased); the message names the file, never its bytes."""

    reason_code = "signing_key_invalid"


class ReceiptScanError(MemoryLedgerError):
    """The plaintext scan an erasure runs before writing its receipt found an erased name
    in clear in a file or table of the store (the erasure is done; no receipt is written).
    ``where`` names the file or table, never the name. ``readers_open``: other processes
    held projection files of the store when a signed erasure was asked, so their files
    could not be scanned clean; nothing was erased."""

    reason_code = "plaintext_found"

    def __init__(
        self, message: str, *, where: Sequence[str] = (), reason_code: str | None = None
    ) -> None:
        super().__init__(message, reason_code=reason_code)
        self.where = tuple(where)


def load_signing_key(spec: SigningKeySpec) -> Ed25519PrivateKey:
    """The Ed25519 private key ``spec`` names (a PEM file made by ``memory-ledger keys new
    --signing``, unencrypted PKCS#8).

    :raises SigningKeyError: the file cannot be read or holds no Ed25519 private key.
    """
    if isinstance(spec, Ed25519PrivateKey):
        return spec
    path = Path(spec)
    try:
        data = path.read_bytes()
    except OSError as e:
        msg = f"cannot read the signing key {str(path)!r}: {e.strerror or type(e).__name__}"
        raise SigningKeyError(msg, reason_code="signing_key_unreadable") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, Ed25519PrivateKey):
        msg = f"{str(path)!r} holds no Ed25519 private key (make one: keys new --signing)"
        raise SigningKeyError(msg)
    return key


def signer_id(public: Ed25519PublicKey) -> str:
    """sha256 hex of the raw 32-byte public key: which key signed a receipt."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def canonical_json(document: Mapping[str, Any]) -> bytes:
    """``document`` as canonical JSON: keys sorted, no whitespace, UTF-8, no NaN."""
    text = json.dumps(
        document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def name_digest(salt: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` (UTF-8) keyed by ``salt``, hex."""
    return hmac.new(salt, text.encode("utf-8"), hashlib.sha256).hexdigest()


def match_text(level: str, parts: Sequence[str]) -> str:
    """What the receipt's ``match`` digest covers: ``level`` then the names of that level
    (tenant; tenant, principal; tenant, principal, scope id), joined by ``\\x1f``."""
    count = {"tenant": 1, "principal": 2}.get(level, 3)
    return "\x1f".join([level, *parts[:count]])


def scan_terms(
    erased: Iterable[Namespace], match: NamespaceMatch, live: Iterable[Namespace]
) -> tuple[list[str], list[str]]:
    """``(looked for, shared)``: the names of the erased namespaces and of the match, less
    those a remaining namespace still uses (any part of it), which are ``shared``."""
    names = {p for ns in erased for p in (ns.tenant, ns.principal, ns.scope_id)}
    names.update(p for p in (match.tenant, match.principal, match.scope_id) if p is not None)
    in_use = {p for ns in live for p in (ns.tenant, ns.principal, ns.scope_id)}
    return sorted(names - in_use), sorted(names & in_use)


def _hits(data: bytes, needles: Sequence[bytes]) -> bool:
    return any(needle in data for needle in needles)


_CHUNK = 1 << 20


def _file_hits(path: Path, needles: Sequence[bytes]) -> bool:
    """Whether the file holds one of ``needles``, read in 1 MiB chunks that overlap by the
    longest needle (a name across two chunks is seen).

    :raises OSError: the file cannot be read.
    """
    if not needles:
        return False
    overlap = max(len(n) for n in needles) - 1
    tail = b""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            data = tail + chunk
            if _hits(data, needles):
                return True
            tail = data[-overlap:] if overlap else b""
    return False


def scan_store(
    root: Path, terms: Sequence[str], tables: Mapping[str, Iterable[bytes]] = {}
) -> tuple[list[str], list[str], list[str]]:
    """Look for each of ``terms`` (UTF-8) in every regular file under ``root`` and in the
    chunks of each of ``tables``; return ``(files examined, tables examined, where found)``
    (paths relative to ``root``, sorted). Unreadable files count as found (fail closed)."""
    needles = [t.encode("utf-8") for t in terms if t]
    files: list[str] = []
    found: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        name = str(path.relative_to(root))
        files.append(name)
        try:
            hit = _file_hits(path, needles)
        except OSError:
            hit = True  # unreadable: fail closed
        if hit:
            found.append(name)
    for table, chunks in tables.items():
        if any(_hits(chunk, needles) for chunk in chunks):
            found.append(table)
    return files, sorted(tables), found


def store_id_of(recorder: object) -> str:
    """The store id of an open ledger (LMDB ``meta`` or PostgreSQL ``<events>_meta``)."""
    known = getattr(recorder, "store_id", None)
    if isinstance(known, str) and known:
        return known
    env = getattr(getattr(recorder, "datastore", None), "env", None)  # LMDB: ``meta``
    meta = getattr(recorder, "_meta", None)
    if env is not None and meta is not None:
        with env.begin(write=False) as txn:
            value = txn.get(b"store_id", db=meta)
        if value:
            return bytes(value).decode("ascii")
    return ""


def _postgres_tables(engine: ErasingEngine) -> dict[str, Iterable[bytes]]:
    """The PostgreSQL tables the scan reads: the events table (its records, as stored, hash
    and body) and the keys table (its state)."""
    import msgspec

    recorder = engine.ledger_log()
    events = str(getattr(recorder, "events_table_name", "events"))
    log = engine.ledger_log()
    state = engine.keyring.store.read()
    return {
        events: (value for _, value in log.iter_log()),
        f"{events}_keys": [msgspec.msgpack.encode(state)],
    }


def make_receipt(
    engine: ErasingEngine,
    match: NamespaceMatch,
    report: ErasureReport,
    erased: Sequence[Namespace],
    key: Ed25519PrivateKey,
) -> bytes:
    """The signed receipt of the erasure ``report`` made (``erased``: the namespaces of the
    match the read models named before it); see the module doc for the fields.

    :raises ReceiptScanError: an erased name is in clear in a file or table of the store.
    """
    from memory_ledger.ledger.events import NamespaceErased
    from memory_ledger.ledger.ids import erasure_stream_id
    from memory_ledger.projections.erasure import present_namespaces

    assert report.command_id is not None and report.position is not None
    salt = os.urandom(16)
    postgres = type(engine.ledger_log()).__module__.endswith("ledger.postgres")
    with engine.read_models() as live:
        remaining = present_namespaces(live.conn)
    terms, shared = scan_terms(erased, match, remaining)
    tables = _postgres_tables(engine) if postgres else {}
    files, table_names, found = scan_store(engine.path, terms, tables)
    if found:
        msg = (
            f"the erasure is done, but {len(found)} file(s) or table(s) of the store still "
            f"hold an erased name in clear ({', '.join(found)}): no receipt was written"
        )
        raise ReceiptScanError(msg, where=found)
    log = engine.ledger_log()
    head = engine.head
    record_hash = next(iter(log.iter_log(report.position, 1)))[1][:32]
    head_hash = next(iter(log.iter_log(head, 1)))[1][:32]
    event = next(
        e
        for e in engine.load_stream(erasure_stream_id(report.command_id))
        if isinstance(e, NamespaceErased)
    )
    parts = [match.tenant, match.principal or "", match.scope_id or ""]
    document: dict[str, Any] = {
        "format": FORMAT,
        "store_id": store_id_of(engine.ledger_log()),
        "ledger": "postgresql" if postgres else "lmdb",
        "level": match.level,
        "command_id": str(report.command_id),
        "namespaces": report.namespaces,
        "salt": base64.b64encode(salt).decode("ascii"),
        "match": name_digest(salt, match_text(match.level, parts)),
        "namespace_digests": sorted(
            name_digest(salt, match_text("namespace", [n.tenant, n.principal, n.scope_id]))
            for n in erased
        ),
        "erasure": {"position": report.position, "record_hash": record_hash.hex()},
        "chain_head": {"position": head, "hash": head_hash.hex()},
        "key_ids": sorted(str(k) for k in event.key_ids),
        "erased_at": event.recorded_at.isoformat(),
        "requested_by": event.requested_by,
        "scan": {
            "files": files,
            "tables": table_names,
            "terms": len(terms),
            "shared": sorted(name_digest(salt, "name\x1f" + s) for s in shared),
            "hits": 0,
        },
        "signer": signer_id(key.public_key()),
    }
    signature = key.sign(canonical_json(document))
    document["signature"] = base64.b64encode(signature).decode("ascii")
    return canonical_json(document)
