"""The id format step on a PostgreSQL ledger (``memory-ledger migrate --store DIR --ledger
URL``; issue 36; docs/erasure.md "Migrating a store to keyed ids").

The same record mapping as the LMDB step (:func:`.rekey.copy_rekeyed`), written into new
tables of the same database, then swapped in:

1. the rewritten ledger and its key table are written into a scratch schema
   (``<schema>_id_migration``) of the same database; the old tables are untouched and
   usable (a crash here leaves the scratch schema, which the next run drops and starts
   over);
2. the new ledger is verified (chain, positions, every record decodes);
3. in **one transaction**, the old events table is locked against writers, its head is
   checked to be the one copied (else ``store_in_use``, nothing changes), the old tables
   move to an aside schema, the new ones into the ledger's schema (``ALTER TABLE ... SET
   SCHEMA``), and both other schemas are dropped: a crash before the commit leaves the old
   ledger as it was, after it the new one; the old tables (and their wrapped data keys)
   are gone with their files;
4. the read models of this host (``DIR/projections``) are deleted and rebuilt from the new
   ledger. Other hosts of the ledger must be stopped during the step and delete their
   ``projections/`` before they start again (their rows carry the old ids).

The old->new id map is kept in memory only. The server's write-ahead log and base backups
keep the old rows until recycled (docs/erasure.md).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.engine.opening import ID_MIGRATION_DIR
from memory_ledger.ledger.digests import ID_FORMAT_KEYED
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.master_key import KeyWrapper, MasterKeySpec
from memory_ledger.ledger.postgres import PostgresLedgerURL, parse_ledger_url
from memory_ledger.replay.audit.rekey import IdMigrationError, IdMigrationReport, copy_rekeyed
from memory_ledger.replay.audit.verify import verify_store

__all__ = ["migrate_postgres_ids"]

_SUFFIX = "_id_migration"
_ASIDE = "_id_old"
_LOCK_TIMEOUT = "10s"


def _with_schema(url: str, schema: str) -> str:
    """``url`` with its ``schema`` query parameter set to ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("schema", schema)])))


def _connect(url: PostgresLedgerURL) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host=url.host,
        port=url.port,
        dbname=url.dbname,
        user=url.user,
        password=url.password or None,
        connect_timeout=url.connect_timeout,
    )


def _refused(url: PostgresLedgerURL, e: psycopg.Error) -> IdMigrationError:
    """A driver error as the step's typed error (the server's message, never the URL's
    password)."""
    diag = getattr(e, "diag", None)
    detail = getattr(diag, "message_primary", None) or type(e).__name__
    msg = f"PostgreSQL ledger {url.redacted}: {detail}; the ledger is unchanged"
    return IdMigrationError(msg, reason_code="postgres_error")


def _drop_schema(url: PostgresLedgerURL, name: str) -> None:
    try:
        with _connect(url) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(sql.Identifier(name)))
    except psycopg.Error as e:
        raise _refused(url, e) from None


