"""The debugger's forms and links carry the exact text (issue 34 item 6): hidden-character
marks are drawn in the page's text only, never inside an attribute. The property runs the
check of ``benchmarks.ui_forms`` with the fast profile; its long profile is
``python -m benchmarks ui-forms``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from starlette.testclient import TestClient

from benchmarks.ui_forms import (
    CLASSES,
    NAMESPACE,
    STATEMENT,
    FormsCase,
    Page,
    build_store,
    cases,
    check_forms,
    valid,
)
from memory_ledger.replay.ui import UiState, create_app, open_read_only
from tests.ui.conftest import TOKEN

SPACE = {"t": NAMESPACE.tenant, "p": NAMESPACE.principal, "s": NAMESPACE.scope_id}


@pytest.fixture(scope="module")
def forms_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    engine = open_read_only(build_store(tmp_path_factory.mktemp("forms") / "store"))
    state = UiState(engine, TOKEN)
    try:
        with TestClient(create_app(state)) as client:
            assert client.get(f"/?token={TOKEN}").status_code == 200
            yield client
    finally:
        state.close()
        engine.close()


def submit(client: TestClient, page: Page, action: str) -> str:
    """What a browser gets back when it submits ``page``'s form ``action`` unchanged."""
    fields = tuple((name, value) for name, values in page.forms[action].items() for value in values)
    response = client.get(action, params=fields)
    assert response.status_code == 200, response.text[-300:]
    return response.text


def test_a_zero_width_principal_submits_to_its_own_namespace(forms_client: TestClient) -> None:
    page = Page(forms_client.get("/recall", params={**SPACE, "q": "Lisbon"}).text)
    assert page.forms["/recall"]["p"] == [NAMESPACE.principal]
    assert STATEMENT in submit(forms_client, page, "/recall")
    for action in ("/timeline", "/timetravel"):
        form = Page(forms_client.get(action, params=SPACE).text)
        assert form.forms[action]["p"] == [NAMESPACE.principal]
        assert "namespace acme / alU+200Bice / assistant" in form.text
    listed = Page(forms_client.get("/").text)
    opened = next(link for link in listed.links if link.startswith("/namespace?"))
    assert STATEMENT in forms_client.get(opened).text


def test_a_hidden_character_in_the_query_stays_in_the_query_box(
    forms_client: TestClient,
) -> None:
    query = 'Lis\u200bbon "<&>\u202e'
    page = Page(forms_client.get("/recall", params={**SPACE, "q": query}).text)
    assert page.forms["/recall"]["q"] == [query]
    assert "for “Lis\u200bbon" not in page.text and "for “LisU+200Bbon" in page.text
    again = Page(submit(forms_client, page, "/recall"))
    assert again.forms["/recall"]["q"] == [query]


def test_the_example_classes_reach_every_kind_of_character() -> None:
    assert {"zero-width", "direction", "markup", "beyond the BMP", "combining"} <= set(CLASSES)
    assert valid(FormsCase(("acme", "al\u200bice", "a\U0001f600"), "q", "s"))
    assert not valid(FormsCase(("acme", "al\u202eice", "a"), "q", "s"))


@settings(
    max_examples=40,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
def test_every_form_round_trips_its_values(forms_client: TestClient, case: FormsCase) -> None:
    assume(valid(case))
    check_forms(forms_client, case)


def test_the_forms_store_is_what_it_says(tmp_path: Path) -> None:
    assert "\u200b" in NAMESPACE.principal
    assert build_store(tmp_path / "store").is_dir()


def test_marks_go_to_text_and_exact_text_to_attributes_and_values() -> None:
    from jinja2 import TemplateSyntaxError

    from memory_ledger.replay.ui.app import templates

    env = templates()
    page = env.from_string(
        "<a title=\"{{ x }}\" href='{{ x }}'>{{ x }}</a>"
        "<select><option>{{ x }}</option></select><p>{{ x }}</p><title>{{ x }}</title>"
    ).render(x='a\u200b"<b>\x07')
    mark = '<span class="ctl" title="hidden character">U+200B</span>'
    exact = "a&#x200B;&#34;&lt;b&gt;\x07"
    assert page == (
        f"<a title=\"{exact}\" href='{exact}'>a{mark}&#34;&lt;b&gt;"
        '<span class="ctl" title="hidden character">U+0007</span></a>'
        f"<select><option>{exact}</option></select>"
        f"<p>a{mark}&#34;&lt;b&gt;"
        '<span class="ctl" title="hidden character">U+0007</span></p>'
        f"<title>{exact}</title>"
    )
    with pytest.raises(TemplateSyntaxError, match="quote the attribute value"):
        env.from_string("<input value={{ x }}>")
