"""Deterministic, in-process lexical BM25 index for short memory statements.

The index is an in-process projection (Python, with numpy for scoring): it holds no I/O,
no randomness and no wall-clock dependence, so rebuilding it from the same documents (in
any order) yields bit-identical scores and rankings.

Tokenization (:func:`tokenize`)
    0. Zero-width characters and soft hyphens (:data:`ledger.ids.INVISIBLE_CHARACTERS`)
       are dropped, as :func:`ledger.ids.normalize_statement` drops them: ``"ma\\u200btcha"``
       is the token ``"matcha"``, so a statement and the memory it is indexed as read alike.
    1. Unicode NFKC normalization (so full-width ``"ＬＧＢＴＱ"`` becomes ``"LGBTQ"`` and
       half-width katakana become full-width katakana).
    2. ``str.lower`` (not ``str.casefold``): ``"ß"`` stays ``"ß"``; only simple lowercase
       mappings are applied.
    3. Word tokens are maximal runs of Unicode word characters (Python ``re`` ``\\w+``).
       Everything else (whitespace, punctuation, apostrophes, hyphens, symbols) separates
       tokens, so ``"Caroline's"`` yields ``["caroline", "s"]`` and a query ``"Caroline"``
       matches it.  Note that ``\\w`` includes digits and ``_`` and excludes combining marks
       (category ``M*``), so scripts that rely on spacing/non-spacing marks (e.g. Devanagari)
       are split at the marks; this is applied identically to documents and queries.  One
       visible consequence: ``"İ".lower()`` is ``"i"`` + U+0307, so ``"İstanbul"`` yields
       ``["i", "stanbul"]`` (``casefold`` behaves the same).
    4. Inside each word token, maximal runs of CJK characters (code points in
       :data:`CJK_RANGES`) are replaced by their overlapping character bigrams; a CJK run of
       length 1 yields that single character.  Non-CJK parts of the same ``\\w`` run become
       their own tokens (``"2023年"`` -> ``["2023", "年"]``).  This mirrors Lucene's
       ``CJKBigramFilter`` (bigrams span script boundaries inside a CJK run).
    5. No stemming and no stop-word removal: BM25's IDF already down-weights very common
       terms, and the index must stay simple and predictable.

Scoring (:class:`BM25Index`)
    Okapi BM25 as given by Robertson & Zaragoza, "The Probabilistic Relevance Framework:
    BM25 and Beyond", Foundations and Trends in Information Retrieval 3(4), 2009, eq. 3.15::

        score(D, Q) = sum_{t in Q} qtf(t) * idf(t) * tf(t, D) * (k1 + 1)
                      / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))

    with the non-negative IDF used by Apache Lucene's ``BM25Similarity``::

        idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

    ``N`` is the number of indexed documents (including documents with no tokens), ``df(t)``
    the number of documents containing ``t``, ``|D|`` the token count of ``D`` and ``avgdl``
    the mean token count over all indexed documents.  Defaults: ``k1 = 1.2``, ``b = 0.75``.
    Unlike Lucene (>= 8) the constant ``(k1 + 1)`` factor is kept, as in the paper.

    Repeated query terms count once per occurrence (``qtf`` multiplies the term weight), which
    is the standard BM25 sum over query tokens; ``"paris paris"`` weighs ``paris`` twice.

Determinism
    Per-term contributions are summed in one fixed order (decreasing query-term weight, then
    term text; both depend only on the indexed document set and the query's multiset of
    tokens), and ``avgdl`` is derived from integer totals, so a document's score does not
    depend on insertion order, query-term order or incremental ``add``/``remove`` history.
    Results are ordered by ``(-score, position, doc_id)``.  Whether a search is scored with
    numpy arrays or on Python floats (:data:`VECTORISE_FROM`), every score is the same IEEE
    sum: each posting's ``(weight * tf) / (tf + norm)`` added in that order.

Cost (``python -m benchmarks bm25``; docs/benchmarks.md, "Lexical search at 1,000,000")
    Every posting of the query's terms is scored (no pruning): a few vectorised numpy
    operations per term over int32 arrays of the term's slots, term frequencies and
    document lengths, and a dense per-slot float64 accumulator. The synthetic million's
    questions touch about 100,000 postings each.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
import unicodedata
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any, cast

import msgspec

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import drop_invisible

if TYPE_CHECKING:  # numpy is imported on the first search that needs it (not by a CLI recall)
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "CJK_RANGES",
    "DEFAULT_B",
    "DEFAULT_K1",
    "BM25Index",
    "BM25State",
    "IndexedDoc",
    "ScoredDoc",
    "tokenize",
]

DEFAULT_K1: float = 1.2
"""Default BM25 term-frequency saturation parameter ``k1``."""

DEFAULT_B: float = 0.75
"""Default BM25 document-length normalization parameter ``b``."""

CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # Ideographic iteration mark, closing mark, number zero (々 〆 〇)
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana (incl. prolonged sound mark ー)
    (0x3130, 0x318F),  # Hangul Compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xA960, 0xA97F),  # Hangul Jamo Extended-A
    (0xAC00, 0xD7AF),  # Hangul Syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo Extended-B
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs (NFKC maps most to unified ones)
    (0xFF66, 0xFF9F),  # Half-width Katakana (NFKC maps these to full-width)
    (0xFFA0, 0xFFDC),  # Half-width Hangul (NFKC maps these to compatibility jamo)
    (0x1B000, 0x1B16F),  # Kana Supplement, Kana Extended-A, Small Kana Extension
    (0x20000, 0x2A6DF),  # CJK Unified Ideographs Extension B
    (0x2A700, 0x2EBEF),  # CJK Unified Ideographs Extensions C, D, E, F
    (0x2F800, 0x2FA1F),  # CJK Compatibility Ideographs Supplement
    (0x30000, 0x323AF),  # CJK Unified Ideographs Extensions G, H
)
"""Inclusive code-point ranges treated as CJK (Han, Kana, Hangul) by :func:`tokenize`.

