"""One namespace's served vectors as the persisted recall index holds them
(:mod:`commands.recall.index_file`): a metadata blob beside a raw float32 matrix, which a
new process reads as a view of the file's map instead of reading ``memory_vectors`` back
from DuckDB (:mod:`commands.recall.served_vectors`). No numpy import here: a lexical
reader loads none."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import msgspec

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import numpy.typing as npt

__all__ = ["StoredAnn", "StoredVectorBlock", "VectorMeta"]


class VectorMeta(msgspec.Struct, frozen=True, array_like=True):
    """One namespace's served vectors as a process held them (matrix row ``i`` belongs to
    ``ids[i]``, field ``fields[i]``), as of the serving position ``built``: every row live
    then, ``missing`` the retrievable memories without a statement vector then, and
    ``last_seq`` the ``memory_vectors`` seq the rows cover (later rows are read from DuckDB);
    ``order``: the rows sorted by ``(id, field)``, little-endian int64 row numbers (a
    reader finds a few memories' rows by bisection before it builds a map of them all)."""

    built: int
    last_seq: int
    ids: list[str]
    revisions: list[int]
    digests: list[str]
    fields: list[str]
    missing: list[str]
    order: bytes


StoredAnn: TypeAlias = "tuple[int, Callable[[], npt.NDArray[np.uint8] | None]]"
"""A namespace's approximate index (:mod:`commands.recall.ann`) persisted beside its
vectors: ``(rows, serialized)``, the index holding rows ``0 .. rows - 1`` of the block's
matrix (row numbers are its ids), and a function giving ``faiss.serialize_index``'s bytes,
checked against their checksum when called (None: damaged, the index is rebuilt)."""

StoredVectorBlock: TypeAlias = "tuple[VectorMeta, npt.NDArray[np.float32], StoredAnn | None]"
"""``(metadata, matrix, approximate index or None)`` of one namespace's vectors of one
model."""
