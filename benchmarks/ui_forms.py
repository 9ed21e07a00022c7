"""Debugger forms keep every character: the long profile of ``tests/ui/test_forms.py``.

``python -m benchmarks ui-forms [--examples N] [--seed S] [--quick]`` renders the
debugger's pages with forms (recall, timeline, time travel) for generated namespaces,
queries and session filters drawn from every character class that broke them (issue 34
item 6: zero-width and direction characters, quotes, ``<``, ``>``, ``&``, characters beyond
the BMP, combining marks, control characters), parses each page with :mod:`html.parser`
and checks that every form field and every navigation link carries the exact text, while
the page's text shows each hidden character as its ``U+XXXX`` mark. It prints the number of
examples tried (default 2,000; ``--quick``: 50) and how many were refused by the
namespace rules first. The test suite runs the same check with the fast profile.

Namespace parts respect :func:`memory_ledger.ledger.ids.check_namespace` (it refuses
control characters and bidirectional controls). Queries and session filters may hold any
character an HTML form can carry back: not NUL (the HTML parser turns it into U+FFFD) and
no line break (a text input strips line breaks from its value).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from benchmarks.results import print_table, save
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.arguments import forbidden_character

CLASSES: dict[str, str] = {
    "zero-width": "\u200b\u200c\u200d\u2060\ufeff\u00ad",
    "direction": "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069",
    "markup": "\"'<>&=/;#",
    "beyond the BMP": "\U0001f600\U0001d11e\U00020000\U0001f1f5\U0001f1f9",
    "combining": "\u0301\u0308\u20dd\u0327",
    "control": "\x01\x07\x08\x0b\x0c\x1b\x7f\x80\x85\x9f",
    "space": " \t\u00a0\u3000",
    "plain": "aZé漢ش0",
}
"""The character classes drawn from, by name."""

EVERY = "".join(CLASSES.values())
FREE_TEXT = st.text(
    alphabet=st.sampled_from(EVERY) | st.characters(codec="utf-8"), min_size=1, max_size=24
)
PART_ALPHABET = "".join(c for c in EVERY if forbidden_character(c) is None)

NAMESPACE = Namespace("acme", "al\u200bice", "assistant")
"""The stored namespace: its principal holds a ZERO WIDTH SPACE (issue 34's case)."""
STATEMENT = "Alice lives in Lisbon."


def _allowed(char: str) -> bool:
    return forbidden_character(char) is None


def part() -> st.SearchStrategy[str]:
    """A namespace part: the classes' characters that the namespace rules allow, and any
    other such character (a part must also be more than spaces: :func:`valid`)."""
    anything = st.characters(codec="utf-8").filter(_allowed)
    return st.text(alphabet=st.sampled_from(PART_ALPHABET) | anything, min_size=1, max_size=20)


def form_text() -> st.SearchStrategy[str]:
    """Free text a form can carry back exactly: no NUL, no line break (see the module)."""
    return FREE_TEXT.map(lambda s: s.translate({0: None, 10: None, 13: None})).filter(bool)


@dataclass(frozen=True)
class FormsCase:
    """One example: the three namespace parts, a recall query and a session filter."""

    parts: tuple[str, str, str]
    query: str
    session: str


def cases() -> st.SearchStrategy[FormsCase]:
    """Examples over every class (parts may still be refused: see :func:`valid`)."""
    return st.builds(FormsCase, st.tuples(part(), part(), part()), form_text(), form_text())


def valid(case: FormsCase) -> bool:
    """Whether ``case``'s namespace passes the engine's namespace rules."""
    from memory_ledger.ledger.ids import check_namespace

    try:
        check_namespace(Namespace(*case.parts))
    except ValueError:
        return False
    return True


def build_store(folder: Path) -> Path:
    """A store with one memory in :data:`NAMESPACE`; its folder."""
    with MemoryEngine.open(folder) as engine:
        engine.remember(NAMESPACE, STATEMENT)
    return folder


class Page(HTMLParser):
    """A parsed page: each form's fields (name → values), the links, and the text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: dict[str, dict[str, list[str]]] = {}
        self.links: list[str] = []
        self.chunks: list[str] = []
        self._form: dict[str, list[str]] | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Collect forms, input values and link targets."""
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self._form = self.forms.setdefault(found.get("action", ""), {})
        elif tag == "input" and self._form is not None and "name" in found:
            self._form.setdefault(found["name"], []).append(found.get("value", ""))
        elif tag == "a" and "href" in found:
            self.links.append(found["href"])

    def handle_endtag(self, tag: str) -> None:
        """Close the form."""
        if tag == "form":
            self._form = None

    def handle_data(self, data: str) -> None:
        """Keep the text."""
        self.chunks.append(data)

    @property
    def text(self) -> str:
        """The page's text, as a reader sees it (marks included)."""
        return "".join(self.chunks)


def marked(text: str) -> str:
    """``text`` as the page's text shows it: each hidden character as ``U+XXXX``."""
    from memory_ledger.replay.ui.text import HIDDEN

    return HIDDEN.sub(lambda m: f"U+{ord(m.group()):04X}", text)


def check_page(client: Any, path: str, params: dict[str, str], case: FormsCase) -> Page:
    """Render ``path`` with ``params`` and check it: its form gives back every parameter it
    holds, each namespace link names the namespace, and the text marks hidden characters.

    :raises AssertionError: naming what differs.
    """
    from memory_ledger.replay.ui.text import HIDDEN

    response = client.get(path, params=params)
    assert response.status_code == 200, (path, response.text[-300:])
    page = Page(response.text)
    fields = page.forms[path]
    for name, value in params.items():
        assert fields.get(name) == [value], (path, name, value, fields.get(name))
    namespace = dict(zip("tps", case.parts, strict=True))
    for link in page.links:
        query = parse_qs(urlsplit(link).query, keep_blank_values=True)
        if "t" in query:
            assert {k: query[k] for k in "tps"} == {k: [v] for k, v in namespace.items()}, link
    tenant, principal, scope = (marked(p) for p in case.parts)
    assert f"namespace {tenant} / {principal} / {scope}" in page.text, page.text[:300]
    assert not HIDDEN.search(page.text), repr(HIDDEN.findall(page.text))
    return page


def check_forms(client: Any, case: FormsCase) -> None:
    """Every form of the debugger round-trips ``case`` (recall, timeline, time travel), and
    the recall page's text names the query with its marks.

    :raises AssertionError: naming what differs.
    """
    space = dict(zip("tps", case.parts, strict=True))
    recall = check_page(client, "/recall", {**space, "q": case.query}, case)
    assert f"for “{marked(case.query)}”" in recall.text
    check_page(client, "/timeline", {**space, "session": case.session}, case)
    check_page(client, "/timetravel", space, case)


@dataclass
class Tally:
    """What a run tried."""

    examples: int = 0
    refused: int = 0
    classes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))

    def count(self, case: FormsCase) -> None:
        """Count one example and the classes it drew from."""
        self.examples += 1
        text = "".join(case.parts) + case.query + case.session
        for name, chars in CLASSES.items():
            self.classes[name] += any(c in chars for c in text)