def migrate_postgres_ids(
    store: str | os.PathLike[str],
    ledger: str,
    *,
    master_key: MasterKeySpec | None = None,
    config: MemoryConfig | None = None,
) -> IdMigrationReport:
    """Give the PostgreSQL ledger ``ledger`` keyed ids (id format 2; see the module doc);
    ``store`` is this host's store folder (its projections are rebuilt). Idempotent: a
    format-2 ledger is left as it is.

    :param master_key: the master key of an encrypted store (default: the configured one).
    :param config: settings (default: ``memory-ledger.toml`` if any); lexical only.
    :raises MasterKeyError: the store is encrypted and its master key is missing or another.
    :raises LedgerError: the ledger cannot be reached or holds no ledger.
    :raises IdMigrationError: ``store_in_use`` (written during the copy),
        ``copy_unverified``, ``postgres_error`` (the server refused the swap); the old
        ledger is unchanged.
    """
    started = time.perf_counter()
    config = load_config_from(config or load_config(), embeddings="none", ledger="")
    url = parse_ledger_url(ledger)
    scratch = url.schema[: 63 - len(_SUFFIX)] + _SUFFIX
    aside = url.schema[: 63 - len(_ASIDE)] + _ASIDE
    scratch_url = _with_schema(ledger, scratch)
    root = Path(store).absolute()
    work = root / ID_MIGRATION_DIR
    shutil.rmtree(work, ignore_errors=True)
    with MemoryEngine.open(
        root, create=False, config=config, master_key=master_key, ledger=ledger
    ) as source:
        before = source.keyring.digests.id_format
        if before >= ID_FORMAT_KEYED:
            return IdMigrationReport(
                ok=True,
                store=url.redacted,
                migrated=False,
                id_format_before=before,
                id_format_after=before,
                seconds=time.perf_counter() - started,
            )
        _drop_schema(url, scratch)  # a copy an earlier run did not finish
        try:
            with _connect(url) as conn:
                conn.execute(sql.SQL("CREATE SCHEMA {0}").format(sql.Identifier(scratch)))
        except psycopg.Error as e:
            raise _refused(url, e) from None

        def open_target(master: KeyWrapper | None) -> MemoryEngine:
            return MemoryEngine.open(
                work / "new", config=config, master_key=master, ledger=scratch_url, sync=True
            )

        # The key table is written before the new ledger is opened with the master key:
        # through an engine opened first without it (opening writes no key).
        with MemoryEngine.open(work / "keys", config=config, ledger=scratch_url) as keys:
            head, throwaway = copy_rekeyed(source, keys.keyring.store, open_target)
        events = str(getattr(source.recorder, "events_table_name", "stored_events"))
    try:
        with MemoryEngine.open(
            work / "verify", create=False, config=config, master_key=master_key, ledger=scratch_url
        ) as engine:
            report = verify_store(engine)
        if not report.ok or report.head != head:
            msg = f"the rewritten ledger does not verify ({report.problem}); it is unchanged"
            raise IdMigrationError(msg, reason_code="copy_unverified")
        _swap(url, (scratch, aside), events, head)
    except BaseException:
        _drop_schema(url, scratch)
        shutil.rmtree(work, ignore_errors=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(root / "projections", ignore_errors=True)
    with MemoryEngine.open(
        root, create=False, config=config, master_key=master_key, ledger=ledger
    ) as engine:
        engine.catch_up()
    return IdMigrationReport(
        ok=True,
        store=url.redacted,
        migrated=True,
        id_format_before=before,
        id_format_after=ID_FORMAT_KEYED,
        head=head,
        throwaway_ids=throwaway,
        verify=report,
        seconds=time.perf_counter() - started,
    )


def _swap(url: PostgresLedgerURL, schemas: tuple[str, str], events: str, head: int) -> None:
    """In one transaction: refuse if the live ledger (events table ``events``) moved past
    ``head``, then move its tables to the aside schema, the scratch schema's tables in, and
    drop both other schemas (``schemas``: scratch, aside)."""
    scratch, aside = schemas
    live = sql.Identifier(url.schema)
    try:
        with _connect(url) as conn, conn.transaction():
            tables = [
                str(r[0])
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (scratch,),
                ).fetchall()
            ]
            conn.execute(sql.SQL("SET LOCAL lock_timeout = {0}").format(sql.Literal(_LOCK_TIMEOUT)))
            conn.execute(
                sql.SQL("LOCK TABLE {0}.{1} IN ACCESS EXCLUSIVE MODE").format(
                    live, sql.Identifier(events)
                )
            )
            row = conn.execute(
                sql.SQL("SELECT coalesce(max(notification_id), 0) FROM {0}.{1}").format(
                    live, sql.Identifier(events)
                )
            ).fetchone()
            if row is None or int(str(row[0])) != head:
                msg = f"{url.redacted} was written during the id migration: stop its hosts, rerun"
                raise IdMigrationError(msg, reason_code="store_in_use")
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(sql.Identifier(aside)))
            conn.execute(sql.SQL("CREATE SCHEMA {0}").format(sql.Identifier(aside)))
            for table in tables:
                name = sql.Identifier(table)
                conn.execute(
                    sql.SQL("ALTER TABLE IF EXISTS {0}.{1} SET SCHEMA {2}").format(
                        live, name, sql.Identifier(aside)
                    )
                )
                conn.execute(
                    sql.SQL("ALTER TABLE {0}.{1} SET SCHEMA {2}").format(
                        sql.Identifier(scratch), name, live
                    )
                )
            for gone in (aside, scratch):
                conn.execute(sql.SQL("DROP SCHEMA {0} CASCADE").format(sql.Identifier(gone)))
            fault("rekey_postgres.swap")  # a crash before the commit
    except psycopg.Error as e:
        if isinstance(e, psycopg.errors.LockNotAvailable):
            msg = f"{url.redacted} is being written by another host: stop its hosts, rerun"
            raise IdMigrationError(msg, reason_code="store_in_use") from None
        raise _refused(url, e) from None
