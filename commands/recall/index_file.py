"""The recall index persisted: a derived read model beside the DuckDB projections.

One file per projection slot (``<store>/projections/slot-N.recall``) holds, for every
namespace whose index this slot built, the BM25 state (:class:`BM25State`), its documents
(:class:`~memory_ledger.commands.recall.index.MemoryDoc`, without their conversation
windows: those live in the postings) and the projection position it reflects, so a new
process maps the file instead of re-reading, re-analysing and re-indexing every memory,
then catches up only the rows changed after that position
(:class:`~memory_ledger.commands.recall.index.NamespaceRecallIndex`).

Layout (little-endian)::

    header   8s magic "MLRECALL" | u32 format version | u64 directory offset
             | u64 directory length | u32 crc32 of the directory
    blobs    one msgpack blob per namespace (:class:`NamespaceBlob`)
    directory msgpack :class:`Directory`: fingerprint, position, and per namespace the
             blob's offset, length, checksum, built position and silenced turns

Every blob, matrix and approximate index carries a 64-bit XXH3 checksum (:func:`checksum`,
the ``xxhash`` package): a first recall in a fresh process checks every byte it reads (about
280 MB for a 100,000-memory store's first hybrid recall), and XXH3 does it about four times
faster than zlib's crc32 on this machine (150 MB in memory: 9.5 ms of CPU against 44 ms);
format 3 used crc32.

Crash safety as for every projection: the file is written whole under a temporary name,
fsynced, renamed over the old one and the folder fsynced; a file whose header, length,
fingerprint or any checksum does not match is never served: it is removed and the index
rebuilt from the projections (``reason`` says why). A namespace's blob is read and checked
only when that namespace is first recalled. An erasure removes the file (the engine drops
every in-process index at once; the next close writes a new file without the erased
namespace).

The file is written through :mod:`memory_ledger.projections.derived`: a namespace erased by
any process by the time of the write is left out of it (whether this process indexed it
before the erasure, or recalled it after), and a file whose directory names an erased
namespace is removed when opened, never served (``reason`` ``erased``).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import xxhash

from memory_ledger.commands.recall.index import MemoryDoc
from memory_ledger.commands.recall.lexical import CONTEXT_CHARS, WINDOW_TURNS
from memory_ledger.commands.recall.vector_block import StoredAnn, StoredVectorBlock, VectorMeta
from memory_ledger.projections.derived import NO_ERASURE, ErasedNamespaces, write_atomic
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.text_index import BM25Index, BM25State

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "FORMAT_VERSION",
    "Directory",
    "NamespaceBlob",
    "NamespaceEntry",
    "RecallIndexFile",
    "StoredIndex",
    "VectorEntry",
]

FORMAT_VERSION = 4
"""The file's format version: a file of another version is rebuilt, never read.
2: the serving state (``projections.serving``) at the file's position; 3: each namespace's
served vectors (a metadata blob and a raw float32 matrix, read as a view of the map);
4: blobs, matrices and approximate indexes checked by XXH3-64 instead of crc32."""


def checksum(data: bytes | memoryview) -> int:
    """The 64-bit XXH3 checksum (seed 0) of ``data`` (any buffer: bytes, a view of the map),
    as an unsigned int: what every blob, matrix and approximate index of the file carries."""
    return int(xxhash.xxh3_64_intdigest(data))


MAGIC = b"MLRECALL"
_HEADER = struct.Struct("<8sIQQI")


class NamespaceEntry(msgspec.Struct, frozen=True, array_like=True):
    """Where one namespace's blob is and what it reflects."""

    offset: int
    length: int
    crc: int
    built: int
    """The projection position the namespace's index reflects."""
    silenced: list[int]
    """The source turns of its forgotten memories when it was built (they lend no words)."""


