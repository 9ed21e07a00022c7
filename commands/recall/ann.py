"""The approximate nearest-neighbour index of the semantic channel (issue 30 item 3).

A derived read model over one namespace's in-process vector matrix
(:class:`~memory_ledger.commands.recall.semantic.SemanticChannel`): built from the matrix
whenever it is missing (every compaction and every erasure drops it), persisted beside the
namespace's vectors in the recall file (:meth:`ApproximateIndex.serialize`; a new process
loads it, checksummed, instead of rebuilding, and adds the rows written after it), never
the source of a score. It only proposes *rows*; the channel re-ranks them
exactly by cosine over the matrix, applies the same live mask and field filter as exact
search, and verifies every candidate against the current canonical document, so a
forgotten, superseded or erased memory is never served whichever path found it.

The index is faiss's inverted file over 8-bit scalar-quantized vectors
(``IndexIVFScalarQuantizer``, ``QT_8bit_uniform``, inner product on unit vectors = cosine):
k-means cells trained on a sample of the rows, each query scans the ``nprobe`` nearest cells.
The codes are a quarter of the float32 rows, so a query reads a quarter of the memory an
IVF-flat index reads (it is bound by memory traffic: at 100,000 384-d rows, 30 % of the cells,
2.8 ms against 8.2 ms p50, the same recall@10 after the exact re-rank, 0.987) and the index
weighs a quarter of its vectors (40 MB against 155 MB at 100,000 rows); the scores the
channel serves come from the float32 matrix, never from the codes. It is used only when a
namespace holds at least ``threshold`` vector rows (:data:`DEFAULT_THRESHOLD`); below it
search stays exact, so small stores answer exactly as before. Why IVF and not HNSW
(usearch, hnswlib): on this 2-core machine an HNSW graph over 100,000 384-d vectors took
165 s to build and reached 0.83 recall@10 at ``ef`` 256, the IVF one 25 s and 0.98 at 5 % of
its cells (``benchmarks/ann.py`` measures agreement and latency).

faiss is optional (the ``ann`` extra): without it :func:`available` is False and every
search is exact.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_THRESHOLD", "ApproximateIndex", "agreement", "available"]

DEFAULT_THRESHOLD = 50_000
"""Vector rows of a namespace from which its semantic search goes through the index."""


SCANNED_ROWS = 30_000
"""Rows a query scans at least (cells times their mean size): cheap beside exact search,
and what keeps agreement up on smaller, less clustered namespaces."""


def _faiss() -> ModuleType | None:
    try:
        return importlib.import_module("faiss")
    except ImportError:
        return None


_FOUND: list[bool] = []
"""Whether the import system finds faiss (looked up once per process)."""


def available() -> bool:
    """True when the ``ann`` extra (faiss-cpu) is installed: faiss is imported already, or
    the import system finds it. It is not imported here: importing faiss costs 0.1-0.3 s of a
    fresh process, paid by whoever first builds or restores an index (the semantic channel's
    background thread, while the first searches run exactly), not by the first search. A
    faiss that is found but fails to import makes that build fail, logged once; searches
    then stay exact."""
    if "faiss" in sys.modules:
        return True
    if not _FOUND:
        _FOUND.append(importlib.util.find_spec("faiss") is not None)
    return _FOUND[0]


def agreement(approximate: list[Any], exact: list[Any]) -> float:
    """recall@k of an approximate top-k against the exact one: the share of the exact
    top-k found in the approximate top-k (1.0 when ``exact`` is empty)."""
    if not exact:
        return 1.0
    return len(set(approximate) & set(exact)) / len(exact)


class ApproximateIndex:
    """An IVF index of 8-bit scalar-quantized codes over the first rows of a matrix; row
    numbers are its ids.

    :param dimension: the vectors' dimension.
    :param rows: how many rows it is first built for (sets the cell count,
        ``2 * sqrt(rows)``, at most one per 39 rows).
    :param probe_share: the share of cells a query scans, and at least the cells holding
        about :data:`SCANNED_ROWS` rows (at 1,000,000 clustered 384-d rows: 5 % of 2,000
        cells, recall@10 0.990 at 15 ms p50 under load 8; at 100,000: 30 % of 632 cells).
    :raises RuntimeError: faiss is not installed (check :func:`available` first).
    """

    def __init__(self, dimension: int, rows: int, *, probe_share: float = 0.05) -> None:
        faiss = _faiss()
        if faiss is None:
            raise RuntimeError("the ann extra (faiss-cpu) is not installed")
        self._faiss = faiss
        self.dimension = dimension
        self.probe_share = probe_share
        self.cells = max(1, min(int(2 * math.sqrt(rows)), rows // 39))  # faiss: 39 per cell
        self.nprobe = self._probes(rows)
        quantizer = faiss.IndexFlatIP(dimension)
        self._index: Any = faiss.IndexIVFScalarQuantizer(
            quantizer,
            dimension,
            self.cells,
            faiss.ScalarQuantizer.QT_8bit_uniform,
            faiss.METRIC_INNER_PRODUCT,
        )
        self._quantizer = quantizer  # the IVF index does not own it
        self.size = 0
        """Rows added so far (rows ``0 .. size - 1`` of the matrix)."""

    @classmethod
    def restore(
        cls, data: npt.NDArray[np.uint8], dimension: int, rows: int
    ) -> ApproximateIndex | None:
        """The index :meth:`serialize` wrote, holding rows ``0 .. rows - 1``; None when
        ``data`` does not decode to an IVF index of ``dimension`` holding exactly ``rows``
        rows (a damaged or foreign block: the caller rebuilds).

        :raises RuntimeError: faiss is not installed."""
        self = cls(dimension, max(rows, 1))
        try:
            index = self._faiss.deserialize_index(np.ascontiguousarray(data, dtype=np.uint8))
            ivf = self._faiss.extract_index_ivf(index)
        except RuntimeError:  # faiss's own exception type for a stream it cannot read
            return None
        if index.d != dimension or index.ntotal != rows or not index.is_trained:
            return None
        self._index = index  # owns its quantizer (and is the IVF index: ``ivf`` is a view)
        self._quantizer = ivf.quantizer
        self.cells = int(ivf.nlist)
        self.nprobe = self._probes(rows)
        self.size = rows
        return self

    def _probes(self, rows: int) -> int:
        """Cells a query scans: :attr:`probe_share` of them, and at least the cells holding
        about :data:`SCANNED_ROWS` of ``rows``."""
        scan = max(self.probe_share * self.cells, SCANNED_ROWS * self.cells / max(rows, 1))
        return min(self.cells, max(1, math.ceil(scan)))

    def serialize(
        self, kept: npt.NDArray[np.int64] | None = None
    ) -> tuple[npt.NDArray[np.uint8], int]:
        """The index as bytes (``faiss.serialize_index``), for :meth:`restore`, and how many
        rows it holds. ``kept``: the rows (ascending) a compacted copy of the matrix keeps;
        the bytes are then those of an index over that copy (the others' entries removed,
        row ``kept[i]`` renumbered ``i``), holding its rows ``0 .. n - 1``, ``n`` the kept
        rows under :attr:`size`. This index is left as it is."""
        faiss = self._faiss
        covered = self.size if kept is None else int(np.searchsorted(kept, self.size))
        if covered == self.size:
            data: npt.NDArray[np.uint8] = faiss.serialize_index(self._index)
            return data, covered
        assert kept is not None
        copy = faiss.clone_index(self._index)
        dropped = np.setdiff1d(np.arange(self.size, dtype=np.int64), kept[:covered])
        copy.remove_ids(faiss.IDSelectorBatch(dropped))
        lists = copy.invlists
        for cell in range(copy.nlist):
            count = lists.list_size(cell)
            if count:  # the ids of an in-memory inverted list, renumbered in place
                ids = faiss.rev_swig_ptr(lists.get_ids(cell), count)
                ids[:] = np.searchsorted(kept, ids)
        data = faiss.serialize_index(copy)
        return data, covered

    def train(self, matrix: npt.NDArray[np.float32], seed: int = 0) -> None:
        """Train the cells on a sample of ``matrix`` (39 rows per cell: faiss asks as many)."""
        sample_size = min(len(matrix), self.cells * 39)
        rng = np.random.default_rng(seed)
        pick = np.sort(rng.choice(len(matrix), sample_size, replace=False))
        self._index.cp.niter = 10
        self._index.train(np.ascontiguousarray(matrix[pick], dtype=np.float32))

    def add(self, matrix: npt.NDArray[np.float32], upto: int) -> None:
        """Add rows ``size .. upto - 1`` of ``matrix`` (new vector rows, in order)."""
        if upto <= self.size:
            return
        block = np.ascontiguousarray(matrix[self.size : upto], dtype=np.float32)
        self._index.add(block)
        self.size = upto

    def candidates(
        self, query: npt.NDArray[np.float32], count: int, widen: int = 1
    ) -> npt.NDArray[np.int64]:
        """Up to ``count`` row numbers near ``query`` (unordered), scanning ``widen`` times
        the usual share of cells."""
        self._index.nprobe = min(self.cells, self.nprobe * widen)
        vector = np.ascontiguousarray(query, dtype=np.float32).reshape(1, -1)
        _, found = self._index.search(vector, count)
        rows: npt.NDArray[np.int64] = found[0]
        return rows[rows >= 0]

    @property
    def exhausted_at(self) -> int:
        """The ``widen`` from which every cell is scanned."""
        return max(1, math.ceil(self.cells / self.nprobe))
