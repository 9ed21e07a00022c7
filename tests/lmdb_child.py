"""Child-process entry points for ``tests/ledger/test_lmdb_store.py``.

Every function here is a top-level, importable entry point that runs in a fresh interpreter
(started with ``subprocess`` and ``sys.executable``; never forked from a process that has an
LMDB environment open). Run one as::

    python tests/lmdb_child.py FUNCTION_NAME '<json list of arguments>'

Children talk to the parent with JSON lines on stdout: ``{"ready": ...}`` when they are set up,
``{"ack": ...}`` for progress, and one final ``{"result": ...}`` line. A child that waits for the
parent's go-ahead reads one line from stdin. Exceptions are reported, never raised, so the
parent can assert on them.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.persistence import InfrastructureFactory, StoredEvent

from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore

TOPIC = "tests.lmdb:Event"


def emit(**message: Any) -> None:
    """Write one JSON line to stdout and flush it at once."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def stream_id(*parts: object) -> UUID:
    """A deterministic originator id for the given parts (the parent computes the same)."""
    return uuid5(NAMESPACE_URL, "lmdb-test/" + "/".join(str(p) for p in parts))


def payload(tag: str, size: int) -> bytes:
    """Deterministic state of exactly ``size`` bytes: ``tag|`` repeated (``size`` >= its length)."""
    head = f"{tag}|".encode()
    if size < len(head):
        raise ValueError(f"size {size} is too small for tag {tag!r}")
    return (head * (size // len(head) + 1))[:size]


def _factory(path: str, **settings: str) -> InfrastructureFactory[Any]:
    env = {"PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb", "LMDB_PATH": path, **settings}
    return InfrastructureFactory.construct(env=env)


def _wait_for_go() -> None:
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit(f"expected 'go' on stdin, got {line!r}")


def _count_calls(obj: Any, name: str, counter: dict[str, int]) -> None:
    """Wrap ``obj.name`` so that each call increments ``counter[name]``."""
    original = getattr(obj, name)
    counter[name] = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        counter[name] += 1
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


# Entry points -------------------------------------------------------------------------------


def dcb_claimer(path: str, child: int, rounds: int) -> None:
    """Per round: after a go, read the claims of slot ``slot:<round>`` (reporting
    ``{"ack": "read"}``); after a second go, claim the slot if the read found no claim,
    appended with the condition "no claim of this slot after the position read".

    Reports ``{"ack": {"round": r, "won": bool}}`` per round (``won`` false: the condition
    failed, someone claimed the slot after this child's read).
    """
    from eventsourcing.dcb.api import (  # noqa: PLC0415
        DCBAppendCondition,
        DCBEvent,
        DCBQuery,
        DCBQueryItem,
    )
    from eventsourcing.persistence import IntegrityError  # noqa: PLC0415

    from memory_ledger.ledger.lmdb_dcb import LMDBDCBRecorder  # noqa: PLC0415

    datastore = LMDBDatastore(path, map_size=16 * 1024**2, sync=False)
    recorder = LMDBDCBRecorder(datastore)
    emit(ready=os.getpid())
    for number in range(rounds):
        query = DCBQuery(items=[DCBQueryItem(tags=[f"slot:{number}"])])
        _wait_for_go()
        read = recorder.read(query)
        claimed = list(read)
        emit(ack="read")
        _wait_for_go()
        won = False
        if not claimed:
            claim = DCBEvent(type="SlotClaimed", data=str(child).encode(), tags=[f"slot:{number}"])
            try:
                recorder.append([claim], DCBAppendCondition(query, after=read.head))
                won = True
            except IntegrityError:
                won = False
        emit(ack={"round": number, "won": won})
    datastore.close()
    emit(result={"rounds": rounds})


def concurrent_writer(path: str, child: int, batches: int, batch_size: int) -> None:
    """Insert ``batches`` batches of ``batch_size`` events after the parent says go.

    Each event's state is JSON ``[child, batch, index]``; one stream per child, with versions
    counting up. Reports the notification ids returned by every insert.
    """
    datastore = LMDBDatastore(path, map_size=16 * 1024**2, sync=False)
    recorder = LMDBApplicationRecorder(datastore)
    originator_id = stream_id("writer", child)
    emit(ready=os.getpid())
    _wait_for_go()
    returned: list[list[int]] = []
    try:
        for batch in range(batches):
            events = [
                StoredEvent(
                    originator_id=originator_id,
                    originator_version=batch * batch_size + index + 1,
                    topic=TOPIC,
                    state=json.dumps([child, batch, index]).encode(),
                )
                for index in range(batch_size)
            ]
            ids = recorder.insert_events(events)
            returned.append(list(ids or []))
    except BaseException as e:
        emit(result={"error": repr(e), "traceback": traceback.format_exc()})
        return
    datastore.close()
    emit(result={"ids": returned})


def growing_writer(
    path: str, map_size: int, batches: int, batch_size: int, size: int, writer: int = 0
) -> None:
    """Through the factory (``LMDB_MAP_SIZE``, ``LMDB_SYNC=n``), write far past ``map_size``.

    Waits for the parent's go. Event ``index`` of batch ``batch`` is version ``index + 1`` of
    stream ``stream_id("grow", writer, batch)`` with state ``payload(f"{writer}:{batch}:{index}",
    size)``. Reports the last ids, how often the map grew or was adopted, and the final size.
    """
    counter: dict[str, int] = {}
    try:
        factory = _factory(path, LMDB_MAP_SIZE=str(map_size), LMDB_SYNC="n")
        recorder = factory.application_recorder()
        shared = factory.datastore.shared  # type: ignore[attr-defined]
        _count_calls(shared, "_grow", counter)
        _count_calls(shared, "_adopt_new_size", counter)
        emit(ready=os.getpid())
        _wait_for_go()
        last: list[int] = []
        for batch in range(batches):
            events = [
                StoredEvent(
                    originator_id=stream_id("grow", writer, batch),
                    originator_version=index + 1,
                    topic=TOPIC,
                    state=payload(f"{writer}:{batch}:{index}", size),
                )
                for index in range(batch_size)
            ]
            last = list(recorder.insert_events(events) or [])
        final_size = int(shared.env.info()["map_size"])
        factory.close()
    except BaseException as e:
        emit(result={"error": repr(e), "traceback": traceback.format_exc()})
        return
    emit(result={"last_ids": last, "map_size": final_size, **counter})


def looping_reader(path: str, map_size: int, target: int, size: int, timeout: float) -> None:
    """Read in a loop (``max_notification_id`` and ``select_notifications``) until ``target``.

    Checks every notification's state against :func:`payload`. Reports any exception (for
    instance ``lmdb.MapFullError`` / ``lmdb.MapResizedError``) instead of raising it.
    """
    counter: dict[str, int] = {}
    reads = 0
    next_id = 1
    max_seen = 0
    try:
        datastore = LMDBDatastore(path, map_size=map_size, sync=False)
        recorder = LMDBApplicationRecorder(datastore)
        _count_calls(datastore.shared, "_adopt_new_size", counter)
        emit(ready=os.getpid())
        deadline = time.monotonic() + timeout
        while next_id <= target:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read up to {next_id - 1} of {target} notifications")
            max_seen = max(max_seen, recorder.max_notification_id() or 0)
            for n in recorder.select_notifications(start=next_id, limit=25):
                if n.id != next_id:
                    raise AssertionError(f"expected notification {next_id}, got {n.id}")
                tag = n.state.split(b"|", 1)[0].decode()
                if len(n.state) != size or n.state != payload(tag, size):
                    raise AssertionError(f"notification {n.id} has a corrupt state")
                next_id += 1
            reads += 1
        max_seen = max(max_seen, recorder.max_notification_id() or 0)
        datastore.close()
    except BaseException as e:
        emit(result={"error": repr(e), "traceback": traceback.format_exc()})
        return
    emit(result={"reads": reads, "read_up_to": next_id - 1, "max_seen": max_seen, **counter})


def hold_read_transaction(path: str) -> None:
    """Open the store, start a read transaction, tell the parent, then sleep (to be killed)."""
    datastore = LMDBDatastore(path, map_size=4 * 1024**2, sync=False)
    with datastore.read() as txn:
        txn.get(b"format_version", db=datastore.db(b"meta"))
        emit(ready=os.getpid())
        time.sleep(120)


def fresh_open(path: str) -> None:
    """Open the store, report the reader table and stale slots cleared, then write a batch."""
    try:
        datastore = LMDBDatastore(path, map_size=4 * 1024**2, sync=False)
        cleared = datastore.shared.stale_readers_cleared
        readers = datastore.env.readers()
        recorder = LMDBApplicationRecorder(datastore)
        originator_id = stream_id("fresh", os.getpid())
        ids = recorder.insert_events(
            [StoredEvent(originator_id, version, TOPIC, b"fresh") for version in range(1, 4)]
        )
        datastore.close()
    except BaseException as e:
        emit(result={"error": repr(e), "traceback": traceback.format_exc()})
        return
    emit(result={"cleared": cleared, "readers": readers, "ids": list(ids or [])})


def try_open(path: str) -> None:
    """Open the store and report success, or the type and message of the exception raised."""
    try:
        datastore = LMDBDatastore(path, map_size=4 * 1024**2, sync=False)
    except BaseException as e:
        cls = type(e)
        emit(result={"error_type": f"{cls.__module__}.{cls.__qualname__}", "message": str(e)})
        return
    datastore.close()
    emit(result={"opened": True})


def raw_make_store(path: str, format_version: str) -> None:
    """With plain ``lmdb`` (no ledger code), make a store holding only ``meta/format_version``."""
    import lmdb

    env = lmdb.open(path, subdir=True, max_dbs=32, map_size=4 * 1024**2)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as txn:
        txn.put(b"format_version", format_version.encode(), db=meta)
    env.close()
    emit(result={"made": True})


def raw_store_state(path: str) -> None:
    """With plain ``lmdb``, report the named databases and the last committed transaction id."""
    import lmdb

    env = lmdb.open(path, subdir=True, max_dbs=32, readonly=True, lock=True)
    with env.begin() as txn:
        names = sorted(bytes(key).decode() for key, _ in txn.cursor())
    state = {"dbs": names, "last_txnid": int(env.info()["last_txnid"])}
    env.close()
    emit(result=state)


def acknowledging_writer(path: str, batches: int, batch_size: int) -> None:
    """With ``LMDB_SYNC=y``, insert batches and print each insert's ids as soon as it returns.

    Meant to be SIGKILLed by the parent in the middle of writing.
    """
    factory = _factory(path, LMDB_SYNC="y", LMDB_MAP_SIZE=str(4 * 1024**2))
    recorder = factory.application_recorder()
    emit(ready=os.getpid())
    for batch in range(batches):
        events = [
            StoredEvent(stream_id("ack", batch), index + 1, TOPIC, f"{batch}:{index}".encode())
            for index in range(batch_size)
        ]
        ids = recorder.insert_events(events)
        emit(ack={"batch": batch, "ids": list(ids or [])})
    factory.close()
    emit(result={"done": True})


def subscription_writer(path: str, batches: int, batch_size: int, pause: float) -> None:
    """After the parent's go, insert batches with a pause between them; report the ids."""
    datastore = LMDBDatastore(path, map_size=4 * 1024**2, sync=False)
    recorder = LMDBApplicationRecorder(datastore)
    emit(ready=os.getpid())
    _wait_for_go()
    returned: list[int] = []
    for batch in range(batches):
        events = [
            StoredEvent(stream_id("sub", batch), index + 1, TOPIC, f"{batch}:{index}".encode())
            for index in range(batch_size)
        ]
        returned.extend(recorder.insert_events(events) or [])
        time.sleep(pause)
    datastore.close()
    emit(result={"ids": returned})


ENTRY_POINTS = {
    f.__name__: f
    for f in (
        concurrent_writer,
        growing_writer,
        looping_reader,
        hold_read_transaction,
        fresh_open,
        try_open,
        raw_make_store,
        raw_store_state,
        acknowledging_writer,
        subscription_writer,
        dcb_claimer,
    )
}


def main(argv: list[str]) -> None:
    name, raw_args = argv[1], argv[2] if len(argv) > 2 else "[]"
    ENTRY_POINTS[name](*json.loads(raw_args))


if __name__ == "__main__":
    main(sys.argv)