class VectorEntry(msgspec.Struct, frozen=True, array_like=True):
    """Where one namespace's vectors of one model are: their metadata blob
    (:class:`VectorMeta`) and their matrix (``rows`` x ``dimension`` little-endian float32,
    64-byte aligned), each with its :func:`checksum` (checked when first read), and their
    approximate index when one was persisted (``faiss.serialize_index`` bytes over matrix rows
    ``0 .. ann_rows - 1``, checked when first used; a damaged one is ignored and rebuilt)."""

    offset: int
    length: int
    crc: int
    matrix_offset: int
    rows: int
    dimension: int
    matrix_crc: int
    ann_offset: int = 0
    ann_length: int = 0
    """0: no approximate index stored."""
    ann_crc: int = 0
    ann_rows: int = 0


_ALIGN = 64


class Directory(msgspec.Struct, frozen=True):
    """The file's table of contents."""

    fingerprint: str
    position: int
    namespaces: dict[str, NamespaceEntry]
    serving: NamespaceEntry | None = None
    """Where the serving state's snapshot is (:meth:`ServingState.snapshot`), at
    ``position``; None: not stored."""
    serving_namespaces: list[str] = msgspec.field(default_factory=list)
    """The keys of the namespaces the snapshot holds (checked against erasures on open)."""
    vectors: dict[str, dict[str, VectorEntry]] = msgspec.field(default_factory=dict)
    """Served vectors by model key, then namespace key."""


class NamespaceBlob(msgspec.Struct, frozen=True, array_like=True):
    """One namespace's index and documents: slot ``s``'s document is the msgpack
    :class:`MemoryDoc` at ``docs[doc_offsets[s]:doc_offsets[s + 1]]`` (empty: a free slot)."""

    index: BM25State
    doc_offsets: bytes
    docs: bytes


StoredIndex = tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]]
"""``(built position, silenced turns, index, documents by id)`` of one namespace."""

_encoder = msgspec.msgpack.Encoder()
_blob_decoder = msgspec.msgpack.Decoder(NamespaceBlob)
_doc_decoder = msgspec.msgpack.Decoder(MemoryDoc)
_directory_decoder = msgspec.msgpack.Decoder(Directory)
_meta_decoder = msgspec.msgpack.Decoder(VectorMeta)


class LazyDocs(MutableMapping[str, MemoryDoc]):
    """The documents of a restored index by memory id, each decoded on first use.

    Keyed by the index's own slot map (``slot_of``, which the recall index keeps equal to
    this mapping's keys: it adds and removes a memory in both): a memory stored in the
    file is found through its slot; one set after the restore lives in an overlay that is
    read first.
    """

    def __init__(self, slot_of: Mapping[str, int], offsets: array[int], docs: bytes) -> None:
        self._slot_of = slot_of
        self._offsets = offsets
        self._docs = docs
        self._overlay: dict[str, MemoryDoc] = {}
        self._replaced: set[str] = set()
        """Memories set or removed since the restore (their stored bytes are stale)."""

    def __getitem__(self, memory_id: str) -> MemoryDoc:
        doc = self._overlay.get(memory_id)
        if doc is not None:
            return doc
        raw = self.raw(memory_id)
        if raw is None:
            raise KeyError(memory_id)
        doc = self._overlay[memory_id] = _doc_decoder.decode(raw)
        return doc

    def raw(self, memory_id: str) -> bytes | None:
        """The stored bytes of a memory not changed since the restore (else None)."""
        if memory_id in self._replaced:
            return None
        slot = self._slot_of.get(memory_id)
        if slot is None:
            return None
        return self._docs[self._offsets[slot] : self._offsets[slot + 1]]

    def fork(self, slot_of: Mapping[str, int]) -> LazyDocs:
        """A copy keyed by ``slot_of`` (the slot map of a copy of the index, or a frozen
        copy of it) that shares the stored bytes: what is set or removed on either side
        later is not seen by the other. O(memories changed or read since the restore):
        no stored document is decoded."""
        fork = LazyDocs(slot_of, self._offsets, self._docs)
        fork._overlay = dict(self._overlay)
        fork._replaced = set(self._replaced)
        return fork

    def __setitem__(self, memory_id: str, doc: MemoryDoc) -> None:
        self._replaced.add(memory_id)
        self._overlay[memory_id] = doc

    def __delitem__(self, memory_id: str) -> None:
        # The index removes the memory from its slot map first (``NamespaceRecallIndex``).
        self._replaced.add(memory_id)
        self._overlay.pop(memory_id, None)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self._slot_of

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._slot_of))

    def __len__(self) -> int:
        return len(self._slot_of)


