"""Read an interchange file (:mod:`~memory_ledger.replay.imports.interchange`) into a store.

``import_interchange(engine, namespace, path)`` imports each memory line as ONE command of
``namespace`` (the host's: the file names none): the first version remembered, each later
one a correction of the one before (the full item of each version given, so subject,
predicate, value, kind, source, scope, reason, importance, confidence, tags and evidence come
back as they were), then a pin when it was pinned and a forget at ``forgotten_at`` when it
was forgotten. Every version carries its ``occurred_at`` as its valid time, and a version
marked ``document`` is recorded as a document value (kept exactly, up to 64 KB). A line is all or
nothing; its session id derives from its key (``interchange-<40 hex>``), so a rerun writes
nothing again and an interrupted import resumes.

What commands cannot write comes back as near as they allow: a pruned memory is forgotten
at its prune time, and a contradiction mark is not restored (a ``conflicted`` memory comes
back active); both are counted in ``approximated``. Refused lines (a secret-shaped text,
what validation refuses) are reported by line number and reason code, never their text.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from memory_ledger.commands.canonical.explicit_command import CommandSpec
from memory_ledger.commands.engine.direct import DirectCommands
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.ids import Namespace, normalize_statement
from memory_ledger.replay.imports.errors import ImportSourceError, InterchangeFormatError
from memory_ledger.replay.imports.interchange import (
    INTERCHANGE_FORMAT,
    INTERCHANGE_VERSION,
    READABLE_VERSIONS,
    InterchangeHeader,
    InterchangeMemory,
    InterchangeVersion,
    memory_digest_bytes,
    memory_key,
)
from memory_ledger.replay.imports.shared import REFUSALS, RefusedItem, keyed_session_id

__all__ = ["INTERCHANGE_SESSION_PREFIX", "InterchangeImportReport", "import_interchange"]

INTERCHANGE_SESSION_PREFIX = "interchange-"
"""Session ids of imported interchange lines start with this."""


class InterchangeImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`import_interchange` did: memory ``lines`` read, ``imported`` now,
    ``already`` imported by an earlier run, ``digest`` of the memory lines read
    (:func:`~memory_ledger.replay.imports.interchange.interchange_digest`) and whether it
    equals the header's (``digest_matches``: False for a file changed after its export or
    cut short), ``approximated`` (pruned or conflicted: see the
    module docstring), ``refused`` lines, the ledger head after it and the wall time."""

    path: str
    digest: str
    digest_matches: bool
    lines: int
    imported: int
    already: int
    approximated: int
    refused: tuple[RefusedItem, ...]
    position: int
    seconds: float


def _checked_header(first: bytes, file: Path) -> InterchangeHeader:
    try:
        header = msgspec.json.decode(first, type=InterchangeHeader)
    except msgspec.DecodeError:
        header = None
    if header is None or header.format != INTERCHANGE_FORMAT:
        msg = f"{str(file)!r} does not start with a {INTERCHANGE_FORMAT} header"
        raise InterchangeFormatError(
            msg, path=str(file), line=1, reason_code="interchange_version_unknown"
        )
    if header.version not in READABLE_VERSIONS:
        readable = ", ".join(str(v) for v in sorted(READABLE_VERSIONS))
        msg = (
            f"{str(file)!r} is interchange version {header.version}; this version reads "
            f"{readable} (writes {INTERCHANGE_VERSION})"
        )
        raise InterchangeFormatError(
            msg, path=str(file), line=1, reason_code="interchange_version_unknown"
        )
    return header


def read_interchange(
    path: str | Path,
) -> tuple[InterchangeHeader, Iterator[tuple[int, InterchangeMemory]]]:
    """The header of the interchange file ``path`` (checked now) and an iterator over its
    memory lines with their 1-based line numbers.

    :raises ImportSourceError: no file at ``path`` (``import_source_missing``).
    :raises InterchangeFormatError: no header of this format and version
        (``interchange_version_unknown``), or (while iterating) a line that is not a memory
        of it (``interchange_line_invalid``, naming the line).
    """
    file = Path(path)
    if not file.is_file():
        msg = f"no interchange file at {str(file)!r}"
        raise ImportSourceError(msg, path=str(file), reason_code="import_source_missing")
    with file.open("rb") as handle:
        header = _checked_header(handle.readline(), file)
    return header, _memories(file)


