"""``memory-ledger ui`` stopped by SIGTERM (how systemd and docker stop a service) closes its
store as Ctrl-C does: its projection file, which held an erased namespace's rows while it
served, is rewritten before the process ends (uvicorn raised SIGTERM again once it had
stopped, which killed the process before any ``finally`` ran)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from tests.ui.ui_process import start_ui

WORD = "xylophonequokka"
ZELDA = Namespace("acme", "zelda", "chat")
BOB = Namespace("acme", "bob", "chat")


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    return [
        str(path.relative_to(folder))
        for path in sorted(folder.rglob("*"))
        if path.is_file() and needle in path.read_bytes().lower()
    ]


def test_sigterm_closes_the_store_and_rewrites_what_an_erasure_left(tmp_path: Path) -> None:
    store, key = tmp_path / "store", tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    with MemoryEngine.open(store, master_key=key.read_bytes()) as engine:
        engine.remember(ZELDA, f"Zelda plays the {WORD}.")
        engine.remember(BOB, "Bob likes tea.")
    child, url = start_ui("--store", str(store), "--master-key-file", str(key))
    try:
        with httpx.Client(follow_redirects=True, timeout=60) as browser:
            assert browser.get(url).status_code == 200
        assert _files_holding(store / "projections", WORD.encode())  # the ui's slot holds it
        with MemoryEngine.open(store, create=False, master_key=key.read_bytes()) as engine:
            report = engine.erase("acme", "zelda")
        assert report.busy_projections == 1  # the ui's slot: rewritten when it next reads
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=60)
    assert child.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert _files_holding(store, WORD.encode()) == []
