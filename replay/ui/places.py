"""Where in the HTML each ``{{ ... }}`` of a template lands, decided once when the template
is compiled: in the page's text (shown with hidden-character marks, :func:`.text.show`) or
in a place whose text is a value (exact, :func:`.text.exact`).

:class:`ExactInAttributes` is a Jinja2 extension: it reads the literal HTML between the
expressions of a template, keeps track of whether the next expression sits inside a tag
(an attribute) or inside an element whose content is a value (``<option>``, ``<title>``,
``<textarea>``), and there rewrites ``{{ expr }}`` as ``{{ (expr)|exact }}``. A template
author never has to remember which filter goes where; an unquoted attribute value holding
an expression is refused when the template compiles (its text could end the attribute).
"""

from __future__ import annotations

from collections.abc import Iterator

from jinja2.exceptions import TemplateSyntaxError
from jinja2.ext import Extension
from jinja2.lexer import (
    TOKEN_DATA,
    TOKEN_LPAREN,
    TOKEN_NAME,
    TOKEN_PIPE,
    TOKEN_RPAREN,
    TOKEN_VARIABLE_BEGIN,
    TOKEN_VARIABLE_END,
    Token,
    TokenStream,
)

__all__ = ["VALUE_ELEMENTS", "ExactInAttributes", "HtmlPlace"]

VALUE_ELEMENTS = frozenset({"option", "title", "textarea", "script", "style"})
"""Elements whose content is a value or raw text, never markup: no mark inside them."""

_TEXT, _LT, _NAME, _TAG, _QUOTED = range(5)


class HtmlPlace:
    """The place the HTML read so far ends in (a small tokenizer of literal template HTML:
    text, a tag's name, inside a tag, inside a quoted attribute value)."""

    def __init__(self) -> None:
        self.state = _TEXT
        self.quote = ""
        self.name = ""
        self.closing = False
        self.last = ""
        """The last character inside the tag that is not a space."""
        self.element: str | None = None
        """The value element (:data:`VALUE_ELEMENTS`) the text is in, if any."""

    @property
    def exact(self) -> bool:
        """Whether an expression here must keep its exact text (no mark)."""
        return self.state != _TEXT or self.element is not None

    @property
    def unquoted_value(self) -> bool:
        """Whether an expression here would be an unquoted attribute value."""
        return self.state == _TAG and self.last == "="

    def feed(self, html: str) -> None:
        """Read literal HTML."""
        for char in html:
            self._step(char)

    def _step(self, char: str) -> None:
        if self.state == _TEXT:
            if char == "<":
                self.state = _LT
        elif self.state == _LT:
            if char.isalpha() or char == "/":
                self.state, self.closing = _NAME, char == "/"
                self.name = "" if self.closing else char.lower()
            elif char in "!?":
                self.state, self.name, self.closing = _TAG, "!", False
            else:
                self.state = _TEXT  # a "<" in text
        elif self.state == _NAME:
            if char == ">":
                self._end_tag()
            elif char.isspace() or char == "/":
                self.state, self.last = _TAG, ""
            else:
                self.name += char.lower()
        elif self.state == _TAG:
            if char in "\"'":
                self.state, self.quote = _QUOTED, char
            elif char == ">":
                self._end_tag()
            elif not char.isspace():
                self.last = char
        elif char == self.quote:  # _QUOTED
            self.state, self.last = _TAG, char

    def _end_tag(self) -> None:
        self.state = _TEXT
        if self.closing and self.name == self.element:
            self.element = None
        elif not self.closing and self.name in VALUE_ELEMENTS:
            self.element = self.name


class ExactInAttributes(Extension):
    """Rewrite every ``{{ expr }}`` in an attribute or a value element as
    ``{{ (expr)|exact }}`` (the environment must define the ``exact`` filter).

    :raises TemplateSyntaxError: (at compile time) an expression as an unquoted attribute
        value.
    """

    def filter_stream(self, stream: TokenStream) -> Iterator[Token]:
        """The template's tokens, with ``exact`` applied where the HTML needs it."""
        place = HtmlPlace()
        wrapped = False
        for token in stream:
            if token.type == TOKEN_DATA:
                place.feed(token.value)
            elif token.type == TOKEN_VARIABLE_BEGIN:
                if place.unquoted_value:
                    msg = "quote the attribute value that holds this expression"
                    raise TemplateSyntaxError(msg, token.lineno, stream.name, stream.filename)
                wrapped = place.exact
                if wrapped:
                    yield token
                    yield Token(token.lineno, TOKEN_LPAREN, "(")
                    continue
            elif token.type == TOKEN_VARIABLE_END and wrapped:
                wrapped = False
                yield Token(token.lineno, TOKEN_RPAREN, ")")
                yield Token(token.lineno, TOKEN_PIPE, "|")
                yield Token(token.lineno, TOKEN_NAME, "exact")
            yield token
