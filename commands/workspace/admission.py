"""Which files of a workspace may enter retrieval: the admission rules and the tree scan.

Seed 002 ("Text admission and chunking"): only UTF-8 text and source files enter the
catalog; generated files, oversized files, credentials, key material, control paths and
non-text assets are left out before chunking and before any embedding. Here:

* the scan (:func:`scan_tree`) walks the root without following symbolic links and never
  descends into generated or control folders (:data:`GENERATED_DIRS`, names ending in
  ``.egg-info``) or a memory-ledger store (a folder holding ``ledger/data.mdb``, or a path
  the host lists in ``AdmissionRules.exclude``); it leaves out by name credential files
  (:data:`CREDENTIAL_NAMES`, :data:`CREDENTIAL_SUFFIXES`) and non-text assets
  (:data:`BINARY_SUFFIXES`), files and folders whose name is not valid UTF-8
  (``not_utf8``: a hit's path is cited and recorded), by path files whose relative path
  holds a secret shape (``secret``: a hit's path is cited to the model and recorded), by
  size files over
  ``max_file_bytes``, and symbolic links;
* the content check (:func:`admit_content`) leaves out bytes holding a NUL byte (binary),
  bytes that are not strict UTF-8, and text in which the engine's secret detection
  (:func:`commands.secrets.contains_secret`) finds a secret.

Every file left out is counted under its :data:`ExclusionReason`; a skipped folder counts
once (its files are never listed). Paths are relative to the root, ``/``-separated.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import msgspec

from memory_ledger.commands.secrets import contains_secret
from memory_ledger.ledger.errors import InvalidArgumentError

__all__ = [
    "BINARY_SUFFIXES",
    "CREDENTIAL_NAMES",
    "CREDENTIAL_SUFFIXES",
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_FILES",
    "GENERATED_DIRS",
    "AdmissionRules",
    "ExclusionReason",
    "FileEntry",
    "TreeScan",
    "admit_content",
    "scan_tree",
]

ExclusionReason = Literal[
    "generated",
    "store",
    "symlink",
    "credential_file",
    "binary",
    "not_utf8",
    "too_large",
    "secret",
    "unreadable",
    "file_limit",
]
"""Why a file (or, for ``generated`` and ``store``, a folder) was left out."""

DEFAULT_MAX_FILE_BYTES = 1024 * 1024
"""Files larger than this (1 MiB) are left out (this module's choice; the seed gives none)."""

DEFAULT_MAX_FILES = 50_000
"""At most this many files are admitted to one workspace index (bounded, seed 002)."""

GENERATED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".a3s",
        "node_modules",
        "bower_components",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".gradle",
        ".next",
        ".nuxt",
        ".cache",
        ".eggs",
        "build",
        "dist",
        "target",
        "htmlcov",
    }
)
"""Folder names never descended into: version control, dependencies, caches, build outputs."""

CREDENTIAL_NAMES = frozenset(
    {
        ".env",
        ".netrc",
        ".pgpass",
        ".htpasswd",
        ".npmrc",
        ".pypirc",
        "credentials",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
    }
)
"""File names of credential and key files (``.env.*`` files count too)."""

