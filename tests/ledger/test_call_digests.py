"""``IdDigests.for_call``: one command's ids, derived once, equal to the store's.

The view remembers ids for its own life only: each call asks the key again (an erased
key is never reused by a later command), and it derives exactly what the store's
digests derive, in both id formats."""

from __future__ import annotations

import hashlib
import hmac
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.ledger.digests import ID_FORMAT_KEYED, ID_FORMAT_UNKEYED, IdDigests
from memory_ledger.ledger.ids import Namespace

STORE_KEY = b"s" * 32


def _keyed(asked: list[Namespace]) -> IdDigests:
    def inside(namespace: Namespace) -> bytes:
        asked.append(namespace)
        return hmac.digest(STORE_KEY, namespace.key().encode(), hashlib.sha256)

    return IdDigests(ID_FORMAT_KEYED, lambda: STORE_KEY, inside)


NAMES = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@given(NAMES, NAMES, st.lists(NAMES, min_size=1, max_size=5))
def test_a_call_derives_what_the_store_derives(
    part: str, session: str, statements: list[str]
) -> None:
    namespace = Namespace("acme", part, "assistant")
    for base in (_keyed([]), IdDigests(ID_FORMAT_UNKEYED)):
        call = base.for_call()
        stream = base.session_stream_id(namespace, session)
        for _ in range(2):  # the second round is answered from the call's memory
            assert call.namespace_tag(namespace) == base.namespace_tag(namespace)
            assert call.session_stream_id(namespace, session) == stream
            for turn, text in enumerate(statements, start=1):
                assert call.memory_id(namespace, text) == base.memory_id(namespace, text)
                assert call.command_id(namespace, stream, turn, "remember", text) == (
                    base.command_id(namespace, stream, turn, "remember", text)
                )
                assert call.key_tag(namespace, (text, "p")) == base.key_tag(namespace, (text, "p"))


def test_each_call_asks_the_namespace_key_once_and_a_new_call_asks_again() -> None:
    asked: list[Namespace] = []
    base = _keyed(asked)
    namespace = Namespace("acme", "alice", "assistant")
    call = base.for_call()
    first = call.memory_id(namespace, "alice likes tea")
    assert call.memory_id(namespace, "alice likes tea") == first
    assert call.for_call() is call
    assert len(asked) == 1
    other = base.for_call()
    assert other.memory_id(namespace, "alice likes tea") == first
    assert len(asked) == 2  # a later call derives anew: it never reuses another call's ids
    assert isinstance(first, UUID)