Only characters that are also Unicode word characters (``\\w``) are ever considered, so
punctuation inside these blocks (e.g. katakana middle dot ``・``) still separates tokens.
"""

_CJK_CLASS = "".join(f"\\U{lo:08X}-\\U{hi:08X}" for lo, hi in CJK_RANGES)
_WORD_RE = re.compile(r"\w+")
_HAS_CJK_RE = re.compile(f"[{_CJK_CLASS}]")
_PLAIN_TERMS = re.compile(r"[a-z0-9_]+(?: [a-z0-9_]+)*")
"""Lowercase ASCII word characters in runs joined by single spaces (what
``commands.recall.lexical.analyze_document`` gives): ``\\w+`` finds exactly those runs."""
_CJK_SPLIT_RE = re.compile(f"([{_CJK_CLASS}]+)|([^{_CJK_CLASS}]+)")
VECTORISE_FROM = 512
"""A search whose query terms hold at least this many postings in all is scored with numpy
arrays; below, on Python floats in a dict (fewer fixed costs). Both compute the same sums."""

_Packed = tuple["npt.NDArray[np.int32]", "npt.NDArray[np.int32]", "npt.NDArray[np.int32]"]
"""One term's postings as numpy arrays ``(slots, tfs, lengths)``: the slots, the term's
frequency in each and each slot's document length; all int32, never written."""

_Pair = tuple["npt.NDArray[np.int32]", "npt.NDArray[np.int32]"]


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lexical tokens (see the module docstring for the full rules).

    Shape: ``str -> list[str]`` in text order, duplicates kept.  Zero-width characters and
    soft hyphens dropped (:func:`ledger.ids.drop_invisible`), NFKC, then ``str.lower``,
    then ``\\w+`` runs; CJK runs inside a word become overlapping character bigrams (a lone
    CJK character stays a unigram).  Deterministic and locale-independent.

    >>> tokenize("Caroline's ＬＧＢＴＱ 支持小组")
    ['caroline', 's', 'lgbtq', '支持', '持小', '小组']
    """
    if text.isascii():
        if _PLAIN_TERMS.fullmatch(text) is not None:
            return text.split(" ")  # already tokens (an analyzed document): the same list
        # The same tokens, fewer passes: ASCII holds no invisible character and no CJK, and
        # NFKC leaves every ASCII character as it is.
        ascii_words: list[str] = _WORD_RE.findall(text.lower())
        return ascii_words
    normalized = unicodedata.normalize("NFKC", drop_invisible(text)).lower()
    words: list[str] = _WORD_RE.findall(normalized)
    if _HAS_CJK_RE.search(normalized) is None:
        return words
    tokens: list[str] = []
    for word in words:
        if _HAS_CJK_RE.search(word) is None:
            tokens.append(word)
            continue
        for cjk, other in _CJK_SPLIT_RE.findall(word):
            if other:
                tokens.append(other)
            elif len(cjk) == 1:
                tokens.append(cjk)
            else:
                tokens.extend([cjk[i : i + 2] for i in range(len(cjk) - 1)])
    return tokens


class IndexedDoc(msgspec.Struct, frozen=True):
    """A document to index.

    ``doc_id`` is a stable unique identifier, ``position`` an integer tie-break key (lower
    ranks first among equal scores, e.g. ledger sequence number) and ``text`` the statement.
    """

    doc_id: str
    position: int
    text: str


class ScoredDoc(msgspec.Struct, frozen=True):
    """A search hit: the document's ``doc_id`` and ``position`` and its BM25 ``score`` (> 0)."""

    doc_id: str
    position: int
    score: float


