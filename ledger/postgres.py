"""PostgreSQL persistence module for the ``eventsourcing`` library: the ledger on a server.

Selected the library's way, with settings passed as ``env=`` (never set process-wide)::

    InfrastructureFactory.construct(env={
        "PERSISTENCE_MODULE": "memory_ledger.ledger.postgres",
        "POSTGRES_DBNAME": "memory", "POSTGRES_HOST": "db.example", "POSTGRES_PORT": "5432",
        "POSTGRES_USER": "agent", "POSTGRES_PASSWORD": "...", "POSTGRES_SCHEMA": "ledger",
    })

(or with :func:`settings_from_url` from a ``postgresql://`` URL). It is the library's own
``eventsourcing.postgres`` module (datastore, psycopg 3 connection pool, tracking and aggregate
recorders, error translation) with an application recorder that
keeps the ledger's promises, the same as ``memory_ledger.ledger.lmdb``:

- Gapless notification ids in commit order, across connections and hosts. A writer locks the
  events table in EXCLUSIVE mode (readers are not blocked), reads the last record, and inserts
  its events with the next ids, then commits, all in one transaction. Ids are assigned under
  the lock instead of by a sequence, so a refused or rolled-back batch leaves no gap.
- The hash chain: each row stores ``record_hash = sha256(prev_hash || body)``, computed in the
  writing transaction from the previous record's hash read under the same lock. ``body`` is
  the record body of ``memory_ledger.ledger.records`` (a pure function of the row), so records
  keep their hashes when copied between LMDB and PostgreSQL.
- Store identity and format version: the table ``<events table>_meta`` holds ``store_id``
  (a UUID fixed when the ledger is created) and ``format_version``; a ledger of a newer
  format fails to open with :class:`~memory_ledger.ledger.records.LedgerFormatError`.
- Atomic multi-event commands: a batch is one transaction. An append whose outcome is unknown
  (the connection broke after the insert was sent) is retried on a new connection: under the
  table lock, a batch already present with identical bytes is recognized as committed and
  its ids are returned, so a command is never applied twice nor reported lost.
- The append condition seam: :meth:`PostgresLedgerApplicationRecorder._check_condition` runs
  under the table lock before anything is inserted (``eventsourcing.dcb.postgres_tt`` is the
  reference); a refused batch leaves the transaction empty.
- A subscription that delivers every append, whenever it commits relative to its ``LISTEN``
  (:class:`~memory_ledger.ledger.postgres_subscription.PostgresLedgerSubscription`).

Tables (schema ``POSTGRES_SCHEMA``, default ``public``; names as the library's factory gives
them): ``stored_events`` (originator_id, originator_version, topic, state, notification_id,
record_hash), ``stored_events_meta`` (name, value), ``notification_tracking``.

Tags (``<events table>_tags``: tag, notification_id) are written in the appending
transaction; an append condition (``insert_events(..., tags=, condition=)``, the library's
``DCBAppendCondition``) is checked under the table lock before anything is inserted;
:mod:`memory_ledger.ledger.postgres_dcb` is the library's ``DCBRecorder`` over this log.

Errors are typed (``memory_ledger.ledger.errors``), each also the library's class of the
same meaning: :class:`~memory_ledger.ledger.errors.LedgerConnectionError` (an
``OperationalError``/``InterfaceError``) when the server cannot be reached,
``LedgerIntegrityError`` for a duplicate stream version or a failed append condition
(``AppendConditionFailedError``), ``LedgerProgrammingError`` for a schema without a ledger.
Each names the ledger without its password; no message carries the password.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import parse_qsl, unquote, urlsplit
from uuid import UUID

import eventsourcing.postgres as es_postgres
import psycopg
from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery
from eventsourcing.persistence import (
    ApplicationRecorder,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProcessRecorder,
    ProgrammingError,
    StoredEvent,
    Tracking,
)
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresApplicationRecorder,
    PostgresDatastore,
    PostgresProcessRecorder,
    PostgresTrackingRecorder,
)
from eventsourcing.utils import retry
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from memory_ledger.ledger.errors import (
    InvalidArgumentError,
    LedgerConnectionError,
    LedgerDataError,
    LedgerError,
    LedgerIntegrityError,
    LedgerInternalError,
    LedgerNotSupportedError,
    LedgerOperationalError,
    LedgerProgrammingError,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.lmdb import TaggedEvent, TaggedSelection
from memory_ledger.ledger.postgres_subscription import PostgresLedgerSubscription
from memory_ledger.ledger.records import (
    FORMAT_VERSION,
    GENESIS_HASH,
    LedgerRecord,
    RawRow,
    chain_hash,
    check_format_version,
    decode_entry,
    encode_body,
)
from memory_ledger.ledger.sealed_header import sealed_key_ids
from memory_ledger.ledger.tag_index import MAX_TAG_BYTES, AppendConditionFailedError

__all__ = [
    "AppendListener",
    "Factory",
    "LedgerURLError",
    "PostgresLedgerApplicationRecorder",
    "PostgresLedgerFactory",
    "PostgresLedgerProcessRecorder",
    "PostgresLedgerURL",
    "TAG_INDEX_FORMAT",
    "is_postgres_url",
    "parse_ledger_url",
    "probe_server",
    "settings_from_url",
    "strip_password",
]

TAG_INDEX_FORMAT = 2
"""The first format version whose ledgers index every record's tags (the tags table)."""

_RETRYABLE = (InterfaceError, OperationalError)
T = TypeVar("T")

_TYPED: tuple[tuple[type[BaseException], type[LedgerError]], ...] = (
    (psycopg.errors.LockNotAvailable, LedgerOperationalError),
    (psycopg.errors.QueryCanceled, LedgerOperationalError),
    (psycopg.IntegrityError, LedgerIntegrityError),
    (IntegrityError, LedgerIntegrityError),
    (psycopg.DataError, LedgerDataError),
    (DataError, LedgerDataError),
    (psycopg.InterfaceError, LedgerConnectionError),
    (InterfaceError, LedgerConnectionError),
    (psycopg.OperationalError, LedgerConnectionError),
    (OperationalError, LedgerConnectionError),
    (psycopg.ProgrammingError, LedgerProgrammingError),
    (ProgrammingError, LedgerProgrammingError),
    (psycopg.NotSupportedError, LedgerNotSupportedError),
    (NotSupportedError, LedgerNotSupportedError),
    (psycopg.InternalError, LedgerInternalError),
    (InternalError, LedgerInternalError),
)
"""A driver's or the library's error class -> the typed ledger error of the same meaning
(first match wins; a lock or statement timeout is not a lost connection)."""
_QUERY_KEYS = frozenset(
    {"schema", "password_env", "pool_size", "connect_timeout", "append_attempts"}
)


