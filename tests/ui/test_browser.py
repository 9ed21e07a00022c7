"""The debugger in a real browser: Debian's Chromium, headless, driven by Playwright's
Python package (no browser is downloaded), against ``memory-ledger ui`` started as a
process. Skipped only when /usr/bin/chromium is absent outside CI; in CI (``CI=true``) a
missing browser fails (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder
from tests.conftest import REPO_ROOT
from tests.ui.ui_store import UiStore, build_store

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> None:
    """Skip without the browser, except in CI, where its absence is a failure."""
    if CHROMIUM.exists():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")


def start_ui(store: Path) -> tuple[subprocess.Popen[str], str]:
    """``memory-ledger ui --store STORE --json`` in its own process; its URL."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    code = "from memory_ledger.replay.cli.app import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "ui", "--store", str(store), "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=store.parent,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(timeout=30)
        pytest.fail(f"memory-ledger ui did not start (exit {process.returncode})")
    return process, str(json.loads(line)["url"])


def stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[UiStore, str]]:
    store = build_store(tmp_path_factory.mktemp("browser") / "store")
    process, url = start_ui(store.path)
    try:
        yield store, url
    finally:
        stop(process)


def test_the_address_is_local_with_a_token(served: tuple[UiStore, str]) -> None:
    _, url = served
    assert url.startswith("http://127.0.0.1:") and "?token=" in url
    assert len(url.split("token=")[1]) >= 40


def test_browse_namespace_memory_supersession(browser: Any, served: tuple[UiStore, str]) -> None:
    store, url = served
    page = browser.new_page()
    page.goto(url)
    assert "token=" not in page.url  # the token went into a cookie
    page.click("a.open-ns >> nth=0")  # acme / alice
    page.wait_for_selector("#memories")
    page.click("text=Alice lives in Lisbon.")
    assert page.inner_text("#status") == "superseded"
    page.click("#superseded-by")  # follow the supersession
    page.wait_for_selector("#statement")
    assert page.inner_text("#statement") == "Alice lives in Porto."
    assert page.inner_text("#status") == "active"
    assert store.porto in page.url
    chain = page.inner_text("#chain")
    assert chain.index("Lisbon") < chain.index("Porto")
    # the hostile statement is text on the page, and no script ran
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(url.split("?")[0] + f"memory/{store.hostile}")
    assert "<script>alert('x')</script>" in page.inner_text("#statement")
    assert page.locator("img").count() == 0 and not dialogs
    page.close()


def test_move_between_two_points(browser: Any, served: tuple[UiStore, str]) -> None:
    store, url = served
    page = browser.new_page()
    page.goto(url)
    page.click("a.open-ns >> nth=0")
    page.click("header >> text=time travel")
    page.fill("#point-a", str(store.position_before_move))
    page.fill("#point-b", str(store.position_before_move))
    page.click("#compare")
    assert "Nothing changed" in page.inner_text("#difference")
    page.fill("#point-b", str(store.head))
    page.click("#compare")
    difference = page.inner_text("#difference")
    assert "only at A" in difference and "Alice lives in Lisbon." in difference
    assert "only at B" in difference and "Alice lives in Porto." in difference
    page.close()


def test_explained_recall(browser: Any, served: tuple[UiStore, str]) -> None:
    store, url = served
    page = browser.new_page()
    page.goto(url)
    page.click("a.open-ns >> nth=0")
    page.click("header >> text=recall")
    page.fill("#query", "where does Alice live")
    page.click("#ask")
    hits = page.inner_text("#hits")
    assert "Alice lives in Porto." in hits and "Lisbon" not in hits
    assert "semantic channel: off" in page.inner_text("#recall-meta")
    page.fill("#at", str(store.position_before_move))
    page.click("#ask")
    assert "Alice lives in Lisbon." in page.inner_text("#hits")
    page.close()


def tamper(store: Path, position: int) -> None:
    """Flip one stored byte of the record at ``position`` (as tests/replay/test_verify.py)."""
    with MemoryEngine.open(store) as engine:
        recorder = engine.recorder
        assert isinstance(recorder, LMDBApplicationRecorder)
        datastore = recorder.datastore
        log = datastore.db(b"log")
        values = dict(recorder.iter_log())
        value = bytearray(values[position])
        value[-5] ^= 0x01
        key = position.to_bytes(8, "big")
        datastore.write(lambda txn: txn.put(key, bytes(value), db=log))


def test_a_tampered_store_is_reported(browser: Any, tmp_path: Path) -> None:
    store = build_store(tmp_path / "store")
    tamper(store.path, 7)
    process, url = start_ui(store.path)
    try:
        page = browser.new_page()
        page.goto(url)
        page.click("header >> text=integrity")
        report = page.inner_text("#verify")
        assert "Tampered" in report and "position 7" in report
        page.close()
    finally:
        stop(process)


def test_a_missing_browser_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="missing in CI"):
        require_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        require_chromium()
