"""Runtime configuration: ``memory-ledger.toml``, section ``[memory]``, plus code overrides.

The library reads a file only when given one (``load_config(path)``,
``MemoryEngine.open(..., config=path)``) or told to look in the current directory
(``load_config(search_cwd=True)``, which the ``memory-ledger`` CLI does).

Keys (defaults from the A3S memory and context documents, seeds 000 and 002)::

    [memory]
    llm_extraction = true                  # run the extractor on finalized turns
    llm_extraction_max_items = 5           # items kept per turn (clamped to 1..10)
    llm_extraction_max_input_chars = 8000  # transcript characters sent to the extractor
    max_transcript_bytes = 1048576         # largest turn transcript accepted (UTF-8 bytes,
                                           # 1 MiB); a larger one is refused, nothing stored
    activation_policy = "auto"             # "auto" (finish activates) or "manual"
    recall_k = 5                           # results per recall (at most recall_max_k)
    recall_max_k = 50                      # most results a recall may be asked for; a
                                           # larger k is refused (k_too_large), not cut
    context_max_items = 12                 # balanced context budget
    context_max_tokens = 4000
    context_max_items_per_source = 6
    context_max_tokens_per_source = 2500
    store_dir = ".memory-ledger"           # relative to the TOML file's folder
    ledger = ""                            # "" (LMDB inside store_dir) or a PostgreSQL URL,
                                           # "postgresql://user@host:5432/db?schema=memory";
                                           # its password from PGPASSWORD or the variable
                                           # named by "&password_env=NAME" (not the file)
    embeddings = "none"                    # semantic channel: "none" (lexical recall only),
                                           # "local" (bundled MiniLM; the embeddings extra),
                                           # "lite" (bundled multilingual e5, no PyTorch;
                                           # the embeddings-lite extra)
                                           # or "openai" (an OpenAI-compatible endpoint)
    embeddings_base_url = ""               # openai: base URL, e.g. "http://127.0.0.1:8080/v1"
    embeddings_model = ""                  # openai: model name
    embeddings_dimension = 0               # openai: vector length
    embeddings_api_key_env = "OPENAI_API_KEY"  # openai: the variable holding the key (the
                                           # key itself never goes in the file)
    master_key_file = ""                   # encryption at rest: a 32-byte key file (relative
                                           # to the TOML file's folder; keep it out of the
                                           # store folder and its backups); "" falls back to
                                           # MEMORY_LEDGER_MASTER_KEY_FILE, else no encryption
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import msgspec

from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.arguments import NESTED_TOO_DEEP

__all__ = ["CONFIG_FILE", "ConfigError", "MemoryConfig", "load_config", "load_config_from"]

CONFIG_FILE = "memory-ledger.toml"


class ConfigError(MemoryLedgerError, ValueError):
    """The configuration file or an override is invalid; the message names the key."""

    reason_code = "invalid_config"


class MemoryConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The runtime configuration a session was opened with (``MemorySession.config()``).

    :raises ConfigError: (a ``ValueError``) a value is out of range; the message names the
        key.
    """

    llm_extraction: bool = True
    llm_extraction_max_items: int = 5
    llm_extraction_max_input_chars: int = 8000
    max_transcript_bytes: int = 1024 * 1024
    activation_policy: Literal["auto", "manual"] = "auto"
    recall_k: int = 5
    recall_max_k: int = 50
    context_max_items: int = 12
    context_max_tokens: int = 4000
    context_max_items_per_source: int = 6
    context_max_tokens_per_source: int = 2500
    store_dir: str = ".memory-ledger"
    ledger: str = ""
    embeddings: Literal["none", "local", "lite", "openai"] = "none"
    embeddings_base_url: str = ""
    embeddings_model: str = ""
    embeddings_dimension: int = 0
    embeddings_api_key_env: str = "OPENAI_API_KEY"
    master_key_file: str = ""

    def __post_init__(self) -> None:
        positive = (
            "llm_extraction_max_input_chars",
            "max_transcript_bytes",
            "recall_k",
            "recall_max_k",
            "context_max_items",
            "context_max_tokens",
            "context_max_items_per_source",
            "context_max_tokens_per_source",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                msg = f"memory.{name} must be positive, got {getattr(self, name)}"
                raise ConfigError(msg)
        if self.recall_k > self.recall_max_k:
            msg = (
                f"memory.recall_k ({self.recall_k}) must not exceed memory.recall_max_k "
                f"({self.recall_max_k})"
            )
            raise ConfigError(msg)
        clamped = min(max(self.llm_extraction_max_items, 1), 10)
        if clamped != self.llm_extraction_max_items:
            msgspec.structs.force_setattr(self, "llm_extraction_max_items", clamped)
        if not self.store_dir.strip():
            msg = "memory.store_dir must not be empty"
            raise ConfigError(msg)
        if self.ledger and not self.ledger.startswith(("postgresql://", "postgres://")):
            msg = 'memory.ledger must be "" (LMDB in store_dir) or a postgresql:// URL'
            raise ConfigError(msg)
        if self.embeddings == "openai":
            for name in ("embeddings_base_url", "embeddings_model"):
                if not getattr(self, name).strip():
                    msg = f'memory.{name} is required with embeddings = "openai"'
                    raise ConfigError(msg)
            if self.embeddings_dimension <= 0:
                msg = 'memory.embeddings_dimension must be positive with embeddings = "openai"'
                raise ConfigError(msg)


def load_config(
    path: str | os.PathLike[str] | None = None, *, search_cwd: bool = False, **overrides: Any
) -> MemoryConfig:
    """Load ``[memory]`` from ``path``, then apply keyword ``overrides``.

    Without ``path`` the built-in defaults are used, unless ``search_cwd`` is true: then
    ``./memory-ledger.toml`` is read when present (the CLI's behaviour; a library call never
    reads the current directory unasked). A relative ``store_dir`` in the file is resolved
    against the file's folder.

    :raises ConfigError: the file is unreadable, not UTF-8 (``reason_code`` ``"not_utf8"``)
        or not TOML, a key is unknown, or a value has the wrong type or range (the message
        names the key).
    """
    values: dict[str, Any] = {}
    file = Path(path) if path is not None else Path(CONFIG_FILE)
    if path is not None or (search_cwd and file.is_file()):
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except OSError as e:
            msg = f"cannot read configuration file {str(file)!r}: {e.strerror or e}"
            raise ConfigError(msg) from e
        except UnicodeDecodeError as e:
            msg = f"configuration file {str(file)!r} is not UTF-8 text (byte offset {e.start})"
            raise ConfigError(msg, reason_code="not_utf8") from None
        except tomllib.TOMLDecodeError as e:
            msg = f"configuration file {str(file)!r} is not valid TOML: {e}"
            raise ConfigError(msg) from e
        except RecursionError:
            msg = f"configuration file {str(file)!r} is {NESTED_TOO_DEEP}"
            raise ConfigError(msg) from None
        section = data.get("memory", {})
        if not isinstance(section, dict):
            msg = f"[memory] in {str(file)!r} must be a table"
            raise ConfigError(msg)
        values.update(section)
        for name in ("store_dir", "master_key_file"):
            value = values.get(name)
            if isinstance(value, str) and value and not Path(value).is_absolute():
                values[name] = str(file.absolute().parent / value)
    values.update(overrides)
    try:
        return msgspec.convert(values, MemoryConfig)
    except (msgspec.ValidationError, ValueError) as e:
        msg = f"invalid memory configuration: {e}"
        raise ConfigError(msg) from e


def load_config_from(base: MemoryConfig, **overrides: Any) -> MemoryConfig:
    """``base`` with keyword ``overrides`` applied and validated.

    :raises ConfigError: an override names an unknown key or has a bad value.
    """
    values = msgspec.structs.asdict(base)
    values.update(overrides)
    try:
        return msgspec.convert(values, MemoryConfig)
    except (msgspec.ValidationError, ValueError) as e:
        msg = f"invalid memory configuration: {e}"
        raise ConfigError(msg) from e