_SCHEMA_MAX = 40
"""The longest schema name a ledger URL takes: PostgreSQL keeps 63 bytes of an identifier,
and the notification channel is ``<schema>_<table>``."""
_SCHEMA_NAME = re.compile(rf"[a-z_][a-z0-9_]{{0,{_SCHEMA_MAX - 1}}}")
"""A schema name that needs no quoting and means the same quoted or not."""


class LedgerURLError(InvalidArgumentError):
    """A ledger URL is malformed (the message shows it without its password, and without
    the ``password_env`` parameter, which it names on its own when it matters).

    An :class:`~memory_ledger.ledger.errors.InvalidArgumentError` (a ``ValueError``) whose
    ``parameter`` is ``"ledger"``; ``reason_code`` ``"invalid_ledger_url"``, or
    ``"password_env_unset"`` when the variable ``password_env`` names is not set.
    """

    reason_code = "invalid_ledger_url"

    def __init__(
        self, message: str, *, parameter: str | None = "ledger", reason_code: str | None = None
    ) -> None:
        super().__init__(message, parameter=parameter, reason_code=reason_code)


@dataclass(frozen=True, repr=False)
class PostgresLedgerURL:
    """A parsed ``postgresql://user[:password]@host[:port]/dbname[?schema=...]`` URL.

    Query parameters: ``schema`` (default ``public``), ``password_env`` (the name of an
    environment variable holding the password), ``pool_size``, ``connect_timeout`` (seconds),
    ``append_attempts`` (tries of one append across broken connections, default 10).
    The password comes from the URL, else the variable ``password_env`` names, else
    ``PGPASSWORD``, else none (trust or peer authentication). ``repr`` and :attr:`redacted`
    never show it.
    """

    host: str
    port: int
    dbname: str
    user: str
    password: str
    schema: str
    pool_size: int
    connect_timeout: int
    append_attempts: int = 10

    @property
    def redacted(self) -> str:
        """The URL without its password (safe for logs, errors and exports)."""
        query = "" if self.schema == "public" else f"?schema={self.schema}"
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}{query}"

    def __repr__(self) -> str:
        return f"PostgresLedgerURL({self.redacted!r})"


def is_postgres_url(text: str) -> bool:
    """Whether ``text`` is a ``postgresql://`` (or ``postgres://``) URL."""
    return text.startswith(("postgresql://", "postgres://"))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
"""What ``password_env`` may name: an environment variable (letters, digits, ``_``)."""


def strip_password(url: str) -> str:
    """``url`` as messages show it: everything between ``user:`` and the last ``@`` as
    ``***`` and its ``password_env`` parameter left out (``password_env=NAME`` has the shape
    of a password assignment, so a secret scanner would blank the rest of the message; the
    name is shown on its own).

    Works on the text, not on a parse: a password holding an unescaped ``#``, ``/`` or ``?``
    makes ``urlsplit`` read part of it as the host, port, path or fragment, so a parse would
    show it; the last ``@`` after the scheme is where the credentials end whatever they hold.
    """
    scheme, sep, rest = url.partition("://")
    if sep:
        userinfo, at, hostpart = rest.rpartition("@")
        if at and ":" in userinfo:
            url = f"{scheme}://{userinfo.split(':', 1)[0]}:***@{hostpart}"
    return _PASSWORD_ENV_PARAM.sub(_keep_separator, url)


_PASSWORD_ENV_PARAM = re.compile(r"([?&])password_env=[^&#]*(&?)")


def _keep_separator(match: re.Match[str]) -> str:
    """The replacement of one ``password_env=...`` parameter: the ``?`` that began the
    query stays when another parameter follows it."""
    lead, follow = match.group(1), match.group(2)
    return lead if follow and lead == "?" else ("&" if follow else "")


def parse_ledger_url(url: str, environ: Mapping[str, str] | None = None) -> PostgresLedgerURL:
    """Parse a PostgreSQL ledger URL, resolving its password (see :class:`PostgresLedgerURL`).

    :param environ: where ``password_env`` and ``PGPASSWORD`` are looked up (default
        ``os.environ``; read, never written).
    :raises LedgerURLError: not a ``postgresql://`` URL, no database name, an unknown query
        parameter, a bad number, or ``password_env`` names an unset variable.
    """
    environ = os.environ if environ is None else environ
    shown = strip_password(url) if isinstance(url, str) else repr(url)
    if not isinstance(url, str) or not is_postgres_url(url):
        msg = f"not a PostgreSQL ledger URL (expected postgresql://...): {shown}"
        raise LedgerURLError(msg)
    try:
        parts = urlsplit(url)
        port = parts.port or 5432
        if "@" in parts.path + parts.query + parts.fragment:
            # The credentials end at an '@' the parser put in the path, query or fragment:
            # a '/', '?' or '#' in the password cut them short (the rest would be read as
            # the database's name).
            raise ValueError("credentials cut short")
    except ValueError:
        # The parser's own words may quote part of a password that holds '#', '/' or '?'
        # (read as the port): they are not shown.
        msg = (
            f"malformed ledger URL {shown}: its host and port cannot be read; a password "
            "holding '#', '/', '?' or '@' must be percent-encoded (%23, %2F, %3F, %40) or "
            "given by password_env"
        )
        raise LedgerURLError(msg) from None
    dbname = unquote(parts.path.lstrip("/"))
    if not dbname:
        msg = f"ledger URL {shown} names no database (postgresql://host/DBNAME)"
        raise LedgerURLError(msg)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(query) - _QUERY_KEYS)
    if unknown:
        msg = (
            f"ledger URL {shown} has unknown parameter(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_QUERY_KEYS))})"
        )
        raise LedgerURLError(msg)
    password = unquote(parts.password) if parts.password is not None else None
    password_env = query.get("password_env", "")
    if password is None and password_env:
        if not _ENV_NAME.fullmatch(password_env):
            msg = (
                f"ledger URL {shown}: password_env must name an environment variable "
                "(letters, digits and _), not hold the password itself"
            )
            raise LedgerURLError(msg, reason_code="password_env_invalid")
        if password_env not in environ:
            msg = (
                f"ledger URL {shown}: environment variable {password_env} (named by "
                "password_env) is not set; set it to the password, or leave password_env out"
            )
            raise LedgerURLError(msg, reason_code="password_env_unset")
        password = environ[password_env]
    if password is None:
        password = environ.get("PGPASSWORD", "")
    numbers: dict[str, int] = {}
    for key, default in (("pool_size", 2), ("connect_timeout", 5), ("append_attempts", 10)):
        raw = query.get(key, "")
        try:
            numbers[key] = int(raw) if raw else default
        except ValueError:
            msg = f"ledger URL {shown}: {key} must be an integer, got {raw!r}"
            raise LedgerURLError(msg) from None
        if numbers[key] <= 0:
            msg = f"ledger URL {shown}: {key} must be positive"
            raise LedgerURLError(msg)
    schema = query.get("schema", "") or "public"
    if not _SCHEMA_NAME.fullmatch(schema):
        msg = (
            f"ledger URL {shown}: schema must be a lower-case identifier (a-z, 0-9, _; not "
            f"starting with a digit; at most {_SCHEMA_MAX} characters), got {schema[:80]!r}"
        )
        raise LedgerURLError(msg)
    return PostgresLedgerURL(
        host=parts.hostname or "127.0.0.1",
        port=port,
        dbname=dbname,
        user=unquote(parts.username or "") or environ.get("PGUSER", "") or "postgres",
        password=password,
        schema=schema,
        pool_size=numbers["pool_size"],
        connect_timeout=numbers["connect_timeout"],
        append_attempts=numbers["append_attempts"],
    )