CREDENTIAL_SUFFIXES = frozenset(
    {".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".gpg", ".asc"}
)
"""File suffixes of key material."""

BINARY_SUFFIXES = frozenset(
    {
        ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".ico", ".webp", ".tif", ".tiff", ".psd",
        ".pdf", ".doc", ".docx", ".xls", ".xlsx", ".ppt", ".pptx", ".odt", ".ods",
        ".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".rar", ".tar", ".whl", ".jar",
        ".mp3", ".mp4", ".wav", ".flac", ".ogg", ".mov", ".avi", ".mkv", ".webm",
        ".so", ".dll", ".dylib", ".exe", ".o", ".a", ".pyc", ".pyo", ".class", ".wasm",
        ".bin", ".dat", ".db", ".sqlite", ".duckdb", ".mdb", ".parquet", ".arrow",
        ".npy", ".npz", ".pt", ".pth", ".onnx", ".safetensors", ".ttf", ".otf", ".woff",
        ".woff2",
    }
)  # fmt: skip
"""Suffixes of non-text assets (PDF, Office, images, audio, archives, binaries), left out
by name: compiling them into text belongs to a knowledge compiler, not to retrieval."""


class AdmissionRules(msgspec.Struct, frozen=True, kw_only=True):
    """The admission limits of one workspace index.

    ``max_file_bytes`` (default 1 MiB) bounds a file's size; ``max_files`` (default 50,000)
    the number of files admitted; ``exclude`` lists further paths (absolute, or relative to
    the root) never descended into, counted as ``store`` (the engine adds its own store).

    :raises InvalidArgumentError: (a ``ValueError``) a limit is not a positive integer.
    """

    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_files: int = DEFAULT_MAX_FILES
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("max_file_bytes", "max_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                msg = f"AdmissionRules.{name} must be a positive integer, got {value!r}"
                raise InvalidArgumentError(msg, parameter=name)


class FileEntry(msgspec.Struct, frozen=True):
    """A file the scan kept: ``path`` relative to the root (``/``-separated), ``size`` in
    bytes and ``mtime_ns`` when it was listed."""

    path: str
    size: int
    mtime_ns: int


class TreeScan(msgspec.Struct, frozen=True):
    """What one scan found: the files to read (sorted by path) and what it left out."""

    files: tuple[FileEntry, ...]
    excluded: dict[str, int]


def _credential(name: str) -> bool:
    lower = name.lower()
    if lower in CREDENTIAL_NAMES or lower.startswith(".env."):
        return True
    return os.path.splitext(lower)[1] in CREDENTIAL_SUFFIXES


def _is_store(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "ledger", "data.mdb"))


def _excluded_paths(root: Path, extra: Iterable[str]) -> frozenset[str]:
    paths = set()
    for item in extra:
        candidate = Path(item)
        if not candidate.is_absolute():
            candidate = root / candidate
        paths.add(os.path.realpath(candidate))
    return frozenset(paths)


def _utf8_name(name: str) -> bool:
    """Whether a file name read from the file system is valid UTF-8 (Python decodes the
    other bytes to lone surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scan_tree(root: Path, rules: AdmissionRules) -> TreeScan:
    """List the files under ``root`` that may be read (by name, type and size).

    Never follows a symbolic link and never leaves ``root``. Unlistable folders count as
    ``unreadable``. Deterministic: folders are walked in name order.

    :raises OSError: ``root`` itself cannot be listed.
    """
    root = Path(os.path.realpath(root))
    skip = _excluded_paths(root, rules.exclude)
    excluded: Counter[str] = Counter()
    files: list[FileEntry] = []
    pending: list[tuple[str, str]] = [(str(root), "")]
    first = True
    while pending:
        folder, prefix = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            if first:
                raise
            excluded["unreadable"] += 1
            continue
        first = False
        subfolders: list[tuple[str, str]] = []
        for entry in entries:
            rel = prefix + entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                excluded["unreadable"] += 1
                continue
            if stat.S_ISLNK(info.st_mode):
                excluded["symlink"] += 1
            elif not _utf8_name(entry.name):
                # its path would be cited to the model and recorded (WorkspaceSearched): a
                # name that is not UTF-8 can be neither, so the file (or folder) is left out
                excluded["not_utf8"] += 1
            elif stat.S_ISDIR(info.st_mode):
                if entry.name in GENERATED_DIRS or entry.name.endswith(".egg-info"):
                    excluded["generated"] += 1
                elif entry.path in skip or _is_store(entry.path):
                    excluded["store"] += 1
                else:
                    subfolders.append((entry.path, rel + "/"))
            elif not stat.S_ISREG(info.st_mode):
                excluded["binary"] += 1  # sockets, devices, fifos: not text files
            elif _credential(entry.name):
                excluded["credential_file"] += 1
            elif os.path.splitext(entry.name.lower())[1] in BINARY_SUFFIXES:
                excluded["binary"] += 1
            elif info.st_size > rules.max_file_bytes:
                excluded["too_large"] += 1
            elif contains_secret(rel):
                excluded["secret"] += 1  # its path would reach the model and the ledger
            elif len(files) >= rules.max_files:
                excluded["file_limit"] += 1
            else:
                files.append(FileEntry(rel, info.st_size, info.st_mtime_ns))
        pending.extend(reversed(subfolders))
    files.sort(key=lambda f: f.path)
    return TreeScan(files=tuple(files), excluded=dict(sorted(excluded.items())))


def admit_content(data: bytes) -> tuple[str | None, ExclusionReason | None]:
    """``(text, None)`` when ``data`` may enter the catalog, else ``(None, reason)``.

    Reasons: ``binary`` (a NUL byte), ``not_utf8`` (strict decoding fails), ``secret``
    (secret detection finds a credential shape in the text).
    """
    if b"\x00" in data:
        return None, "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not_utf8"
    if contains_secret(text):
        return None, "secret"
    return text, None
