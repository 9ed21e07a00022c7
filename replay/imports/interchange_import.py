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

What no command says is restored in the same command (``commands.canonical.restore``): a
pruned memory is pruned again, at ``forgotten_at`` with its ``pruned_rule`` (``imported``
for a version 1 or 2 file, which has none), and each conflict mark of a version
(``conflicts_with``) is marked again on both memories, by the line that comes second in the
file (the partner must have been read, and imported, first: a mark naming a refused line
is left out). A version 1 or 2 file has no partners: its ``conflicted`` memories come back
active and are counted in ``approximated``. Refused lines (a secret-shaped text, what
validation refuses) are reported by line number and reason code, never their text.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.explicit_command import CommandSpec
from memory_ledger.commands.canonical.reconcile import Reconciler
from memory_ledger.commands.canonical.restore import restore_conflict, restore_prune
from memory_ledger.commands.engine.direct import DirectCommands
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.extraction.validation import schema_detail
from memory_ledger.ledger.arguments import NESTED_TOO_DEEP, check_aware
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.errors import InvalidArgumentError
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

__all__ = [
    "IMPORTED_PRUNE_RULE",
    "INTERCHANGE_SESSION_PREFIX",
    "InterchangeImportReport",
    "import_interchange",
]

INTERCHANGE_SESSION_PREFIX = "interchange-"
"""Session ids of imported interchange lines start with this."""
IMPORTED_PRUNE_RULE = "imported"
"""The rule of a pruned memory restored from a line that names none (version 1 or 2)."""


class InterchangeImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`import_interchange` did: memory ``lines`` read, ``imported`` now,
    ``already`` imported by an earlier run, ``digest`` of the memory lines read
    (:func:`~memory_ledger.replay.imports.interchange.interchange_digest`) and whether it
    equals the header's (``digest_matches``: False for a file changed after its export or
    cut short), ``approximated`` (conflicted lines of a version 1 or 2 file, which come back
    active: see the module docstring), ``refused`` lines, the ledger head after it and the
    wall time."""

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
    except (msgspec.DecodeError, RecursionError):
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
                # msgspec quotes an invalid enum value or an unknown field's name: only the
                # kind of error and the path are kept (a secret there never reaches an error)
                detail = schema_detail(str(e))
                msg = f"line {number} of {str(file)!r} is not an interchange memory ({detail})"
                raise InterchangeFormatError(msg, path=str(file), line=number) from None
            except RecursionError:
                msg = f"line {number} of {str(file)!r} is {NESTED_TOO_DEEP}"
                raise InterchangeFormatError(msg, path=str(file), line=number) from None
            if not memory.versions:
                msg = f"line {number} of {str(file)!r} holds no version"
                raise InterchangeFormatError(msg, path=str(file), line=number)
            _check_times(memory, file, number)
            yield number, memory


def _check_times(memory: InterchangeMemory, file: Path, number: int) -> None:
    """Refuse a line holding a time with no UTC time (``check_utc_range``), naming it."""
    times = [("forgotten_at", memory.forgotten_at)]
    for version in memory.versions:
        times += [("occurred_at", version.occurred_at), ("recorded_at", version.recorded_at)]
    for name, value in times:
        if value is None:
            continue
        try:
            check_aware(name, value)
        except InvalidArgumentError as e:
            msg = f"line {number} of {str(file)!r}: {e}"
            raise InterchangeFormatError(msg, path=str(file), line=number) from None


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


def _memory_id(digests: IdDigests, namespace: Namespace, statement: str) -> UUID:
    """The id the store gives the memory of ``statement`` in ``namespace``."""
    return digests.memory_id(namespace, normalize_statement(" ".join(statement.split())))


def _specs(
    digests: IdDigests, namespace: Namespace, memory: InterchangeMemory
) -> list[CommandSpec]:
    """The commands of one memory line, in order (``digests``: the store's id derivation);
    a prune is not a command (:func:`_restorer`)."""
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
        previous = _memory_id(digests, namespace, version.statement)
        if version.pinned and version is not memory.versions[-1]:
            specs.append(CommandSpec(intent="pin", text=None, target=previous))
    if memory.pinned:
        specs.append(CommandSpec(intent="pin", text=None, target=previous))
    if memory.status == "forgotten":
        specs.append(
            CommandSpec(
                intent="forget", text=None, target=previous, occurred_at=memory.forgotten_at
            )
        )
    return specs


def _restorer(
    digests: IdDigests,
    namespace: Namespace,
    key: str,
    memory: InterchangeMemory,
    read: dict[str, tuple[str, ...]],
    turn_id: int,
) -> Callable[[Reconciler], None]:
    """What the line's command restores after its versions: the conflict marks of its
    versions whose partner line was read before it (``read``: key -> the statements of its
    versions; a mark inside the line once per pair), then its prune."""
    ours = [_memory_id(digests, namespace, v.statement) for v in memory.versions]

    def restore(reconciler: Reconciler) -> None:
        for index, version in enumerate(memory.versions):
            for partner in version.conflicts_with:
                if partner.key == key:
                    if partner.version <= index or partner.version >= len(ours):
                        continue  # the pair is restored from its other side, or is not one
                    other = ours[partner.version]
                else:
                    statements = read.get(partner.key)
                    if statements is None or not 0 <= partner.version < len(statements):
                        continue  # a later line restores it (or a refused one: none)
                    other = _memory_id(digests, namespace, statements[partner.version])
                restore_conflict(reconciler, ours[index], other, turn_id)
        if memory.status == "pruned":
            rule = memory.pruned_rule or IMPORTED_PRUNE_RULE
            restore_prune(reconciler, ours[-1], rule, memory.forgotten_at)

    return restore


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
    digests = engine.keyring.digests
    read: dict[str, tuple[str, ...]] = {}  # the lines in the store: key -> their statements
    for number, memory in memories:
        lines += 1
        digest.update(memory_digest_bytes(memory) + b"\n")
        # The key as the content says (a key edited in the file changes nothing).
        key = memory_key(memory)
        session_id = keyed_session_id(INTERCHANGE_SESSION_PREFIX, key)
        try:
            if engine.load_stream(digests.session_stream_id(namespace, session_id)):
                already += 1
            else:
                specs = _specs(digests, namespace, memory)
                restore = _restorer(digests, namespace, key, memory, read, len(specs))
                direct.run_many(namespace, specs, session_id=session_id, then=restore)
                imported += 1
                approximated += memory.status == "conflicted" and not any(
                    version.conflicts_with for version in memory.versions
                )
            read[key] = tuple(version.statement for version in memory.versions)
        except CommandRejectedError as e:
            if e.reason_code == "session_exists":
                already += 1
                read[key] = tuple(version.statement for version in memory.versions)
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
