"""The debugger is safe by default: stored strings are escaped (hidden characters shown),
every request needs the token, nothing but GET is served, and browsing changes nothing."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay.ui import UiState, create_app, open_read_only
from memory_ledger.replay.ui.security import cookie_name
from memory_ledger.replay.ui.text import HIDDEN, shown_text
from tests.ui.conftest import TOKEN, store_files
from tests.ui.ui_store import BIDI, BREAKOUT, SCRIPT, UiStore

Q = "t=acme&p=alice&s=assistant"


def pages(ui_store: UiStore) -> list[str]:
    return [
        "/",
        f"/namespace?{Q}",
        f"/timeline?{Q}",
        f"/timeline?{Q}&after=4",
        "/event/5",
        f"/memory/{ui_store.hostile}",
        f"/timetravel?{Q}&mode=position&a=0&b={ui_store.head}",
        f"/recall?{Q}&q=Alice+note+script&k=5",
        "/integrity",
    ]


def assert_inert(html: str) -> None:
    """No stored markup became markup, and no hidden character reached the page."""
    assert "<script" not in html.lower()
    assert "<img" not in html.lower()
    assert "onerror=alert(1)>" not in html  # only as &gt;-escaped text
    assert not HIDDEN.search(html), repr(HIDDEN.findall(html))


def test_every_page_escapes_stored_strings(client: TestClient, ui_store: UiStore) -> None:
    shown = 0
    for path in pages(ui_store):
        page = client.get(path)
        assert page.status_code == 200, path
        assert_inert(page.text)
        shown += "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page.text
    assert shown >= 4  # the hostile statement is on several pages, as text


def test_hidden_characters_are_shown_as_marks(client: TestClient, ui_store: UiStore) -> None:
    page = client.get(f"/memory/{ui_store.hostile}")
    marks = re.findall(r'<span class="ctl"[^>]*>(U\+[0-9A-F]{4})</span>', page.text)
    assert {"U+202E", "U+0007", "U+001B"} <= set(marks)
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page.text
    assert "[U+202E]" in page.text  # in the SVG graph's labels


@given(st.text(min_size=1, max_size=40))
def test_shown_text_never_lets_markup_or_hidden_characters_through(text: str) -> None:
    html = str(shown_text(text))
    assert "<" not in re.sub(
        r'<span class="ctl" title="hidden character">U\+[0-9A-F]{4}</span>', "", html
    )
    assert not HIDDEN.search(html) and '"' not in re.sub(r"<span[^>]*>", "", html)


def test_the_escaping_fixtures_are_what_they_say() -> None:
    assert SCRIPT.startswith("<script>") and BREAKOUT.startswith('">')
    assert BIDI[0] == "\u202e"


def test_no_token_no_page(state: UiState) -> None:
    with TestClient(create_app(state)) as anonymous:
        for path in ["/", f"/namespace?{Q}", "/event/1", "/static/ui.css", "/nope"]:
            page = anonymous.get(path)
            assert page.status_code == 403 and "token required" in page.text
        wrong = anonymous.get("/?token=guess")
        assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
        anonymous.cookies.set(cookie_name(TOKEN), "guess")
        assert anonymous.get("/").status_code == 403


def test_the_token_becomes_a_strict_cookie_and_leaves_the_address(state: UiState) -> None:
    with TestClient(create_app(state)) as browser:
        first = browser.get(f"/timeline?{Q}&token={TOKEN}", follow_redirects=False)
        assert first.status_code == 303
        assert first.headers["location"] == f"/timeline?{Q}"
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = browser.get(f"/timeline?{Q}")
        assert page.status_code == 200
        csp = page.headers["content-security-policy"]
        assert csp.startswith("default-src 'none'") and "script-src" not in csp
        assert page.headers["referrer-policy"] == "no-referrer"
        assert page.headers["x-frame-options"] == "DENY"


def test_only_get_is_served(client: TestClient) -> None:
    for method in ("post", "put", "delete", "patch"):
        response = getattr(client, method)("/")
        assert response.status_code == 405


def test_static_css_is_served_with_the_token(client: TestClient) -> None:
    css = client.get("/static/ui.css")
    assert css.status_code == 200 and ".ctl" in css.text


def test_browsing_changes_nothing(tmp_path: Path) -> None:
    from tests.ui.ui_store import build_store

    built = build_store(tmp_path / "store")
    before = store_files(built.path)
    ledger = hashlib.sha256(before["ledger/data.mdb"]).hexdigest()
    engine = open_read_only(built.path)
    assert engine.read_only
    state = UiState(engine, TOKEN, page_size=2)
    try:
        with TestClient(create_app(state)) as client:
            client.get(f"/?token={TOKEN}")
            for path in [*pages(built), f"/recall?{Q}&q=Alice&at=3", f"/memory/{built.lisbon}"]:
                assert client.get(path).status_code == 200
    finally:
        state.close()
        engine.close()
    after = store_files(built.path)
    assert after == before
    assert hashlib.sha256(after["ledger/data.mdb"]).hexdigest() == ledger
    with MemoryEngine.open(built.path) as check:
        assert check.head == built.head  # no RecallServed, no event of any kind


def test_a_missing_store_is_refused(tmp_path: Path) -> None:
    from memory_ledger.commands.errors import StoreUnavailableError

    with pytest.raises(StoreUnavailableError):
        open_read_only(tmp_path / "nothing-here")
    assert not (tmp_path / "nothing-here").exists()


def test_the_404_page_names_no_host_path(client: TestClient, ui_store: UiStore) -> None:
    page = client.get("/memory/00000000-0000-0000-0000-000000000000")
    assert page.status_code == 404 and "no memory with id" in page.text
    for folder in (ui_store.path, ui_store.path.resolve()):
        assert str(folder) not in page.text and str(folder.parent) not in page.text
    assert "this store" in page.text


def test_the_csp_sent_is_the_one_documented(client: TestClient) -> None:
    from tests.conftest import REPO_ROOT

    page = (REPO_ROOT / "docs" / "ui.md").read_text(encoding="utf-8")
    documented = re.findall(r"`Content-Security-Policy: ([^`]+)`", page)
    assert len(documented) == 1, documented
    for path in ("/", "/static/ui.css", "/no-such-page", "/memory/abcd"):
        assert client.get(path).headers["content-security-policy"] == documented[0], path