_NO_DATABASE = re.compile(r'database "(?:[^"]|"")*" does not exist')
"""The server's answer to a connection naming a database it does not have (SQLSTATE 3D000,
``invalid_catalog_name``; libpq reports it as text only, in the server's language)."""


_AUTH_REFUSED = re.compile(
    r'role "(?:[^"]|"")*" (?:does not exist|is not permitted to log in)'
    r"|authentication failed for user"
    r"|no pg_hba\.conf entry for"
    r"|pg_hba\.conf rejects connection"
    r"|fe_sendauth: no password supplied"
)
"""The server's (or libpq's) answer to credentials it refuses: an unknown role, a role that
may not log in, a wrong password (``password``/``md5``/``SCRAM``), peer or ident
authentication failed, no ``pg_hba.conf`` entry, or a password the server asks for and none
given (SQLSTATE 28000/28P01; libpq reports them as text only)."""


def _server_reason(text: str, password: str) -> str:
    """The server's own words in a connection failure: its first line after the last
    ``FATAL:`` (or the whole first line), with ``password`` blanked."""
    reason = text.rsplit("FATAL:", 1)[-1].strip().splitlines()[0] if text.strip() else text
    return reason.replace(password, "***") if password else reason


def probe_server(url: PostgresLedgerURL) -> None:
    """Connect once to ``url``'s database (and close): fail at once where waiting for the
    connection pool cannot help.

    Other failures (connection refused, a server still starting) return quietly: the pool
    retries those for up to ``connect_timeout`` seconds, as before.

    :raises LedgerConnectionError: ``reason_code`` ``"no_database"`` when the server
        answers that the database does not exist (naming it); ``"authentication_failed"``
        when it refuses the credentials (an unknown role, a wrong password, no
        ``pg_hba.conf`` entry: naming the user and the server's reason);
        ``"ledger_connection"`` when no answer came within ``connect_timeout`` (the pool
        would only wait as long again). Messages name the ledger without its password.
    """
    try:
        connection = psycopg.connect(
            host=url.host,
            port=url.port,
            dbname=url.dbname,
            user=url.user,
            password=url.password or None,
            connect_timeout=url.connect_timeout,
        )
    except psycopg.Error as e:
        if _NO_DATABASE.search(str(e)):
            msg = (
                f"ledger {url.redacted}: the PostgreSQL server at {url.host}:{url.port} has no "
                f"database {url.dbname!r}; create it (createdb {url.dbname}) or name an "
                "existing one in the ledger URL"
            )
            raise LedgerConnectionError(msg, path=url.redacted, reason_code="no_database") from None
        if _AUTH_REFUSED.search(str(e)):
            msg = (
                f"ledger {url.redacted}: the PostgreSQL server at {url.host}:{url.port} refused "
                f"user {url.user!r}: {_server_reason(str(e), url.password)}; check the user and "
                "password of the ledger URL (or PGPASSWORD, password_env) and the server's "
                "roles and pg_hba.conf"
            )
            raise LedgerConnectionError(
                msg, path=url.redacted, reason_code="authentication_failed"
            ) from None
        if isinstance(e, psycopg.errors.ConnectionTimeout):
            msg = (
                f"ledger {url.redacted} is unavailable: the server at {url.host}:{url.port} "
                f"did not answer within {max(url.connect_timeout, 2)} s (connect_timeout; libpq "
                "waits at least 2 s)"
            )
            raise LedgerConnectionError(msg, path=url.redacted) from None
        return
    connection.close()


def settings_from_url(url: PostgresLedgerURL) -> dict[str, str]:
    """The factory settings (``env=``) that select this module for ``url``."""
    return {
        "PERSISTENCE_MODULE": "memory_ledger.ledger.postgres",
        "POSTGRES_DBNAME": url.dbname,
        "POSTGRES_HOST": url.host,
        "POSTGRES_PORT": str(url.port),
        "POSTGRES_USER": url.user,
        "POSTGRES_PASSWORD": url.password,
        "POSTGRES_SCHEMA": url.schema,
        "POSTGRES_POOL_SIZE": str(url.pool_size),
        "POSTGRES_MAX_OVERFLOW": str(url.pool_size * 2),
        "POSTGRES_CONNECT_TIMEOUT": str(url.connect_timeout),
        PostgresLedgerFactory.POSTGRES_APPEND_ATTEMPTS: str(url.append_attempts),
    }