def _memories(file: Path) -> Iterator[tuple[int, InterchangeMemory]]:
    decoder = msgspec.json.Decoder(InterchangeMemory)
    with file.open("rb") as handle:
        handle.readline()  # the header, checked by read_interchange
        for number, raw in enumerate(handle, start=2):
            if not raw.strip():
                continue
            try:
                memory = decoder.decode(raw)
            except msgspec.DecodeError as e:
                # msgspec names the field, never the value
                msg = f"line {number} of {str(file)!r} is not an interchange memory ({e})"
                raise InterchangeFormatError(msg, path=str(file), line=number) from None
            if not memory.versions:
                msg = f"line {number} of {str(file)!r} holds no version"
                raise InterchangeFormatError(msg, path=str(file), line=number)
            yield number, memory


def _item(version: InterchangeVersion) -> dict[str, Any]:
    return {
        "kind": version.kind,
        "subject": version.subject,
        "predicate": version.predicate,
        "value": version.value,
        "statement": version.statement,
        "source": version.source,
        "scope": version.scope,
        "reason": version.reason,
        "importance": version.importance,
        "confidence": version.confidence,
        "tags": list(version.tags),
        "evidence": list(version.evidence),
    }


def _specs(
    digests: IdDigests, namespace: Namespace, memory: InterchangeMemory
) -> list[CommandSpec]:
    """The commands of one memory line, in order (``digests``: the store's id derivation)."""
    specs: list[CommandSpec] = []
    previous = None
    for version in memory.versions:
        specs.append(
            CommandSpec(
                intent="remember" if previous is None else "correct",
                text=version.statement,
                item=_item(version),
                target=previous,
                occurred_at=version.occurred_at,
                document=version.document,
            )
        )
        previous = digests.memory_id(
            namespace, normalize_statement(" ".join(version.statement.split()))
        )
    if memory.pinned:
        specs.append(CommandSpec(intent="pin", text=None, target=previous))
    if memory.status in ("forgotten", "pruned"):
        specs.append(
            CommandSpec(
                intent="forget", text=None, target=previous, occurred_at=memory.forgotten_at
            )
        )
    return specs


def import_interchange(
    engine: MemoryEngine,
    namespace: Namespace,
    path: str | Path,
    *,
    progress: Callable[[int], None] | None = None,
) -> InterchangeImportReport:
    """Import the interchange file ``path`` into ``namespace`` of ``engine`` (module
    docstring). ``progress`` is called with the count of lines done.

    :raises InvalidNamespaceError: a namespace part is empty or invalid.
    :raises ImportSourceError: no file at ``path``.
    :raises InterchangeFormatError: not an interchange file of this version, or a line that
        is not a memory (the lines before it were imported; a rerun resumes).
    """
    started = time.perf_counter()
    namespace.validated()
    direct = DirectCommands(engine, INTERCHANGE_SESSION_PREFIX)
    lines = imported = already = approximated = 0
    refused: list[RefusedItem] = []
    header, memories = read_interchange(path)
    digest = hashlib.sha256()
    for number, memory in memories:
        lines += 1
        digest.update(memory_digest_bytes(memory) + b"\n")
        # The key as the content says (a key edited in the file changes nothing).
        key = memory_key(memory)
        session_id = keyed_session_id(INTERCHANGE_SESSION_PREFIX, key)
        try:
            if engine.load_stream(engine.keyring.digests.session_stream_id(namespace, session_id)):
                already += 1
            else:
                direct.run_many(
                    namespace,
                    _specs(engine.keyring.digests, namespace, memory),
                    session_id=session_id,
                )
                imported += 1
                approximated += memory.status in ("pruned", "conflicted")
        except CommandRejectedError as e:
            if e.reason_code == "session_exists":
                already += 1
            else:
                refused.append(_refused(number, key, e))
        except REFUSALS as e:
            refused.append(_refused(number, key, e))
        if progress is not None:
            progress(lines)
    content = "sha256:" + digest.hexdigest()
    return InterchangeImportReport(
        path=str(path),
        digest=content,
        digest_matches=content == header.digest,
        lines=lines,
        imported=imported,
        already=already,
        approximated=approximated,
        refused=tuple(refused),
        position=engine.head,
        seconds=time.perf_counter() - started,
    )


def _refused(number: int, key: str, error: Exception) -> RefusedItem:
    return RefusedItem(
        item=f"line {number}",
        memory=key,
        event="memory",
        reason_code=getattr(error, "reason_code", "refused"),
        parameter=getattr(error, "parameter", None),
    )
