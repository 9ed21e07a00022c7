"""Every view of the debugger, through Starlette's test client: what each page shows."""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from tests.ui.ui_store import ALICE, BOB, UiStore

Q = "t=acme&p=alice&s=assistant"


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def test_namespaces_lists_each_with_counts(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    rows = re.findall(r"<tr>(.*?)</tr>", page.text, flags=re.S)
    alice = next(r for r in rows if ">alice<" in r)
    bob = next(r for r in rows if ">bob<" in r)
    # active, conflicted, superseded, forgotten, pruned
    assert re.findall(r'class="num">(\d+)<', alice) == ["2", "0", "1", "0", "0"]
    assert re.findall(r'class="num">(\d+)<', bob) == ["3", "0", "0", "0", "0"]
    assert f"namespace?t={ALICE.tenant}&amp;p=alice&amp;s=assistant" in page.text


def test_namespace_pages_its_memories(client: TestClient, ui_store: UiStore) -> None:
    first = client.get(f"/namespace?{Q}")
    assert first.status_code == 200, first.text[-400:]
    assert first.text.count('class="open-memory"') == 2  # page size 2
    assert "older" in first.text
    older = re.search(r'class="next" href="([^"]+)"', first.text)
    assert older is not None and "before=" in older.group(1)
    second = client.get(older.group(1).replace("&amp;", "&"))
    assert second.text.count('class="open-memory"') == 1 and "older" not in second.text
    assert ui_store.lisbon in second.text  # oldest last
    only = client.get(f"/namespace?{Q}&status=superseded")
    assert only.text.count('class="open-memory"') == 1 and "Lisbon" in only.text


def test_timeline_pages_in_ledger_order_and_filters(client: TestClient) -> None:
    first = client.get(f"/timeline?{Q}")
    positions = [int(p) for p in re.findall(r'href="/event/(\d+)"', first.text)]
    assert len(positions) == 2 and positions == sorted(positions)
    after = re.search(r"after=(\d+)", first.text)
    assert after is not None
    second = client.get(f"/timeline?{Q}&after={after.group(1)}")
    later = [int(p) for p in re.findall(r'href="/event/(\d+)"', second.text)]
    assert later and min(later) > max(positions)
    typed = client.get(f"/timeline?{Q}&type=MemorySuperseded")
    assert "MemorySuperseded" in typed.text and "TranscriptObserved</span>" not in typed.text
    by_session = client.get(f"/timeline?{Q}&session=no-such-session")
    assert "No events match." in by_session.text
    future = client.get(f"/timeline?{Q}&since=2999-01-01T00:00Z")
    assert "No events match." in future.text
    naive = client.get(f"/timeline?{Q}&since=2024-01-01T00:00")
    assert naive.status_code == 400 and "time zone" in naive.text


def test_a_sparse_filter_scans_a_bounded_window(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_ledger.replay.ui import ledger_views

    monkeypatch.setattr(ledger_views, "SCAN_WINDOW", 5)
    first = client.get(f"/timeline?{Q}&type=MemorySuperseded")
    assert "No events match in positions 1–5" in first.text
    found, after = False, 0
    for _ in range(20):
        page = client.get(f"/timeline?{Q}&type=MemorySuperseded&after={after}")
        found = found or '<span class="type">MemorySuperseded</span>' in page.text
        step = re.search(r"after=(\d+)", page.text)
        if step is None:
            break
        after = int(step.group(1))
    assert found


def test_bob_timeline_has_only_bobs_events(client: TestClient) -> None:
    page = client.get(f"/timeline?t={BOB.tenant}&p={BOB.principal}&s={BOB.scope_id}&type=")
    assert "Bob likes tea" in page.text and "Lisbon" not in page.text


def test_event_shows_the_payload_as_stored(client: TestClient) -> None:
    page = client.get("/event/1")
    assert page.status_code == 200 and "SessionOpened" in page.text
    assert '"position": 1' in page.text.replace("&#34;", '"')
    assert client.get("/event/99999").status_code == 404
    assert client.get("/event/abc").status_code == 400


def test_memory_shows_value_chain_evidence_and_graph(client: TestClient, ui_store: UiStore) -> None:
    page = client.get(f"/memory/{ui_store.lisbon}")
    assert page.status_code == 200
    assert "Alice lives in Lisbon." in page.text and 'id="status">superseded' in page.text
    chain = re.search(r'<ol class="chain" id="chain">(.*?)</ol>', page.text, flags=re.S)
    assert chain is not None
    assert chain.group(1).index("Lisbon") < chain.group(1).index("Porto")
    assert f'href="/memory/{ui_store.porto}"' in page.text  # follow the supersession
    assert "user: I live in Lisbon now." in page.text  # the evidence turn
    assert "<svg" in page.text and "replaced by" in page.text
    newer = client.get(f"/memory/{ui_store.porto}")
    assert 'id="status">active' in newer.text and "Alice lives in Porto." in newer.text


def test_unknown_memory_is_a_404_page(client: TestClient) -> None:
    page = client.get("/memory/00000000-0000-0000-0000-000000000000")
    assert page.status_code == 404 and "Traceback" not in page.text


def test_time_travel_shows_the_difference(client: TestClient, ui_store: UiStore) -> None:
    before, head = ui_store.position_before_move, ui_store.head
    page = client.get(f"/timetravel?{Q}&mode=position&a={before}&b={head}")
    assert page.status_code == 200
    table = re.search(r'<table id="difference">(.*?)</table>', page.text, flags=re.S)
    assert table is not None
    rows = table.group(1)
    assert "only at A" in rows and "Alice lives in Lisbon." in rows
    assert "only at B" in rows and "Alice lives in Porto." in rows
    assert "superseded" in rows  # what became of Lisbon at B
    same = client.get(f"/timetravel?{Q}&mode=position&a={head}&b={head}")
    assert "Nothing changed between A and B." in same.text
    recorded = client.get(f"/timetravel?{Q}&mode=recorded&a=2000-01-01&b=2999-01-01")
    assert recorded.status_code == 200 and "only at B" in recorded.text
    occurred = client.get(f"/timetravel?{Q}&mode=occurred&a=2024-03-31T00:00Z&b=2024-06-01T00:00Z")
    assert "only at A" in occurred.text and "Porto" in occurred.text
    wrong = client.get(f"/timetravel?{Q}&mode=position&a=2024-01-01&b=3")
    assert wrong.status_code == 400
    beyond = client.get(f"/timetravel?{Q}&mode=position&a=1&b={head + 100}")
    assert beyond.status_code == 400 and "beyond" in beyond.text


def test_time_travel_pages_the_difference(client: TestClient, ui_store: UiStore) -> None:
    bob = f"t=acme&p=bob&s=assistant&mode=position&a=0&b={ui_store.head}"
    page = client.get(f"/timetravel?{bob}")
    assert page.text.count("only at B</span>") == 2 and 'class="next"' in page.text
    rest = client.get(f"/timetravel?{bob}&offset=2")
    assert rest.text.count("only at B</span>") == 1 and 'class="next"' not in rest.text


def test_recall_explained_shows_channel_scores(client: TestClient, ui_store: UiStore) -> None:
    page = client.get(f"/recall?{Q}&q=where+does+Alice+live&k=5")
    assert page.status_code == 200
    hits = re.search(r'<table id="hits">(.*?)</table>', page.text, flags=re.S)
    assert hits is not None and "Alice lives in Porto." in hits.group(1)
    assert "Lisbon" not in hits.group(1)  # superseded: not retrievable now
    scores = re.findall(r'class="num">(\d+\.\d{3})<', hits.group(1))
    assert scores and "semantic channel: off" in page.text
    past = client.get(f"/recall?{Q}&q=where+does+Alice+live&at={ui_store.position_before_move}")
    assert "Alice lives in Lisbon." in past.text and "as of position" in past.text


def test_integrity_reports_an_intact_chain(client: TestClient) -> None:
    page = client.get("/integrity")
    assert page.status_code == 200 and "Hash chain intact" in page.text
    assert "payloads in clear" in page.text


def test_bad_namespace_is_a_typed_error_page(client: TestClient) -> None:
    page = client.get("/namespace?t=acme")
    assert page.status_code == 400 and "name the namespace" in page.text