def fingerprint(windowed: bool) -> str:
    """What the documents of a file depend on besides the ledger: the format and the
    analyzer's settings (a file written under other settings is rebuilt)."""
    return f"v{FORMAT_VERSION}:context={CONTEXT_CHARS}:window={WINDOW_TURNS}:windowed={windowed}"


def _stored_doc(doc: MemoryDoc) -> bytes:
    # The window is in the postings already; only the source turn (``context``) is kept,
    # for the semantic channel's source vectors.
    return _encoder.encode(doc if doc.window is None else msgspec.structs.replace(doc, window=None))


def _blob(index: BM25Index, by_id: MutableMapping[str, MemoryDoc]) -> NamespaceBlob:
    """One namespace's blob: its index state and its documents in slot order."""
    offsets, parts, size = array("q", [0]), [], 0
    raw_of = by_id.raw if isinstance(by_id, LazyDocs) else None
    for doc_id in index.state_slots():
        raw = b""
        if doc_id:
            stored = raw_of(doc_id) if raw_of is not None else None
            raw = stored if stored is not None else _stored_doc(by_id[doc_id])
        parts.append(raw)
        size += len(raw)
        offsets.append(size)
    return NamespaceBlob(index.state(), offsets.tobytes(), b"".join(parts))


class RecallIndexFile:
    """The persisted recall index of one projection slot.

    :param path: the file (``slot-N.recall``).
    :param fingerprint: :func:`fingerprint` of the index that reads it.
    :param head: the ledger head now: a file reflecting a later position belongs to another
        ledger and is rebuilt.
    :param erased: the store's erased namespaces: never written, and a file naming one is
        removed when opened.

    ``reason`` says why the file was not used (``missing``, ``torn``, ``format``,
    ``ahead_of_ledger``, ``damaged``, ``erased``), None while it is.
    """

    def __init__(
        self,
        path: Path,
        fingerprint: str,
        head: int,
        *,
        erased: ErasedNamespaces = NO_ERASURE,
    ) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.erased = erased
        self.reason: str | None = None
        self._directory: Directory | None = None
        self._map: mmap.mmap | None = None
        self._open(head)

    def _open(self, head: int) -> None:
        for stale in self.path.parent.glob(f"{self.path.name}.tmp-*"):
            with contextlib.suppress(OSError):
                stale.unlink()  # a write killed before its rename
        try:
            with open(self.path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < _HEADER.size:
                    self._discard("torn" if size else "missing")
                    return
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except FileNotFoundError:
            self.reason = "missing"
            return
        except OSError:
            self._discard("damaged")
            return
        magic, version, offset, length, crc = _HEADER.unpack_from(self._map, 0)
        if magic != MAGIC:
            self._discard("damaged")
            return
        if version != FORMAT_VERSION:
            self._discard("format")
            return
        if offset + length != size or offset < _HEADER.size:
            self._discard("torn")
            return
        raw = self._map[offset : offset + length]
        if zlib.crc32(raw) != crc:
            self._discard("torn")
            return
        try:
            directory = _directory_decoder.decode(raw)
        except msgspec.DecodeError:
            self._discard("damaged")
            return
        if directory.fingerprint != self.fingerprint:
            self._discard("format")
            return
        if directory.position > head:
            self._discard("ahead_of_ledger")
            return
        named = [
            *directory.namespaces,
            *directory.serving_namespaces,
            *(key for held in directory.vectors.values() for key in held),
        ]
        if self.erased.kept(named, str) != named:
            self._discard("erased")  # written before an erasure that could not remove it
            return
        self._directory = directory

    def _discard_after(self, view: memoryview, reason: str) -> None:
        view.release()
        self._discard(reason)

    def _discard(self, reason: str) -> None:
        self.reason = reason
        self.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    @property
    def position(self) -> int:
        """The projection position the file was written at (0 without a usable file)."""
        return self._directory.position if self._directory is not None else 0

    def namespaces(self) -> list[str]:
        """The keys of the namespaces the file holds."""
        return list(self._directory.namespaces) if self._directory is not None else []

    def load(self, key: str) -> StoredIndex | None:
        """The stored index of namespace ``key``, or None (not stored, or its blob fails
        its checksum: the whole file is then discarded, ``reason`` ``torn``)."""
        if self._directory is None or self._map is None:
            return None
        entry = self._directory.namespaces.get(key)
        if entry is None:
            return None
        if entry.offset + entry.length > len(self._map):
            self._discard("torn")
            return None
        view = memoryview(self._map)[entry.offset : entry.offset + entry.length]
        try:  # read in place: the fields are copied out once, the view released
            if checksum(view) != entry.crc:
                self._discard_after(view, "torn")
                return None
            blob = _blob_decoder.decode(view)
            index = BM25Index.from_state(blob.index)
            offsets = array("q")
            offsets.frombytes(blob.doc_offsets)
        except (msgspec.DecodeError, ValueError):
            self._discard_after(view, "damaged")
            return None
        finally:
            view.release()
        if len(offsets) != index.slots + 1 or offsets[-1] != len(blob.docs):
            self._discard("damaged")
            return None
        by_id = LazyDocs(index.slot_map(), offsets, blob.docs)
        return entry.built, frozenset(entry.silenced), index, by_id

    def serving(self) -> memoryview | None:
        """The serving state's snapshot bytes at :attr:`position` (checked against their
        checksum), or None (none stored; a damaged one discards the file, ``torn``)."""
        if self._directory is None or self._map is None or self._directory.serving is None:
            return None
        entry = self._directory.serving
        if entry.offset + entry.length > len(self._map):
            self._discard("torn")
            return None
        raw = memoryview(self._map)[entry.offset : entry.offset + entry.length]
        if checksum(raw) != entry.crc:
            self._discard_after(raw, "torn")
            return None
        return raw  # a view of the map (no copy): rows restored raw point into it

    def vector_namespaces(self, model_key: str) -> list[str]:
        """The keys of the namespaces whose vectors of ``model_key`` the file holds."""
        if self._directory is None:
            return []
        return list(self._directory.vectors.get(model_key, ()))

    def load_vectors(self, model_key: str, key: str) -> StoredVectorBlock | None:
        """Namespace ``key``'s vectors of ``model_key``: the metadata and the matrix, a
        read-only view of the map (no copy), or None (not stored; a block that fails its
        checksum or does not decode discards the file, ``reason`` ``torn`` or
        ``damaged``)."""
        if self._directory is None or self._map is None:
            return None
        entry = self._directory.vectors.get(model_key, {}).get(key)
        if entry is None:
            return None
        size = entry.rows * entry.dimension * 4
        if max(entry.offset + entry.length, entry.matrix_offset + size) > len(self._map):
            self._discard("torn")
            return None
        view = memoryview(self._map)
        try:
            if checksum(view[entry.offset : entry.offset + entry.length]) != entry.crc:
                self._discard_after(view, "torn")
                return None
            if checksum(view[entry.matrix_offset : entry.matrix_offset + size]) != (
                entry.matrix_crc
            ):
                self._discard_after(view, "torn")
                return None
            meta = _meta_decoder.decode(view[entry.offset : entry.offset + entry.length])
        except msgspec.DecodeError:
            self._discard_after(view, "damaged")
            return None
        finally:
            view.release()
        counts = {len(meta.ids), len(meta.revisions), len(meta.digests), len(meta.fields)}
        if counts != {entry.rows}:
            self._discard("damaged")
            return None
        import numpy as np  # here: a lexical reader never imports numpy

        matrix = np.frombuffer(
            self._map, dtype="<f4", count=entry.rows * entry.dimension, offset=entry.matrix_offset
        ).reshape(entry.rows, entry.dimension)
        return meta, matrix, self._stored_ann(entry)

    def _stored_ann(self, entry: VectorEntry) -> StoredAnn | None:
        """The entry's approximate index, read and checked when its loader is called
        (None from the loader: out of the map or failing its checksum; the file is kept,
        its vectors being sound)."""
        if not entry.ann_length or entry.ann_rows > entry.rows:
            return None
        mapped = self._map
        assert mapped is not None

        def serialized() -> npt.NDArray[np.uint8] | None:
            import numpy as np

            end = entry.ann_offset + entry.ann_length
            try:
                if end > len(mapped):
                    return None
                data = np.frombuffer(mapped, np.uint8, entry.ann_length, entry.ann_offset)
            except ValueError:  # the map was closed (the file replaced meanwhile)
                return None
            return data if checksum(data.data) == entry.ann_crc else None

        return entry.ann_rows, serialized

    def _raw_vectors(
        self, model_key: str, key: str
    ) -> tuple[bytes, bytes, tuple[int, bytes] | None] | None:
        """The metadata and matrix bytes of a stored vector block, as stored, and its
        approximate index's ``(rows, bytes)`` (None: none stored)."""
        if self._directory is None or self._map is None:
            return None
        entry = self._directory.vectors.get(model_key, {}).get(key)
        if entry is None:
            return None
        size = entry.rows * entry.dimension * 4
        stored_ann = None
        if entry.ann_length:
            end = entry.ann_offset + entry.ann_length
            raw = self._map[entry.ann_offset : end]
            if checksum(raw) == entry.ann_crc:  # a damaged index is not carried over
                stored_ann = (entry.ann_rows, raw)
        return (
            self._map[entry.offset : entry.offset + entry.length],
            self._map[entry.matrix_offset : entry.matrix_offset + size],
            stored_ann,
        )

    def raw_blob(self, key: str) -> tuple[NamespaceEntry, bytes] | None:
        """The entry and blob bytes of namespace ``key`` as stored (copied into the next
        file for namespaces this process never loaded)."""
        if self._directory is None or self._map is None:
            return None
        entry = self._directory.namespaces.get(key)
        if entry is None:
            return None
        return entry, self._map[entry.offset : entry.offset + entry.length]

    def write(
        self,
        position: int,
        built: Iterable[tuple[str, StoredIndex]],
        keep: Iterable[str] = (),
        serving: ServingState | None = None,
        vectors: Mapping[str, Mapping[str, StoredVectorBlock]] | None = None,
    ) -> None:
        """Replace the file by one holding the namespaces ``built`` (their indexes now) and
        the namespaces ``keep`` copied from the current file, reflecting ``position``, and
        the ``serving`` state (which must be at ``position``), and the served ``vectors``
        (by model key, then namespace key; the file's blocks of the models named, for
        namespaces not given, are copied; None: every stored block is copied).
        Namespaces erased by then (by any process), and namespaces without a document, are
        left out. Written under a temporary name, fsynced, then renamed
        (:func:`~memory_ledger.projections.derived.write_atomic`); raises ``OSError`` when
        the folder cannot be written (nothing changed)."""
        blobs: list[tuple[str, NamespaceEntry, bytes]] = []
        offset = _HEADER.size
        keep = self.erased.kept(keep, str)
        built = [  # a namespace with no memory leaves no entry (its name is never written)
            item for item in self.erased.kept(built, lambda item: item[0]) if len(item[1][3])
        ]
        for key in keep:
            stored = self.raw_blob(key)
            if stored is not None:
                entry, raw = stored
                blobs.append((key, msgspec.structs.replace(entry, offset=offset), raw))
                offset += len(raw)
        for key, (at, silenced, index, by_id) in built:
            raw = _encoder.encode(_blob(index, by_id))
            entry = NamespaceEntry(offset, len(raw), checksum(raw), at, sorted(silenced))
            blobs.append((key, entry, raw))
            offset += len(raw)
        serving_entry, serving_keys = None, []
        if serving is not None:
            ids = self.erased.ids()
            serving_keys = [
                n.key() for n in serving.namespaces() if not self.erased.key_erased(n.key(), ids)
            ]
            raw = serving.snapshot(set(serving_keys).__contains__)
            serving_entry = NamespaceEntry(offset, len(raw), checksum(raw), position, [])
            blobs.append(("", serving_entry, raw))
            offset += len(raw)
        vector_entries: dict[str, dict[str, VectorEntry]] = {}
        vector_chunks: list[bytes | memoryview] = []
        for model_key, key, meta_raw, matrix_raw, dimension, ann_block in self._vector_blocks(
            vectors
        ):
            matrix_offset = -(-(offset + len(meta_raw)) // _ALIGN) * _ALIGN
            pad = matrix_offset - offset - len(meta_raw)
            rows = len(matrix_raw) // (4 * dimension) if dimension else 0
            end = matrix_offset + len(matrix_raw)
            ann_entry: tuple[int, int, int, int] = (0, 0, 0, 0)
            ann_chunks: list[bytes | memoryview] = []
            if ann_block is not None and 0 < ann_block[0] <= rows and len(ann_block[1]):
                ann_rows, ann_raw = ann_block
                ann_entry = (end, len(ann_raw), checksum(ann_raw), ann_rows)
                ann_chunks = [ann_raw]
                end += len(ann_raw)
            vector_entries.setdefault(model_key, {})[key] = VectorEntry(
                offset,
                len(meta_raw),
                checksum(meta_raw),
                matrix_offset,
                rows,
                dimension,
                checksum(matrix_raw),
                *ann_entry,
            )
            vector_chunks += [meta_raw, b"\0" * pad, matrix_raw, *ann_chunks]
            offset = end
        directory = _encoder.encode(
            Directory(
                self.fingerprint,
                position,
                {key: entry for key, entry, _ in blobs if key},
                serving_entry,
                sorted(serving_keys),
                vector_entries,
            )
        )
        header = _HEADER.pack(MAGIC, FORMAT_VERSION, offset, len(directory), zlib.crc32(directory))
        # The header and first blob make the first chunk (the ``recall_index.write`` fault
        # point runs after it, as before).
        chunks: list[bytes | memoryview] = [
            header + (blobs[0][2] if blobs else b""),
            *(raw for _, _, raw in blobs[1:]),
            *vector_chunks,
        ]
        write_atomic(
            self.path,
            [*chunks, directory],
            fault_point="recall_index",
            before_replace=self.close,
        )
        self.reason = None
        self._open(position)

    def _vector_blocks(
        self, vectors: Mapping[str, Mapping[str, StoredVectorBlock]] | None
    ) -> Iterator[
        tuple[str, str, bytes, bytes | memoryview, int, tuple[int, bytes | memoryview] | None]
    ]:
        """``(model key, namespace key, metadata bytes, matrix bytes, dimension,
        approximate index's (rows, bytes) or None)`` of every vector block the next file
        holds: those given, then the file's others of the models given (all models when
        None), erased namespaces left out (their index with them)."""
        ids = self.erased.ids()
        given = vectors or {}
        for model_key, held in sorted(given.items()):
            for key, (meta, matrix, stored_ann) in sorted(held.items()):
                if len(meta.ids) and not self.erased.key_erased(key, ids):
                    import numpy as np  # only a process that served vectors writes them

                    matrix = np.ascontiguousarray(matrix, dtype="<f4")
                    raw = matrix.data.cast("B")
                    ann_block = None
                    if stored_ann is not None:
                        serialized = stored_ann[1]()
                        if serialized is not None:
                            ann_block = (stored_ann[0], serialized.data.cast("B"))
                    yield model_key, key, _encoder.encode(meta), raw, matrix.shape[1], ann_block
        stored = self._directory.vectors if self._directory is not None else {}
        for model_key, entries in sorted(stored.items()):
            if vectors is not None and model_key not in vectors:
                continue  # another model's vectors: not served any more
            for key, entry in sorted(entries.items()):
                if key in given.get(model_key, {}) or self.erased.key_erased(key, ids):
                    continue
                copied = self._raw_vectors(model_key, key)
                if copied is not None:
                    meta_raw, matrix_raw, ann_copied = copied
                    yield model_key, key, meta_raw, matrix_raw, entry.dimension, ann_copied

    def remove(self) -> None:
        """Delete the file (an erasure: it may hold an erased namespace's words)."""
        self._discard("erased")

    def close(self) -> None:
        """Unmap the file."""
        self._directory = None
        if self._map is not None:
            with contextlib.suppress(BufferError):  # vectors or rows still served from it:
                self._map.close()  # unmapped when the last of them is dropped
            self._map = None