class BM25State(msgspec.Struct, frozen=True, array_like=True):
    """A :class:`BM25Index` as a few flat arrays, for a persisted read model (msgpack).

    Slots keep their numbers: ``ids`` is the slots' document ids joined by newlines (``""``
    for a free slot, listed in ``free``); ``positions`` (int64) and ``lengths`` (int32) per
    slot; ``vocabulary`` the sorted terms joined by newlines (tokens hold no whitespace);
    term ``t``'s postings are ``post_slots[post_offsets[t]:post_offsets[t + 1]]`` with the
    same range of ``post_tfs``; slot ``s``'s distinct terms (for removal) are
    ``term_ids[term_offsets[s]:term_offsets[s + 1]]``, in the order it indexed them. Arrays
    are native-endian ``array.array`` bytes. An index restored from it
    (:meth:`BM25Index.from_state`) scores exactly as the one it was taken from.
    """

    k1: float
    b: float
    total_len: int
    max_len: int
    free: list[int]
    ids: str
    positions: bytes
    lengths: bytes
    vocabulary: str
    post_offsets: bytes
    post_slots: bytes
    post_tfs: bytes
    term_offsets: bytes
    term_ids: bytes


def _ints(typecode: str, raw: bytes) -> array[int]:
    values = array(typecode)
    values.frombytes(raw)
    return values


class _Postings:
    """The flat posting arrays of a restored index (see :class:`BM25State`)."""

    __slots__ = ("offsets", "slots", "tfs")

    def __init__(self, state: BM25State) -> None:
        self.offsets = _ints("q", state.post_offsets)
        self.slots = _ints("i", state.post_slots)
        self.tfs = _ints("i", state.post_tfs)

    def pairs(self, number: int) -> tuple[array[int], array[int]]:
        start, end = self.offsets[number], self.offsets[number + 1]
        return self.slots[start:end], self.tfs[start:end]

    def size(self, number: int) -> int:
        """How many postings term ``number`` has."""
        return self.offsets[number + 1] - self.offsets[number]

    def packed(self, number: int) -> _Pair:
        """Term ``number``'s postings as read-only numpy views of the arrays (no copy)."""
        import numpy as np

        start, end = self.offsets[number], self.offsets[number + 1]
        slots = np.frombuffer(self.slots, dtype=np.int32)[start:end]
        tfs = np.frombuffer(self.tfs, dtype=np.int32)[start:end]
        slots.flags.writeable = False
        tfs.flags.writeable = False
        return slots, tfs


class _LazyPostings(dict[str, dict[int, int]]):
    """Posting lists of a restored index, each turned into a dict on its first use (a
    search reads only its query's terms, so opening a large index stays cheap)."""

    __slots__ = ("_arrays", "_raw")

    def __init__(self, raw: dict[str, int], arrays: _Postings) -> None:
        super().__init__()
        self._raw = raw
        self._arrays = arrays

    def _load(self, term: str) -> dict[int, int] | None:
        number = self._raw.pop(term, None)
        if number is None:
            return None
        slots, tfs = self._arrays.pairs(number)
        plist = dict(zip(slots.tolist(), tfs.tolist(), strict=True))
        dict.__setitem__(self, term, plist)
        return plist

    def get(self, term: str, default: Any = None) -> Any:
        plist = dict.get(self, term)
        if plist is None:
            plist = self._load(term)
        return default if plist is None else plist

    def __getitem__(self, term: str) -> dict[int, int]:
        plist = self.get(term)
        if plist is None:
            raise KeyError(term)
        return cast(dict[int, int], plist)

    def __contains__(self, term: object) -> bool:
        return dict.__contains__(self, term) or term in self._raw

    def __delitem__(self, term: str) -> None:
        if dict.__contains__(self, term):
            dict.__delitem__(self, term)
        else:
            del self._raw[term]

    def __len__(self) -> int:
        return dict.__len__(self) + len(self._raw)

    def __iter__(self) -> Iterator[str]:
        yield from list(dict.keys(self))
        yield from list(self._raw)

    def copy(self) -> _LazyPostings:
        """An independent copy sharing the (never mutated) flat arrays: the posting lists
        turned into dicts are copied, the others stay in the arrays."""
        new = _LazyPostings(dict(self._raw), self._arrays)
        for term, plist in dict.items(self):
            dict.__setitem__(new, term, dict(plist))
        return new

    def pairs(self, term: str) -> tuple[Iterable[int], Iterable[int]]:
        """``(slots, tfs)`` of ``term`` without turning it into a dict."""
        number = self._raw.get(term)
        if number is not None:
            return self._arrays.pairs(number)
        plist = dict.__getitem__(self, term)
        return plist.keys(), plist.values()

    def size(self, term: str) -> int:
        """How many postings ``term`` has (0 when absent), without turning it into a dict."""
        number = self._raw.get(term)
        if number is not None:
            return self._arrays.size(number)
        plist = dict.get(self, term)
        return 0 if plist is None else len(plist)

    def raw_terms(self) -> Mapping[str, int]:
        """The terms still in the flat arrays (not yet dicts), with their numbers."""
        return self._raw

    def raw_packed(self, term: str) -> _Pair | None:
        """``term``'s postings as numpy views of the flat arrays while it is not yet a
        dict (None once it is, or when absent)."""
        number = self._raw.get(term)
        return None if number is None else self._arrays.packed(number)