class _Refused(Exception):  # noqa: N818 (a control-flow signal, re-raised as ``error``)
    """Raised under the table lock, before anything is written, to refuse a batch."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


SealedKeyCheck = Callable[[psycopg.Cursor[Any], set[bytes]], Exception | None]
"""``check(cursor, key ids)``, run inside an append's transaction under the table lock when
its batch holds sealed states: the error to refuse the batch with when one of the data keys
(16-byte ids) they were sealed with was destroyed, else None
(:meth:`memory_ledger.ledger.postgres_keys.PostgresKeyStore.destroyed_key_error`)."""


class PostgresLedgerApplicationRecorder(PostgresApplicationRecorder):
    """The library's PostgreSQL application recorder with the ledger's log: gapless ids
    assigned under the table lock, a hash chain, store identity and format version.

    :param datastore: the library's datastore (connection pool, schema, timeouts).
    :param events_table_name: the events table; ``<name>_meta`` holds the store's identity.
    :param max_attempts: tries of an append across broken connections before
        ``OperationalError`` is raised (each on a new connection, 0.1 s apart and growing).
    """

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        events_table_name: str = "stored_events",
        max_attempts: int = 10,
    ) -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        self.meta_table_name = f"{events_table_name}_meta"
        self.check_identifier_length(self.meta_table_name)
        self.tags_table_name = f"{events_table_name}_tags"
        self.check_identifier_length(self.tags_table_name)
        self.tags_index_name = f"{events_table_name}_tags_position"
        self.check_identifier_length(self.tags_index_name)
        self.max_attempts = max_attempts
        self.channel_name = f"{datastore.schema}_{events_table_name}".replace(".", "_")[:63]
        kw: dict[str, Any] = {
            "schema": Identifier(datastore.schema),
            "table": Identifier(events_table_name),
            "meta": Identifier(self.meta_table_name),
            "tags": Identifier(self.tags_table_name),
            "tags_index": Identifier(self.tags_index_name),
            "index": Identifier(self.notification_id_index_name),
            "id_type": Identifier(datastore.originator_id_type),
            "channel": Identifier(self.channel_name),
        }
        self.sql_create_statements = [
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
                "originator_id {id_type} NOT NULL, "
                "originator_version bigint NOT NULL, "
                "topic text NOT NULL, "
                "state bytea NOT NULL, "
                "notification_id bigint NOT NULL, "
                "record_hash bytea NOT NULL, "
                "PRIMARY KEY (originator_id, originator_version))"
            ).format(**kw),
            SQL(
                "CREATE UNIQUE INDEX IF NOT EXISTS {index} ON {schema}.{table} "
                "(notification_id ASC)"
            ).format(**kw),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{meta} ("
                "name text PRIMARY KEY, value text NOT NULL)"
            ).format(**kw),
            SQL(
                "CREATE TABLE IF NOT EXISTS {schema}.{tags} ("
                "tag text NOT NULL, notification_id bigint NOT NULL, "
                "PRIMARY KEY (tag, notification_id))"
            ).format(**kw),
            SQL(
                "CREATE INDEX IF NOT EXISTS {tags_index} ON {schema}.{tags} (notification_id ASC)"
            ).format(**kw),
        ]
        self._kw = kw
        self._sql_tags_insert = SQL(
            "INSERT INTO {schema}.{tags} (tag, notification_id) "
            "SELECT * FROM unnest(%s::text[], %s::bigint[])"
        ).format(**kw)
        self._sql_tags_of = SQL(
            "SELECT tag FROM {schema}.{tags} WHERE notification_id = %s ORDER BY tag"
        ).format(**kw)
        self._sql_tags_at = SQL(
            "SELECT notification_id, tag FROM {schema}.{tags} "
            "WHERE notification_id = ANY(%s::bigint[]) ORDER BY notification_id, ctid"
        ).format(**kw)
        self._sql_format = SQL(
            "UPDATE {schema}.{meta} SET value = %s WHERE name = 'format_version'"
        ).format(**kw)
        self._sql_format_select = SQL(
            "SELECT value FROM {schema}.{meta} WHERE name = 'format_version'"
        ).format(**kw)
        self._sql_head = SQL(
            "SELECT COALESCE(MAX(notification_id), 0) FROM {schema}.{table}"
        ).format(**kw)
        self._sql_positioned = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE originator_id = %s AND originator_version > %s "
            "ORDER BY originator_version"
        ).format(**kw)
        self._sql_all_rows = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
        ).format(**kw)
        self._sql_meta_init = SQL(
            "INSERT INTO {schema}.{meta} (name, value) VALUES "
            "('format_version', %s), ('store_id', %s) ON CONFLICT (name) DO NOTHING"
        ).format(**kw)
        self._sql_meta_select = SQL("SELECT name, value FROM {schema}.{meta}").format(**kw)
        self._sql_lock_timeout = SQL("SET LOCAL lock_timeout = '{0}s'").format(
            datastore.lock_timeout
        )
        self._sql_lock = SQL("LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE").format(**kw)
        self._sql_last = SQL(
            "SELECT notification_id, record_hash FROM {schema}.{table} "
            "ORDER BY notification_id DESC LIMIT 1"
        ).format(**kw)
        id_array = SQL("%s::uuid[]" if datastore.originator_id_type == "uuid" else "%s::text[]")
        self._sql_insert = SQL(
            "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state, "
            "notification_id, record_hash) SELECT * FROM unnest({ids}, %s::bigint[], "
            "%s::text[], %s::bytea[], %s::bigint[], %s::bytea[])"
        ).format(ids=id_array, **kw)
        self._sql_present = SQL(
            "SELECT e.originator_id, e.originator_version, e.state, e.notification_id "
            "FROM {schema}.{table} e JOIN unnest({ids}, %s::bigint[]) AS k(i, v) "
            "ON e.originator_id = k.i AND e.originator_version = k.v"
        ).format(ids=id_array, **kw)
        self._sql_notify = SQL("NOTIFY {channel}").format(**kw)
        raw_id = (
            "uuid_send(originator_id)"
            if datastore.originator_id_type == "uuid"
            else ("originator_id")
        )
        columns = SQL("SELECT notification_id, " + raw_id + ", originator_version, topic, state")
        self._sql_raw = columns + SQL(
            " FROM {schema}.{table} WHERE notification_id > %s AND notification_id <= %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(**kw)
        self._sql_log = SQL(
            "SELECT notification_id, record_hash, originator_id, originator_version, topic, "
            "state FROM {schema}.{table} WHERE notification_id >= %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(**kw)
        self._sql_stream = SQL(
            "SELECT notification_id, record_hash, originator_id, originator_version, topic, "
            "state FROM {schema}.{table} WHERE originator_id = %s ORDER BY originator_version"
        ).format(**kw)
        self.store_id: str | None = None
        """The ledger's identity (a UUID string), known once :meth:`create_table` or
        :meth:`open_store` ran."""
        self.sealed_key_check: SealedKeyCheck | None = None
        """Set by the ledger's key store (:class:`~memory_ledger.ledger.postgres_keys.
        PostgresKeyStore`): every batch holding sealed states is checked under the table
        lock, so an append and an erasure on any host serialize (see :meth:`insert_events`)."""
        self.format_version: int | None = None

    # Store identity -------------------------------------------------------------------------

    def create_table(self) -> None:
        """Create the tables (idempotent) and record or check the store's identity.

        :raises LedgerFormatError: the ledger has a newer format.
        """
        super().create_table()
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(self._sql_meta_init, (str(FORMAT_VERSION), str(uuid.uuid4())))
        self.open_store()

    def _create_table(self, curs: psycopg.Cursor[Any]) -> None:
        # Hosts starting together would race on CREATE TABLE IF NOT EXISTS (PostgreSQL
        # then fails on its catalog's unique index): serialize creation per table.
        curs.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))",
            (f"memory-ledger:{self.datastore.schema}.{self.events_table_name}",),
        )
        curs.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.datastore.schema,))
        if curs.fetchone() is None:  # a ledger URL may name a new schema
            curs.execute(SQL("CREATE SCHEMA {0}").format(Identifier(self.datastore.schema)))
        super()._create_table(curs)

    def open_store(self) -> str:
        """Read and check the store's identity and format version; return the ``store_id``.

        :raises LedgerFormatError: the ledger has a newer format.
        :raises ProgrammingError: the ledger's tables do not exist (``undefined table``).
        """
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(self._sql_meta_select)
            meta = {row["name"]: row["value"] for row in curs.fetchall()}
        where = f"PostgreSQL ledger {self.datastore.schema}.{self.events_table_name}"
        if "format_version" not in meta or "store_id" not in meta:
            msg = f"{where} has no identity (its {self.meta_table_name} table is empty)"
            raise LedgerProgrammingError(msg, path=self.ledger_path, reason_code="no_ledger")
        self.format_version = check_format_version(meta["format_version"], where)
        self.store_id = meta["store_id"]
        return self.store_id

    def adopt_store_id(self, store_id: str) -> None:
        """Give an EMPTY ledger the identity ``store_id`` (a migration keeps its source's).

        :raises IntegrityError: the ledger holds records already.
        """
        sql = SQL("UPDATE {0}.{1} SET value = %s WHERE name = 'store_id'").format(
            Identifier(self.datastore.schema), Identifier(self.meta_table_name)
        )
        with self.datastore.transaction(commit=True) as curs:
            self._lock(curs)
            curs.execute(self._sql_last)
            if curs.fetchone() is not None:
                msg = "the ledger is not empty; its identity cannot change"
                raise LedgerIntegrityError(msg, path=self.ledger_path)
            curs.execute(sql, (str(UUID(store_id)),))
        self.store_id = str(UUID(store_id))

    # Write side -----------------------------------------------------------------------------

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Append all events in ONE transaction and return their notification ids.

        Ids continue the log without gaps; each record's hash chains to the previous one.
        When the connection breaks, the append is retried on a new one (up to
        ``max_attempts``); a batch found already committed returns its ids.

        A batch holding sealed states, on a ledger whose key store set
        :attr:`sealed_key_check`, is refused when a data key it was sealed with is destroyed:
        the check runs in the appending transaction and locks the key store's row ``FOR
        SHARE``, which an erasure's key destruction updates (``FOR UPDATE``). So either the
        batch commits before the keys are destroyed (and the ``NamespaceErased`` record,
        appended after, follows it), or it sees them destroyed and writes nothing: no batch
        sealed under a destroyed key is ever positioned after the erasure.

        :raises IntegrityError: an (originator id, version) exists already or twice in the
            batch, the tracking id is not new (process recorders), or the append condition
            failed; nothing is written.
        :raises NamespaceErasedError: a data key the batch was sealed with is destroyed (its
            namespace was erased, on any host); nothing is written.
        :raises OperationalError: the server stayed unreachable; the batch is then either
            entirely present or entirely absent.
        """
        bodies = [
            encode_body(s.originator_id, s.originator_version, s.topic, s.state)
            for s in stored_events
        ]
        self._check_tags(kwargs.get("tags"), len(stored_events))

        def attempt(retried: bool) -> list[int]:
            # A retried batch may have committed before the connection broke: the attempt
            # looks for it under the table lock before inserting anything.
            with self.datastore.get_connection() as conn:
                return self._insert_once(conn, stored_events, bodies, retried, kwargs)

        try:
            return self.retrying(attempt)
        except _Refused as refused:  # refused under the lock: never tried again
            raise refused.error from None

    def retrying(self, attempt: Callable[[bool], T]) -> T:
        """``attempt(retried)``, run again on a new connection while the server or the
        connection fails (``InterfaceError``/``OperationalError``: a server restart, a
        connection the server dropped), up to :attr:`max_attempts` tries 0.1 s apart, the
        pause doubling up to 1 s. ``retried`` is False on the first try. Appends and the key
        store's transactions (:mod:`memory_ledger.ledger.postgres_keys`) both retry so; an
        attempt must be safe to run again after a commit whose reply was lost.

        :raises LedgerConnectionError: (or the typed error of the last failure) the last
            try failed too.
        """
        delay = 0.1
        for number in range(1, self.max_attempts + 1):
            try:
                return attempt(number > 1)
            except _RETRYABLE as e:
                if number >= self.max_attempts:
                    raise self._typed(e) from None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise AssertionError  # pragma: no cover (the loop returns or raises)

    def _password(self) -> str:
        kwargs = self.datastore.pool.kwargs
        return str(kwargs.get("password") or "") if isinstance(kwargs, dict) else ""

    def _lock(self, curs: psycopg.Cursor[Any]) -> None:
        if self.datastore.lock_timeout:
            curs.execute(self._sql_lock_timeout)
        curs.execute(self._sql_lock)

    def _insert_once(
        self,
        conn: psycopg.Connection[Any],
        stored_events: Sequence[StoredEvent],
        bodies: list[bytes],
        check_present: bool,
        kwargs: dict[str, Any],
    ) -> list[int]:
        """One attempt in one transaction; the connection is in autocommit mode."""
        ids: list[int] = []
        with conn.transaction():
            curs = conn.cursor(row_factory=tuple_row)
            try:
                self._lock(curs)
                if check_present and stored_events:
                    found = self._already_committed(curs, stored_events)
                    if found is not None:
                        return found
                if self.sealed_key_check is not None:
                    sealed = sealed_key_ids(s.state for s in stored_events)
                    refusal = self.sealed_key_check(curs, sealed) if sealed else None
                    if refusal is not None:
                        raise _Refused(refusal)
                self._check_condition(curs, stored_events, kwargs)
                self._insert_events(cast(Any, conn.cursor()), stored_events, **kwargs)
                if stored_events:
                    curs.execute(self._sql_last)
                    last = curs.fetchone()
                    last_id, prev_hash = (0, GENESIS_HASH) if last is None else last
                    prev_hash = bytes(prev_hash)
                    hashes: list[bytes] = []
                    for body in bodies:
                        prev_hash = chain_hash(prev_hash, body)
                        hashes.append(prev_hash)
                        fault("ledger.put")
                    ids = list(range(last_id + 1, last_id + 1 + len(bodies)))
                    curs.execute(
                        self._sql_insert,
                        (
                            [s.originator_id for s in stored_events],
                            [s.originator_version for s in stored_events],
                            [s.topic for s in stored_events],
                            [s.state for s in stored_events],
                            ids,
                            hashes,
                        ),
                    )
                    tags: Sequence[Sequence[str]] | None = kwargs.get("tags")
                    if tags is not None:
                        self._insert_tags(curs, ids, tags)
                    curs.execute(self._sql_notify)
                fault("ledger.commit")
            except psycopg.errors.UniqueViolation as e:
                msg = f"Stored event already recorded: {e.diag.message_detail or e}"
                raise _Refused(LedgerIntegrityError(msg, path=self.ledger_path)) from None
            except psycopg.Error as e:
                raise self._typed(e) from None
        return ids

    @property
    def ledger_path(self) -> str:
        """The ledger named without password: ``postgresql://user@host:port/db?schema=S``
        (and the events table when it is not the default one)."""
        kwargs = self.datastore.pool.kwargs
        kwargs = kwargs() if callable(kwargs) else (kwargs or {})
        user = kwargs.get("user") or ""
        where = f"{kwargs.get('host', '')}:{kwargs.get('port', '')}/{kwargs.get('dbname', '')}"
        path = f"postgresql://{user + '@' if user else ''}{where}?schema={self.datastore.schema}"
        if self.events_table_name != "stored_events":
            path += f" (table {self.events_table_name})"
        return path

    def _typed(self, error: BaseException) -> LedgerError:
        """``error`` as the typed ledger error of the same meaning (itself when it is one),
        naming the ledger, without the password, its cause or its context."""
        if isinstance(error, LedgerError):
            return error
        text = str(error)
        password = self._password()
        if password:
            text = text.replace(password, "***")
        for source, ours in _TYPED:
            if isinstance(error, source):
                typed = ours(f"{self._where()}: {text}", path=self.ledger_path)
                break
        else:
            typed = LedgerError(f"{self._where()}: {text}", path=self.ledger_path)
        typed.__suppress_context__ = True
        return typed

    def _already_committed(
        self, curs: psycopg.Cursor[Any], stored_events: Sequence[StoredEvent]
    ) -> list[int] | None:
        """Ids of ``stored_events`` if an earlier attempt committed them (same bytes)."""
        curs.execute(
            self._sql_present,
            (
                [s.originator_id for s in stored_events],
                [s.originator_version for s in stored_events],
            ),
        )
        rows = {(str(r[0]), r[1]): (bytes(r[2]), r[3]) for r in curs.fetchall()}
        ids = []
        for s in stored_events:
            row = rows.get((str(s.originator_id), s.originator_version))
            if row is None or row[0] != s.state:
                return None
            ids.append(row[1])
        return ids

    def _check_condition(
        self,
        curs: psycopg.Cursor[Any],
        stored_events: Sequence[StoredEvent],
        kwargs: dict[str, Any],
    ) -> None:
        """Refuse the batch (raise ``_Refused``) when its append condition fails: a record
        matching ``condition.fail_if_events_match`` after ``condition.after``.

        Runs under the table lock, before anything is inserted, so no record can land
        between the check and the insert (the library's ``postgres_tt`` checks in the same
        way, inside its append function). Refused, not checked, on a ledger whose tags are
        not indexed yet (format 1).
        """
        condition: DCBAppendCondition | None = kwargs.get("condition")
        if condition is None:
            return
        curs.execute(self._sql_format_select)
        row = curs.fetchone()
        if row is None or int(row[0]) < TAG_INDEX_FORMAT:
            msg = (
                f"{self._where()} has no tag index yet (format version 1): build it "
                "(build_tag_index) before conditional appends"
            )
            raise _Refused(LedgerOperationalError(msg, path=self.ledger_path))
        sql, params = self._match_sql(condition.fail_if_events_match, condition.after or 0)
        curs.execute(SQL("SELECT min(p) FROM ({0}) AS m(p)").format(sql), params)
        found = curs.fetchone()
        if found is not None and found[0] is not None:
            raise _Refused(AppendConditionFailedError(condition, int(found[0])))

    def _where(self) -> str:
        return f"PostgreSQL ledger {self.datastore.schema}.{self.events_table_name}"

    def _match_sql(
        self, query: DCBQuery | None, after: int, upper: int | None = None
    ) -> tuple[Any, list[Any]]:
        """SQL selecting the positions in ``(after, upper]`` of the records matching
        ``query`` (the library's DCB matching: any item; an item's types, if it names any,
        and all of its tags; no items: every record), and its parameters."""
        kw = self._kw
        bound = SQL("") if upper is None else SQL(" AND {0} <= %s")
        items = list(query.items) if query is not None and query.items else []
        if not items:
            items_sql: list[Any] = [
                SQL(
                    "SELECT notification_id FROM {schema}.{table} WHERE notification_id > %s"
                ).format(**kw)
                + bound.format(SQL("notification_id"))
            ]
            params: list[Any] = [after] + ([] if upper is None else [upper])
            return items_sql[0], params
        parts: list[Any] = []
        params = []
        for item in items:
            tags = sorted(set(item.tags))
            types = list(item.types)
            if tags:
                join = (
                    SQL(" JOIN {schema}.{table} e ON e.notification_id = t.notification_id").format(
                        **kw
                    )
                    + SQL(" AND e.topic = ANY(%s::text[])")
                    if types
                    else SQL("")
                )
                part = (
                    SQL("SELECT t.notification_id FROM {schema}.{tags} t").format(**kw)
                    + join
                    + SQL(" WHERE t.tag = ANY(%s::text[]) AND t.notification_id > %s")
                    + bound.format(SQL("t.notification_id"))
                    + SQL(" GROUP BY t.notification_id HAVING count(*) = %s")
                )
                params += [*([types] if types else []), tags, after]
                params += [] if upper is None else [upper]
                params.append(len(tags))
            else:
                part = (
                    SQL(
                        "SELECT notification_id FROM {schema}.{table} WHERE notification_id > %s"
                    ).format(**kw)
                    + bound.format(SQL("notification_id"))
                    + (SQL(" AND topic = ANY(%s::text[])") if types else SQL(""))
                )
                params += [after, *([] if upper is None else [upper]), *([types] if types else [])]
            parts.append(part)
        return SQL(" UNION ").join(parts), params

    @staticmethod
    def _check_tags(tags: Sequence[Sequence[str]] | None, count: int) -> None:
        if tags is None:
            return
        if len(tags) != count:
            msg = f"tags holds {len(tags)} sequences for {count} events"
            raise LedgerDataError(msg)
        for event_tags in tags:
            for tag in event_tags:
                if not isinstance(tag, str):
                    msg = f"a tag must be a string, got {type(tag).__name__}"
                    raise LedgerDataError(msg)
                if len(tag.encode("utf-8")) > MAX_TAG_BYTES:
                    msg = f"tag is longer than {MAX_TAG_BYTES} UTF-8 bytes"
                    raise LedgerDataError(msg)

    def _insert_tags(
        self, curs: psycopg.Cursor[Any], ids: Sequence[int], tags: Sequence[Sequence[str]]
    ) -> None:
        names: list[str] = []
        positions: list[int] = []
        for position, event_tags in zip(ids, tags, strict=True):
            for tag in dict.fromkeys(event_tags):
                names.append(tag)
                positions.append(position)
        if names:
            curs.execute(self._sql_tags_insert, (names, positions))

    # Tags -----------------------------------------------------------------------------------

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def tag_index_built(self) -> bool:
        """Whether every record's tags are indexed (format version >= 2)."""
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row)
            curs.execute(self._sql_format_select)
            row = curs.fetchone()
        return row is not None and int(row[0]) >= TAG_INDEX_FORMAT

    def _require_tag_index(self, curs: psycopg.Cursor[Any]) -> None:
        curs.execute(self._sql_format_select)
        row = curs.fetchone()
        if row is None or int(row[0]) < TAG_INDEX_FORMAT:
            msg = f"{self._where()} has no tag index yet: build it with build_tag_index() first"
            raise LedgerOperationalError(msg, path=self.ledger_path)

    def build_tag_index(self, tagger: Callable[[StoredEvent], Sequence[str]]) -> int:
        """Index ``tagger(stored_event)`` of every record, then record format version 2, in
        ONE transaction under the table lock (a concurrent upgrader finds it done). Returns
        how many records were tagged (0 when the index was built already)."""
        tagged = 0
        with self.datastore.get_connection() as conn, conn.transaction():
            curs = conn.cursor(row_factory=tuple_row)
            try:
                self._lock(curs)
                curs.execute(self._sql_format_select)
                row = curs.fetchone()
                if row is not None and int(row[0]) >= TAG_INDEX_FORMAT:
                    return 0
                next_id = 0
                while True:
                    curs.execute(self._sql_all_rows, (next_id, 2000))
                    rows = curs.fetchall()
                    if not rows:
                        break
                    ids: list[int] = []
                    tags: list[Sequence[str]] = []
                    for nid, oid, version, topic, state in rows:
                        found = tagger(StoredEvent(oid, version, topic, bytes(state)))
                        if found:
                            self._check_tags([found], 1)
                            ids.append(nid)
                            tags.append(found)
                    self._insert_tags(curs, ids, tags)
                    tagged += len(ids)
                    next_id = rows[-1][0]
                curs.execute(self._sql_format, (str(TAG_INDEX_FORMAT),))
            except psycopg.Error as e:
                raise self._typed(e) from None
        self.format_version = TAG_INDEX_FORMAT
        return tagged

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def select_tagged(
        self, query: DCBQuery | None, *, after: int | None = None, limit: int | None = None
    ) -> TaggedSelection:
        """The events after ``after`` matching ``query`` (the library's DCB matching), in
        position order, at most ``limit``, with the log's head they were read at.

        Positions are assigned under the table lock in commit order, so the records up to
        the head read first are exactly those committed then: the selection is one snapshot.

        :raises OperationalError: the ledger's tags are not indexed (format 1).
        """
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row, binary=True)
            self._require_tag_index(curs)
            curs.execute(self._sql_head)
            row = curs.fetchone()
            head = int(row[0]) if row is not None else 0
            if (limit is not None and limit <= 0) or head <= (after or 0):
                return TaggedSelection(head, [])
            sql, params = self._match_sql(query, after or 0, head)
            full = SQL(
                "SELECT notification_id, originator_id, originator_version, topic, state "
                "FROM {schema}.{table} WHERE notification_id IN ({0}) ORDER BY notification_id"
            ).format(sql, **self._kw)
            if limit is not None:
                full += SQL(" LIMIT %s")
                params.append(limit)
            curs.execute(full, params)
            events = [
                TaggedEvent(nid, StoredEvent(oid, version, topic, bytes(state)))
                for nid, oid, version, topic, state in curs.fetchall()
            ]
        return TaggedSelection(head, events)

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def select_positioned(
        self, originator_id: UUID | str, *, gt: int | None = None
    ) -> list[TaggedEvent]:
        """Events of one stream with version > ``gt``, in version order, with positions."""
        if self.datastore.originator_id_type == "uuid":
            originator_id = UUID(str(originator_id))
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row, binary=True)
            curs.execute(self._sql_positioned, (originator_id, gt if gt is not None else -1))
            return [
                TaggedEvent(nid, StoredEvent(oid, version, topic, bytes(state)))
                for nid, oid, version, topic, state in curs.fetchall()
            ]

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def tags_at(self, positions: Sequence[int]) -> dict[int, list[str]]:
        """The tags of the records at ``positions``, by position (records without tags are
        absent), each record's tags in the order they were given."""
        if not positions:
            return {}
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row)
            curs.execute(self._sql_tags_at, (list(positions),))
            found: dict[int, list[str]] = {}
            for position, tag in curs.fetchall():
                found.setdefault(position, []).append(tag)
            return found

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def tags_of(self, position: int) -> list[str]:
        """The tags of the record at ``position`` (empty when none, or no such record)."""
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row)
            curs.execute(self._sql_tags_of, (position,))
            return [r[0] for r in curs.fetchall()]

    def append_log(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """Append records verbatim, as a copy of another ledger (migration, restore).

        ``entries`` are ``(position, hash + body)`` continuing this log: positions follow its
        head without gaps and each hash chains to the previous record's.

        Tags are not copied: a non-empty copy records format version 1 in the same
        transaction, so the engine re-derives every record's tags when it opens the ledger
        (``build_tag_index``), as for a ledger written before the tag index.

        :raises IntegrityError: a position or hash does not continue the log, or a stream
            version exists; nothing of the batch is written.
        """
        records = [decode_entry(position, entry) for position, entry in entries]
        if not records:
            return
        with self.datastore.get_connection() as conn, conn.transaction():
            curs = conn.cursor(row_factory=tuple_row)
            try:
                self._lock(curs)
                curs.execute(self._sql_last)
                last = curs.fetchone()
                last_id, prev_hash = (0, GENESIS_HASH) if last is None else last
                prev_hash = bytes(prev_hash)
                for record in records:
                    if (
                        record.notification_id != last_id + 1
                        or chain_hash(prev_hash, record.body) != record.record_hash
                    ):
                        msg = (
                            f"record {record.notification_id} does not continue the log "
                            f"at {last_id}"
                        )
                        raise LedgerIntegrityError(msg, path=self.ledger_path)
                    last_id, prev_hash = record.notification_id, record.record_hash
                curs.execute(
                    self._sql_insert,
                    (
                        [r.originator_id for r in records],
                        [r.originator_version for r in records],
                        [r.topic for r in records],
                        [r.state for r in records],
                        [r.notification_id for r in records],
                        [r.record_hash for r in records],
                    ),
                )
                curs.execute(self._sql_format, ("1",))
                curs.execute(self._sql_notify)
            except psycopg.Error as e:
                raise self._typed(e) from None

    # Read side ------------------------------------------------------------------------------

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def select_raw(self, start: int, limit: int, stop: int | None = None) -> list[RawRow]:
        """Log entries after ``start`` as ``(id, raw originator id, version, topic, state)``.

        The fast path for projections: a UUID originator id is its 16 raw bytes.
        """
        if limit <= 0 or (stop is not None and stop < 1):
            return []
        upper = stop if stop is not None else (1 << 63) - 1
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row, binary=True)
            curs.execute(self._sql_raw, (max(start, 0), upper, limit))
            return cast(list[RawRow], curs.fetchall())

    def iter_log(self, start: int = 1, page: int = 1000) -> Iterator[tuple[int, bytes]]:
        """Every record from ``start`` as ``(notification id, hash + body)``, as LMDB stores
        it (the body re-encoded from the row). Reads in pages of ``page`` records."""
        for record in self._iter_rows(start, page):
            yield record.notification_id, record.record_hash + record.body

    def iter_records(self, start: int = 1, page: int = 1000) -> Iterator[LedgerRecord]:
        """Every record of the log from ``start``, with its hash and body."""
        yield from self._iter_rows(start, page)

    def _iter_rows(self, start: int, page: int) -> Iterator[LedgerRecord]:
        next_id = max(start, 1)
        while True:
            rows = self._log_page(next_id, page)
            if not rows:
                return
            yield from rows
            next_id = rows[-1].notification_id + 1

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def _log_page(self, start: int, page: int) -> list[LedgerRecord]:
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row, binary=True)
            curs.execute(self._sql_log, (start, page))
            return [_record(row) for row in curs.fetchall()]

    @retry(_RETRYABLE, max_attempts=10, wait=0.2)
    def stream_records(self, originator_id: UUID | str) -> list[LedgerRecord]:
        """Every record of one stream in version order, with its position and hash."""
        with self.datastore.get_connection() as conn:
            curs = conn.cursor(row_factory=tuple_row, binary=True)
            if self.datastore.originator_id_type == "uuid":
                originator_id = UUID(str(originator_id))
            curs.execute(self._sql_stream, (originator_id,))
            return [_record(row) for row in curs.fetchall()]

    def record_hash(self, position: int) -> bytes | None:
        """The hash of the record at ``position``, or None when there is none."""
        for record in self._log_page(position, 1):
            return record.record_hash if record.notification_id == position else None
        return None

    def listen_for_appends(self) -> AppendListener:
        """A listener that wakes when any host appends to this ledger (LISTEN/NOTIFY)."""
        return AppendListener(self)

    def subscribe(
        self, gt: int | None = None, topics: Sequence[str] = ()
    ) -> PostgresLedgerSubscription:
        """Iterate notifications after ``gt``, woken by LISTEN/NOTIFY, caught up once LISTEN
        holds and polling meanwhile: every append is delivered, whenever it commits
        (:mod:`memory_ledger.ledger.postgres_subscription`)."""
        return PostgresLedgerSubscription(recorder=self, gt=gt, topics=topics)


class AppendListener:
    """Waits for appends to one ledger from any host: LISTEN on the ledger's channel over a
    dedicated connection (outside the pool), reopened after a failure.

    ``LISTEN`` is in place when the constructor returns (unless the server is away: then
    :meth:`wait` connects), so an append committed after it is notified, never lost between
    the caller's first read and its first wait. :meth:`wait` never raises on a broken
    connection: it reports no notification after a pause, so a caller that polls on timeout
    keeps working while the server is away.
    """

    def __init__(self, recorder: PostgresLedgerApplicationRecorder) -> None:
        self._recorder = recorder
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        with contextlib.suppress(psycopg.Error):  # wait() connects when the server is back
            self._conn = self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        kwargs = self._recorder.datastore.pool.kwargs
        kwargs = kwargs() if callable(kwargs) else kwargs
        params = {k: v for k, v in (kwargs or {}).items() if k != "row_factory"}
        conn = psycopg.connect(**params, autocommit=True, connect_timeout=5)
        conn.execute(SQL("LISTEN {0}").format(Identifier(self._recorder.channel_name)))
        return conn

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds; True when an append was notified meanwhile."""
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                    return True
                return False
            except psycopg.Error:
                self._close()
                time.sleep(min(timeout, 1.0))
                return False

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def close(self) -> None:
        """Close the listening connection (a :meth:`wait` in progress ends first)."""
        with self._lock:
            self._close()


def _record(row: tuple[Any, ...]) -> LedgerRecord:
    nid, record_hash, originator_id, version, topic, state = row
    state = bytes(state)
    return LedgerRecord(
        notification_id=nid,
        record_hash=bytes(record_hash),
        body=encode_body(originator_id, version, topic, state),
        originator_id=originator_id,
        originator_version=version,
        topic=topic,
        state=state,
    )


class PostgresLedgerProcessRecorder(PostgresProcessRecorder, PostgresLedgerApplicationRecorder):
    """The ledger's application recorder whose inserts may carry a tracking record, written
    in the same transaction (the library's process recorder on our log)."""

    def __init__(
        self,
        datastore: PostgresDatastore,
        *,
        events_table_name: str = "stored_events",
        tracking_table_name: str = "notification_tracking",
    ) -> None:
        super().__init__(
            datastore,
            events_table_name=events_table_name,
            tracking_table_name=tracking_table_name,
        )

    def _insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        tracking: Tracking | None = kwargs.get("tracking")
        if tracking is not None:
            try:
                self._insert_tracking(curs, tracking=tracking)
            except IntegrityError as e:
                raise _Refused(self._typed(e)) from None


def _typed_errors(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` raising the typed ledger errors (``memory_ledger.ledger.errors``) in place
    of the library's or the driver's (without the password)."""

    @functools.wraps(method)
    def typed(self: PostgresLedgerApplicationRecorder, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except LedgerError:
            raise
        except (PersistenceError, psycopg.Error) as e:
            raise self._typed(e) from None

    return typed


for _name in (
    "create_table",
    "open_store",
    "adopt_store_id",
    "insert_events",
    "append_log",
    "select_raw",
    "_log_page",
    "stream_records",
    "tag_index_built",
    "build_tag_index",
    "select_tagged",
    "select_positioned",
    "tags_at",
    "tags_of",
    "max_notification_id",
    "select_notifications",
    "select_events",
):
    setattr(
        PostgresLedgerApplicationRecorder,
        _name,
        _typed_errors(getattr(PostgresLedgerApplicationRecorder, _name)),
    )


class PostgresLedgerFactory(es_postgres.PostgresFactory):
    """Infrastructure factory of this module: the library's ``PostgresFactory`` (same
    ``POSTGRES_*`` settings) with the ledger's application and process recorders.

    :raises OSError: a setting is missing or invalid (as the library's factory does).
    """

    # (The library's factory is not imported by name: ``InfrastructureFactory.construct``
    # expects exactly one factory class in a persistence module's namespace.)

    POSTGRES_APPEND_ATTEMPTS = "POSTGRES_APPEND_ATTEMPTS"
    """Tries of one append across broken connections (default 10)."""

    aggregate_recorder_class = PostgresAggregateRecorder
    application_recorder_class = PostgresLedgerApplicationRecorder
    tracking_recorder_class = PostgresTrackingRecorder
    process_recorder_class = PostgresLedgerProcessRecorder

    def application_recorder(self) -> ApplicationRecorder:
        recorder = super().application_recorder()
        if isinstance(recorder, PostgresLedgerApplicationRecorder):
            recorder.max_attempts = self._attempts()
            if not recorder.store_id:
                with contextlib.suppress(ProgrammingError):
                    recorder.open_store()
        return recorder

    def process_recorder(self) -> ProcessRecorder:
        recorder = super().process_recorder()
        if isinstance(recorder, PostgresLedgerApplicationRecorder):
            recorder.max_attempts = self._attempts()
        return recorder

    def _attempts(self) -> int:
        raw = self.env.get(self.POSTGRES_APPEND_ATTEMPTS) or "10"
        try:
            attempts = int(raw)
        except ValueError:
            attempts = 0
        if attempts <= 0:
            msg = f"{self.POSTGRES_APPEND_ATTEMPTS} must be a positive integer, got {raw!r}"
            raise OSError(msg)
        return attempts


Factory = PostgresLedgerFactory
