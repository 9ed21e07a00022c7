"""Errors of the debugger (newcomer finding F7): every integer parameter is read in ASCII
digits by one helper (``²`` passes ``str.isdigit`` and fails ``int``, ``٣`` passes both
and is not what anyone typed), so each gets a 400 naming the parameter; and a 500 is
logged (its type, the route's pattern, the frames it was raised in), never its message."""

from __future__ import annotations

import io
import logging
import re
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.testclient import TestClient

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay import PointError, parse_point
from memory_ledger.replay.audit.points import whole_number
from memory_ledger.replay.ui import ledger_views
from memory_ledger.replay.ui.log import LOGGER, logged_to
from tests.ui.ui_store import ALICE

Q = f"t={ALICE.tenant}&p={ALICE.principal}&s={ALICE.scope_id}"
NOT_ASCII_DIGITS = ["²", "٣", "１２", "1²", "9" * 19, "9" * 5000, "+1", "-1", "1.0", "1_000"]
"""Superscript two (``isdigit``, not ``int``), Arabic-Indic three and full-width digits
(both ``int``), too many digits (``int`` refuses more than 4,300), signs, a fraction and
Python's digit separator (``int`` reads it)."""

ROUTES = {
    "before": f"/namespace?{Q}&before={{}}",
    "after": f"/timeline?{Q}&after={{}}",
    "offset": f"/timetravel?{Q}&a=1&b=2&offset={{}}",
    "k": f"/recall?{Q}&q=Alice&k={{}}",
    "at": f"/recall?{Q}&q=Alice&at={{}}",
    "a": f"/timetravel?{Q}&a={{}}&b=2",
    "b": f"/timetravel?{Q}&a=1&b={{}}",
    "position": "/event/{}",
}


def _error(text: str) -> str:
    found = re.findall(r'id="error">(.*?)<', text)
    assert found, text
    return str(found[0])


@pytest.mark.parametrize("text", NOT_ASCII_DIGITS)
@pytest.mark.parametrize("parameter", sorted(ROUTES))
def test_every_integer_parameter_takes_ascii_digits_only(
    client: TestClient, parameter: str, text: str
) -> None:
    response = client.get(ROUTES[parameter].format(quote(text, safe="")))
    assert response.status_code == 400, response.text
    assert _error(response.text).startswith(parameter)


@pytest.mark.parametrize("parameter", sorted(ROUTES))
def test_ascii_digits_are_read(client: TestClient, parameter: str) -> None:
    assert client.get(ROUTES[parameter].format(" 1 ")).status_code == 200


@given(st.text(max_size=25))
def test_whole_number_reads_ascii_digits_or_raises_typed(text: str) -> None:
    """Either the number ``int`` reads from the ASCII digits, or an InvalidArgumentError
    naming the parameter (never ValueError, never a number read from other digits)."""
    digits = text.strip()
    if re.fullmatch(r"[0-9]{1,18}", digits):
        assert whole_number(text, "k") == int(digits)
        assert parse_point(text, "at") == int(digits)
    else:
        with pytest.raises(InvalidArgumentError) as caught:
            whole_number(text, "k")
        assert caught.value.parameter == "k"
        if re.fullmatch(r"\d+", digits):  # other scripts' digits: no position either
            with pytest.raises(PointError):
                parse_point(text, "at")


def test_an_internal_error_is_logged_without_its_message(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-live-0123456789abcdef0123456789abcdef"

    def broken(state: object) -> object:
        raise RuntimeError(f"password {secret} in /home/someone/store")

    monkeypatch.setattr(ledger_views, "integrity", broken)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        response = client.get("/integrity")
    assert response.status_code == 500
    assert _error(response.text) == "internal error (see the server log)"
    assert secret not in response.text
    records = [r for r in caplog.records if r.name.startswith(LOGGER.name)]
    assert len(records) == 1
    (record,) = records
    line = record.getMessage()
    assert record.levelno == logging.ERROR and record.exc_info is None
    assert "RuntimeError on /integrity" in line and "broken" in line  # type, route, frame
    assert secret not in line and "password" not in line and "/home" not in line


def test_a_500_names_the_routes_pattern_not_the_address(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memory_ledger.replay.ui import memory_views

    def broken(state: object, memory_id: str) -> object:
        raise KeyError(memory_id)

    monkeypatch.setattr(memory_views, "memory_page", broken)
    with caplog.at_level(logging.WARNING, logger=LOGGER.name):
        assert client.get("/memory/private-words-here").status_code == 500
    (line,) = [r.getMessage() for r in caplog.records if r.name.startswith(LOGGER.name)]
    assert "KeyError on /memory/{memory_id}" in line
    assert "private-words-here" not in line


def test_the_ui_command_shows_the_log_on_its_stream() -> None:
    """``memory-ledger ui`` writes the debugger's log to stderr (the CLI puts a
    NullHandler on the library's logger, so nothing would show otherwise)."""
    library = logging.getLogger("memory_ledger")
    quiet = logging.NullHandler()
    library.addHandler(quiet)
    stream = io.StringIO()
    try:
        with logged_to(stream):
            LOGGER.getChild("app").error("memory-ledger ui: internal error X on /")
        LOGGER.getChild("app").error("after the block")
    finally:
        library.removeHandler(quiet)
    assert stream.getvalue() == "ERROR: memory-ledger ui: internal error X on /\n"