class _LazyTerms(list[tuple[str, ...]]):
    """The distinct terms of each slot of a restored index, read from the arrays on first
    use (only a removal needs them)."""

    def __init__(self, state: BM25State, vocabulary: list[str], slots: int) -> None:
        super().__init__([()] * slots)
        self._loaded = bytearray(slots)
        self._offsets = _ints("q", state.term_offsets)
        self._ids = _ints("i", state.term_ids)
        self._vocabulary = vocabulary

    def __getitem__(self, slot: Any) -> Any:
        if isinstance(slot, int) and slot < len(self._loaded) and not self._loaded[slot]:
            start, end = self._offsets[slot], self._offsets[slot + 1]
            vocabulary = self._vocabulary
            terms = tuple(vocabulary[t] for t in self._ids[start:end])
            list.__setitem__(self, slot, terms)
            self._loaded[slot] = 1
            return terms
        return list.__getitem__(self, slot)

    def __setitem__(self, slot: Any, value: Any) -> None:
        if isinstance(slot, int) and slot < len(self._loaded):
            self._loaded[slot] = 1
        list.__setitem__(self, slot, value)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        for slot in range(len(self)):
            yield self[slot]

    def copy(self) -> _LazyTerms:
        """An independent copy sharing the (never mutated) arrays: no slot is decoded."""
        new = _LazyTerms.__new__(_LazyTerms)
        list.__init__(new, list.__iter__(self))
        new._loaded = bytearray(self._loaded)
        new._offsets = self._offsets
        new._ids = self._ids
        new._vocabulary = self._vocabulary
        return new