def run(client: Any, examples: int, start: int) -> Tally:
    """Check ``examples`` generated cases (seed ``start``) through ``client``."""
    tally = Tally()

    @seed(start)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cases())
    def forms(case: FormsCase) -> None:
        if not valid(case):
            tally.refused += 1
            return
        tally.count(case)
        check_forms(client, case)

    forms()
    return tally


def main(argv: list[str]) -> int:
    """Run the long profile and print what it tried."""
    from starlette.testclient import TestClient

    from memory_ledger.replay.ui import UiState, create_app, open_read_only

    parser = argparse.ArgumentParser(prog="python -m benchmarks ui-forms", description=__doc__)
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--quick", action="store_true", help="50 examples")
    args = parser.parse_args(argv)
    examples = 50 if args.quick else args.examples
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ui-forms-") as folder:
        engine = open_read_only(build_store(Path(folder) / "store"))
        state = UiState(engine, "bench-token")
        try:
            with TestClient(create_app(state)) as client:
                client.get("/?token=bench-token")
                try:
                    tally = run(client, examples, args.seed)
                except AssertionError as failure:
                    print(f"VIOLATION: {failure}")
                    return 1
        finally:
            state.close()
            engine.close()
    seconds = time.perf_counter() - started
    rows = [
        ("examples tried", str(tally.examples)),
        ("refused by the namespace rules first", str(tally.refused)),
        *((f"examples with {name}", str(n)) for name, n in tally.classes.items()),
        ("pages checked", str(3 * tally.examples)),
        ("seconds", f"{seconds:.1f}"),
        ("load (1, 5, 15 min)", " ".join(f"{x:.2f}" for x in os.getloadavg())),
    ]
    print_table("Debugger forms keep every character", rows)
    figures = {
        "examples": tally.examples,
        "refused": tally.refused,
        "classes": tally.classes,
        "seconds": round(seconds, 1),
        "load": os.getloadavg(),
    }
    print(f"figures written to {save('ui_forms', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