class BM25Index:
    """In-memory inverted index with Okapi BM25 ranking (Robertson & Zaragoza 2009; Lucene IDF).

    Layout: each live document occupies an integer slot (slots of removed documents are
    reused); ``_postings`` maps ``term -> {slot: tf}`` (for a restored index, a term's list
    stays in the flat arrays of its :class:`BM25State` until a mutation touches it);
    per-slot columns hold ``doc_id``, ``position`` (int64), token length (int32) and the
    distinct terms (for removal).  Length normalizers ``k1 * (1 - b + b * dl / avgdl)``
    depend only on the integer length ``dl``, so they are kept in a table indexed by ``dl``
    (size: longest document ever indexed + 1), rebuilt lazily on the first search after a
    mutation; no per-mutation O(N) work.

    Search is term-at-a-time and vectorised (numpy) over the query terms' posting lists
    only: ``_packed`` caches each searched term's postings as three int32 arrays ``(slots,
    tfs, document lengths)`` in the dict's order (for a restored term still in the flat
    arrays, slots and tfs are views of them, no copy). An ``add`` appends to a term's dict,
    so the cache is a prefix of it and is extended on the next search; a ``remove`` notes
    the slot against its terms' caches (``_stale``), filtered out on their next search.
    Scores accumulate in a dense per-slot float64 array (one per concurrent search, kept
    zeroed between searches), in a fixed term order, so every score is the same IEEE sum,
    operation for operation, as the plain term-at-a-time scorer over dicts: results equal
    an exhaustive evaluation exactly (not within a tolerance). Queries with fewer than
    :data:`VECTORISE_FROM` postings in all are scored the same way on Python floats.

    Searches may run concurrently with each other; callers must serialize mutations against
    searches.
    """

    __slots__ = (
        "_b",
        "_docs",
        "_free",
        "_ids",
        "_k1",
        "_len_norms",
        "_len_norms_array",
        "_len_norms_valid",
        "_lengths",
        "_max_len",
        "_packed",
        "_positions",
        "_postings",
        "_scratch",
        "_stale",
        "_lock",
        "_slot_of",
        "_terms",
        "_total_len",
    )

    def __init__(self, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        """Create an empty index with BM25 parameters ``k1 >= 0`` and ``0 <= b <= 1``."""
        if not (math.isfinite(k1) and k1 >= 0.0):
            msg = f"k1 must be a finite number >= 0, got {k1!r}"
            raise InvalidArgumentError(msg, parameter="k1")
        if not (0.0 <= b <= 1.0):
            msg = f"b must be in [0, 1], got {b!r}"
            raise InvalidArgumentError(msg, parameter="b")
        self._k1 = float(k1)
        self._b = float(b)
        self._postings: dict[str, dict[int, int]] = {}
        # Search cache: term -> its postings as int32 arrays, a prefix of the dict's order.
        self._packed: dict[str, _Packed] = {}
        # Zeroed per-slot accumulators, one taken per running search.
        self._scratch: list[npt.NDArray[np.float64]] = []
        # term -> slots removed from its dict since its cache was made (filtered out of the
        # cache on the term's next search), and the lock searches update the cache under.
        self._stale: dict[str, set[int]] = {}
        self._lock = threading.Lock()
        # int64 positions and int32 lengths per slot: numpy reads them in place (a view
        # per search; none is kept, so an append can always resize them).
        self._slot_of: dict[str, int] = {}
        self._docs: list[IndexedDoc | None] = []
        self._ids: list[str] = []
        self._positions: array[int] = array("q")
        self._lengths: array[int] = array("i")
        self._terms: list[tuple[str, ...]] = []
        self._max_len = 0  # longest document ever indexed (never decreases)
        self._len_norms: list[float] = [0.0]
        self._len_norms_array: npt.NDArray[np.float64] | None = None  # the same, for numpy
        self._len_norms_valid = False
        self._free: list[int] = []
        self._total_len = 0

    @classmethod
    def build(
        cls, docs: Iterable[IndexedDoc], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B
    ) -> BM25Index:
        """Return a new index over ``docs``; raises ``ValueError`` on a duplicate ``doc_id``."""
        index = cls(k1=k1, b=b)
        for doc in docs:
            index.add(doc)
        return index

    def state(self) -> BM25State:
        """This index as a :class:`BM25State` (a copy: later mutations do not touch it).
        Deterministic for a given sequence of mutations (terms sorted)."""
        postings = self._postings
        lazy = postings if isinstance(postings, _LazyPostings) else None
        vocabulary = sorted(postings)
        number = {term: i for i, term in enumerate(vocabulary)}
        post_offsets, post_slots, post_tfs = array("q", [0]), array("i"), array("i")
        for term in vocabulary:
            if lazy is not None:
                slots, tfs = lazy.pairs(term)
            else:
                plist = postings[term]
                slots, tfs = plist.keys(), plist.values()
            post_slots.extend(slots)
            post_tfs.extend(tfs)
            post_offsets.append(len(post_slots))
        term_offsets, term_ids = array("q", [0]), array("i")
        for terms in self._terms:
            term_ids.extend([number[t] for t in terms])
            term_offsets.append(len(term_ids))
        return BM25State(
            k1=self._k1,
            b=self._b,
            total_len=self._total_len,
            max_len=self._max_len,
            free=list(self._free),
            ids="\n".join(self.state_slots()),
            positions=self._positions.tobytes(),
            lengths=self._lengths.tobytes(),
            vocabulary="\n".join(vocabulary),
            post_offsets=post_offsets.tobytes(),
            post_slots=post_slots.tobytes(),
            post_tfs=post_tfs.tobytes(),
            term_offsets=term_offsets.tobytes(),
            term_ids=term_ids.tobytes(),
        )

    def copy(self) -> BM25Index:
        """An independent copy: later mutations of either do not touch the other, and both
        rank as this index does now. A restored index (:meth:`from_state`) shares its
        flat arrays with the copy (they are never mutated), so the copy costs a few list
        copies of one entry per slot plus the posting lists already turned into dicts; an
        index built in memory copies every posting list. The search cache is shared (its
        arrays are never written; each side replaces its own entries)."""
        new = BM25Index.__new__(BM25Index)
        new._k1, new._b = self._k1, self._b
        postings = self._postings
        new._postings = (
            postings.copy()
            if isinstance(postings, _LazyPostings)
            else {term: dict(plist) for term, plist in postings.items()}
        )
        new._packed = dict(self._packed)
        new._scratch = []
        new._stale = {term: set(slots) for term, slots in self._stale.items()}
        new._lock = threading.Lock()
        new._slot_of = dict(self._slot_of)
        new._docs = list(self._docs)
        new._ids = list(self._ids)
        new._positions = self._positions[:]
        new._lengths = self._lengths[:]
        terms = self._terms
        new._terms = terms.copy() if isinstance(terms, _LazyTerms) else list(terms)
        new._max_len = self._max_len
        new._len_norms = self._len_norms  # replaced, never mutated, when rebuilt
        new._len_norms_array = self._len_norms_array
        new._len_norms_valid = self._len_norms_valid
        new._free = list(self._free)
        new._total_len = self._total_len
        return new

    def state_slots(self) -> list[str]:
        """The document id of every slot in slot order (``""`` for a free slot): the
        order of :attr:`BM25State.ids`."""
        free = set(self._free)
        return ["" if s in free else d for s, d in enumerate(self._ids)]

    @property
    def slots(self) -> int:
        """How many slots the index has (live and free)."""
        return len(self._ids)

    def slot_map(self) -> Mapping[str, int]:
        """The live ``doc_id -> slot`` map (a view that follows mutations; do not modify)."""
        return self._slot_of

    @classmethod
    def from_state(cls, state: BM25State) -> BM25Index:
        """The index ``state`` describes; posting lists are searched in place in its flat
        arrays and become dicts when a mutation first touches them; a slot's terms are read
        on its removal. A restored index keeps no document texts: :meth:`get` and
        :meth:`remove` return the document with an empty ``text``.

        :raises InvalidArgumentError: the state's arrays disagree in length (a damaged file).
        """
        positions = _ints("q", state.positions)
        ids = state.ids.split("\n") if len(positions) else []
        vocabulary = state.vocabulary.split("\n") if len(state.post_offsets) > 8 else []
        slots = len(ids)
        arrays = _Postings(state)
        lengths = _ints("i", state.lengths)
        if not (
            len(positions) == len(lengths) == slots
            and len(arrays.offsets) == len(vocabulary) + 1
            and len(arrays.slots) == len(arrays.tfs) == arrays.offsets[-1]
            and len(state.term_offsets) == 8 * (slots + 1)
        ):
            msg = "BM25 state arrays disagree in length"
            raise InvalidArgumentError(msg, parameter="state", reason_code="damaged_state")
        index = cls(k1=state.k1, b=state.b)
        index._ids = ids
        index._positions = positions
        index._lengths = lengths
        index._terms = _LazyTerms(state, vocabulary, slots)
        index._docs = [None] * slots
        if state.free:
            free = set(state.free)
            index._slot_of = {d: s for s, d in enumerate(ids) if s not in free}
        else:
            index._slot_of = dict(zip(ids, range(slots), strict=True))
        index._free = list(state.free)
        index._total_len = state.total_len
        index._max_len = state.max_len
        index._postings = _LazyPostings(
            {term: number for number, term in enumerate(vocabulary)}, arrays
        )
        return index

    @property
    def k1(self) -> float:
        """BM25 term-frequency saturation parameter."""
        return self._k1

    @property
    def b(self) -> float:
        """BM25 document-length normalization parameter."""
        return self._b

    @property
    def avgdl(self) -> float:
        """Mean token count over indexed documents (0.0 when empty)."""
        n = len(self._slot_of)
        return self._total_len / n if n else 0.0

    def __len__(self) -> int:
        """Number of indexed documents."""
        return len(self._slot_of)

    def __contains__(self, doc_id: object) -> bool:
        """Whether a document with ``doc_id`` is indexed."""
        return doc_id in self._slot_of

    def get(self, doc_id: str) -> IndexedDoc | None:
        """Return the indexed document with ``doc_id``, or ``None``."""
        slot = self._slot_of.get(doc_id)
        if slot is None:
            return None
        return self._docs[slot] or IndexedDoc(doc_id, self._positions[slot], "")

    def document_frequency(self, term: str) -> int:
        """Number of indexed documents containing the (already tokenized) ``term``."""
        postings = self._postings
        if isinstance(postings, _LazyPostings):
            return postings.size(term)
        plist = postings.get(term)
        return 0 if plist is None else len(plist)

    def add(self, doc: IndexedDoc) -> None:
        """Index ``doc``; raises :class:`InvalidArgumentError` (a ``ValueError``) if its
        ``doc_id`` is already indexed.

        O(|tokens|); invalidates the cached length normalizers (avgdl changed).
        """
        if doc.doc_id in self._slot_of:
            msg = f"duplicate doc_id {doc.doc_id!r}"
            raise InvalidArgumentError(msg, parameter="doc", reason_code="duplicate_doc_id")
        tokens = tokenize(doc.text)
        counts: dict[str, int] = {}  # term frequencies, in first-seen order (as a Counter's)
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
        dl = len(tokens)
        if self._free:
            slot = self._free.pop()
            self._docs[slot] = doc
            self._ids[slot] = doc.doc_id
            self._positions[slot] = doc.position
            self._lengths[slot] = dl
            self._terms[slot] = tuple(counts)
        else:
            slot = len(self._docs)
            self._docs.append(doc)
            self._ids.append(doc.doc_id)
            self._positions.append(doc.position)
            self._lengths.append(dl)
            self._terms.append(tuple(counts))
        postings = self._postings
        for term, tf in counts.items():
            plist = postings.get(term)
            if plist is None:
                postings[term] = {slot: tf}
            else:
                plist[slot] = tf  # a new key: appended, so a cached prefix stays valid
        self._slot_of[doc.doc_id] = slot
        self._total_len += dl
        if dl > self._max_len:
            self._max_len = dl
        self._len_norms_valid = False

    def remove(self, doc_id: str) -> IndexedDoc:
        """Unindex and return the document with ``doc_id``; raises ``KeyError`` if absent.

        O(distinct terms of the document); invalidates the cached length normalizers; the
        slot is taken out of its terms' search caches on their next search.
        """
        slot = self._slot_of.pop(doc_id)
        doc = self._docs[slot] or IndexedDoc(doc_id, self._positions[slot], "")
        postings, packed, stale = self._postings, self._packed, self._stale
        for term in self._terms[slot]:
            plist = postings[term]
            del plist[slot]
            if not plist:
                del postings[term]
                packed.pop(term, None)
                stale.pop(term, None)
            elif term in packed:
                stale.setdefault(term, set()).add(slot)
        self._total_len -= self._lengths[slot]
        self._docs[slot] = None
        self._terms[slot] = ()
        self._lengths[slot] = 0
        self._free.append(slot)
        self._len_norms_valid = False
        return doc

    def _norm_avgdl(self) -> float:
        """avgdl for length normalization; 1.0 when no document has tokens (nothing matches)."""
        n = len(self._slot_of)
        return self._total_len / n if n and self._total_len else 1.0

    def _current_len_norms(self) -> list[float]:
        """Table ``dl -> k1 * (1 - b + b * dl / avgdl)``, rebuilt if the corpus changed."""
        if not self._len_norms_valid:
            avgdl = self._norm_avgdl()
            k1, b = self._k1, self._b
            one_minus_b = 1.0 - b
            self._len_norms = [
                k1 * (one_minus_b + b * dl / avgdl) for dl in range(self._max_len + 1)
            ]
            self._len_norms_array = None
            self._len_norms_valid = True
        return self._len_norms

    def _len_norms_numpy(self) -> npt.NDArray[np.float64]:
        """:meth:`_current_len_norms` as a float64 array (the same values)."""
        import numpy as np

        norms = self._current_len_norms()
        table = self._len_norms_array
        if table is None or len(table) != len(norms):
            table = np.array(norms, dtype=np.float64)
            self._len_norms_array = table
        return table

    def _term_arrays(self, term: str) -> _Packed | None:
        """``term``'s postings as int32 arrays ``(slots, tfs, lengths)`` in the dict's
        order, from the cache (extended by the postings added since), or None when absent.

        The cache is a prefix of the dict once the slots removed since it was made
        (``_stale``) are filtered out of it: an addition appends to the dict, a removal
        deletes one key and leaves the others' order. A slot's length changes only when its
        document is removed, which filters the slot out of every term of that document (a
        reused slot's new postings come with the tail, with their new length)."""
        with self._lock:  # concurrent searches: one filters or extends, the others wait
            return self._term_arrays_locked(term)

    def _term_arrays_locked(self, term: str) -> _Packed | None:
        import numpy as np

        cached = self._packed.get(term)
        removed = self._stale.pop(term, None)
        if removed is not None and cached is not None:
            gone = np.fromiter(removed, dtype=np.int32, count=len(removed))
            keep = ~np.isin(cached[0], gone)
            cached = self._cache(term, cached[0][keep], cached[1][keep], cached[2][keep])
        postings = self._postings
        lengths = np.frombuffer(self._lengths, dtype=np.int32)
        if isinstance(postings, _LazyPostings):
            if cached is None:
                # Views of the flat arrays; still a prefix of the dict a mutation makes.
                raw = postings.raw_packed(term)
                if raw is not None:
                    return self._cache(term, raw[0], raw[1], lengths[raw[0]])
            elif term in postings.raw_terms():
                return cached
            plist = dict.get(postings, term)
        else:
            plist = postings.get(term)
        if plist is None:
            return None
        count = len(plist)
        if cached is not None and len(cached[0]) == count:
            return cached
        if cached is not None:
            done = len(cached[0])
            tail = list(islice(reversed(plist.items()), count - done))
            tail.reverse()
            more = np.array([s for s, _ in tail], dtype=np.int32)
            return self._cache(
                term,
                np.concatenate((cached[0], more)),
                np.concatenate((cached[1], np.array([t for _, t in tail], dtype=np.int32))),
                np.concatenate((cached[2], lengths[more])),
            )
        slots = np.fromiter(plist.keys(), dtype=np.int32, count=count)
        tfs = np.fromiter(plist.values(), dtype=np.int32, count=count)
        return self._cache(term, slots, tfs, lengths[slots])

    def _cache(
        self,
        term: str,
        slots: npt.NDArray[np.int32],
        tfs: npt.NDArray[np.int32],
        lengths: npt.NDArray[np.int32],
    ) -> _Packed:
        for column in (slots, tfs, lengths):
            column.flags.writeable = False
        packed = (slots, tfs, lengths)
        self._packed[term] = packed
        return packed

    def search(self, query: str, k: int) -> list[ScoredDoc]:
        """Return the top ``k`` documents for ``query`` by BM25 score.

        Shape: ``(str, int) -> list[ScoredDoc]``, at most ``k`` hits, every score > 0,
        ordered by ``(-score, position, doc_id)``.  Returns ``[]`` when ``k <= 0``, the
        query has no tokens, or no query token occurs in the index.  Cost is bounded by the
        summed posting-list lengths of the query terms (no scan of all documents), each
        posting scored by a few vectorised numpy operations (from :data:`VECTORISE_FROM`
        postings in all; below, on Python floats, and numpy is not imported).
        """
        if k <= 0 or not self._slot_of:
            return []
        qtf = Counter(tokenize(query))
        if not qtf:
            return []
        n = len(self._slot_of)
        k1p1 = self._k1 + 1.0
        terms: list[tuple[float, str]] = []
        total = 0
        for term, count in qtf.items():
            df = self.document_frequency(term)
            if df:
                idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
                terms.append((count * idf * k1p1, term))
                total += df
        if not terms:
            return []
        # Fixed visiting order (weight desc, then term): each document's floating-point sum is
        # accumulated in this order, so scores do not depend on insertion or query-term order.
        terms.sort(key=lambda entry: (-entry[0], entry[1]))
        if total < VECTORISE_FROM:
            return self._search_small(terms, k)
        return self._search_arrays(terms, k)

    def _search_arrays(self, terms: list[tuple[float, str]], k: int) -> list[ScoredDoc]:
        """:meth:`search` with numpy, ``terms`` ``(weight, term)`` in visiting order."""
        import numpy as np

        norms = self._len_norms_numpy()
        acc = self._take_scratch(len(self._ids))
        # Every contribution is > 0 (idf > 0, tf >= 1), so a slot whose accumulator is 0.0
        # before a term is one no earlier term matched: the candidates are each list's
        # first-seen slots, without a sort or a set.
        parts: list[npt.NDArray[np.int32]] = []
        for weight, term in terms:
            found = self._term_arrays(term)
            if found is None:
                continue
            slots, tfs, dls = found
            # The same IEEE operations, in the same order, as weight * tf / (tf + norm)
            # on Python floats: (weight * tf) / (tf + norm), tf converted exactly.
            ftfs = tfs.astype(np.float64)
            gained = weight * ftfs / (ftfs + norms[dls])
            if not parts:
                acc[slots] = gained
                parts.append(slots)
                continue
            before = acc[slots]
            fresh = before == 0.0
            acc[slots] = before + gained
            parts.append(slots if fresh.all() else slots[fresh])
        candidates = parts[0] if len(parts) == 1 else np.concatenate(parts)
        scores = acc[candidates]
        acc[candidates] = 0.0
        self._scratch.append(acc)
        return self._top(candidates, scores, k)

    def _search_small(self, terms: list[tuple[float, str]], k: int) -> list[ScoredDoc]:
        """:meth:`search` over few postings: the same sums on Python floats in a dict (the
        scorer of old, without pruning), the top ``k`` by the full key."""
        norms, lengths = self._current_len_norms(), self._lengths
        postings = self._postings
        lazy = postings if isinstance(postings, _LazyPostings) else None
        acc: dict[int, float] = {}
        get = acc.get
        for weight, term in terms:
            if lazy is not None:
                slots, tfs = lazy.pairs(term)
            else:
                plist = postings[term]
                slots, tfs = plist.keys(), plist.values()
            for slot, tf in zip(slots, tfs, strict=True):
                acc[slot] = get(slot, 0.0) + weight * tf / (tf + norms[lengths[slot]])
        if len(acc) > k:
            threshold = heapq.nlargest(k, acc.values())[-1]
            selected = [(slot, score) for slot, score in acc.items() if score >= threshold]
        else:
            selected = list(acc.items())
        positions, ids = self._positions, self._ids
        top = heapq.nsmallest(
            k, selected, key=lambda hit: (-hit[1], positions[hit[0]], ids[hit[0]])
        )
        return [ScoredDoc(ids[slot], positions[slot], score) for slot, score in top if score > 0]

    def _take_scratch(self, size: int) -> npt.NDArray[np.float64]:
        """A zeroed float64 accumulator of at least ``size`` entries (from the pool; a new
        one has a quarter more room, so a growing index does not allocate one per
        search)."""
        import numpy as np

        try:
            acc = self._scratch.pop()  # atomic: concurrent searches take different ones
        except IndexError:
            acc = None
        if acc is None or len(acc) < size:
            acc = np.zeros(size + size // 4 + 16)
        return acc

    def _top(
        self, candidates: npt.NDArray[np.int32], scores: npt.NDArray[np.float64], k: int
    ) -> list[ScoredDoc]:
        """The best ``k`` of ``candidates`` by ``(-score, position, doc_id)``."""
        import numpy as np

        keep = scores > 0.0
        if not keep.all():
            candidates, scores = candidates[keep], scores[keep]
        count = len(candidates)
        if count > k:
            # The k-th best score; every candidate at or above it (ties included) stays.
            threshold = np.partition(scores, count - k)[count - k]
            keep = scores >= threshold
            candidates, scores = candidates[keep], scores[keep]
        positions = np.frombuffer(self._positions, dtype=np.int64)[candidates]
        order = np.lexsort((positions, -scores))
        if len(order) > k:
            # Ties on (score, position) across the k-th place are broken by doc_id below:
            # keep the whole tied run.
            last = order[k - 1]
            end = k
            while (
                end < len(order)
                and scores[order[end]] == scores[last]
                and positions[order[end]] == positions[last]
            ):
                end += 1
            order = order[:end]
        ids = self._ids
        hits = [
            (-float(scores[i]), int(positions[i]), ids[slot])
            for i, slot in zip(order.tolist(), candidates[order].tolist(), strict=True)
        ]
        hits.sort()  # equal (score, position) pairs in doc_id order
        del hits[k:]
        return [ScoredDoc(doc_id, position, -negated) for negated, position, doc_id in hits]
